package yunikorn

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/apache/yunikorn-k8shim/pkg/admission/conf"
)

// TestMigrateParsesAsK8shim checks `yunikorn-userinfo migrate` against
// YuniKorn itself: for the example ConfigMaps of the conversion's tests and
// a matrix of awkward values in the access control and filtering keys
// (stray commas, commas inside patterns, patterns that do not compile,
// every spelling strconv.ParseBool knows and some it does not), the
// settings migrate prints hold exactly what k8shim v1.9.0's own admission
// controller configuration (pkg/admission/conf.NewAdmissionControllerConf)
// runs with.
func TestMigrateParsesAsK8shim(t *testing.T) {
	binary := serveBinary(t)

	type source struct {
		name       string
		configMaps []*v1.ConfigMap
	}
	var sources []source
	examples, err := filepath.Glob("../../internal/yunikorn/ykconfig/testdata/*")
	if err != nil || len(examples) == 0 {
		t.Fatalf("the examples: %v (%d)", err, len(examples))
	}
	for _, ex := range examples {
		data, err := os.ReadFile(ex)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, source{filepath.Base(ex), readConfigMaps(t, data)})
	}
	lists := []string{"", ",", " , ", "^a$", " ^a$ , ,^b$,", "^a{1,2}$", "[", "^a$,(b", "x,,y", `\,`, "^ä$,^system:serviceaccount:ns:sa$"}
	bools := []string{"true", "True", "TRUE", "t", "1", "false", "F", "0", "yes", " true", ""}
	for i, l := range lists {
		b := bools[i%len(bools)]
		for _, key := range []string{conf.AMAccessControlSystemUsers, conf.AMAccessControlExternalUsers, conf.AMAccessControlExternalGroups,
			conf.AMFilteringProcessNamespaces, conf.AMFilteringBypassNamespaces, conf.AMFilteringLabelNamespaces, conf.AMFilteringNoLabelNamespaces} {
			sources = append(sources, source{key + "=" + strconv.Quote(l), []*v1.ConfigMap{{
				ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-configs"},
				Data:       map[string]string{key: l, conf.AMAccessControlBypassAuth: b, conf.AMFilteringGenerateUniqueAppIds: b},
			}}})
		}
	}
	for _, b := range bools {
		sources = append(sources, source{"trustControllers=" + strconv.Quote(b), []*v1.ConfigMap{
			{ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-defaults"}, Data: map[string]string{conf.AMAccessControlTrustControllers: "false"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-configs"}, Data: map[string]string{conf.AMAccessControlTrustControllers: b}},
		}})
	}

	dir := t.TempDir()
	for i, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			// YuniKorn: defaults first, then configs, as its informer
			// handler indexes them.
			byName := map[string]*v1.ConfigMap{}
			for _, cm := range src.configMaps {
				byName[cm.Name] = cm
			}
			yk := conf.NewAdmissionControllerConf([]*v1.ConfigMap{byName["yunikorn-defaults"], byName["yunikorn-configs"]})

			path := filepath.Join(dir, strconv.Itoa(i)+".yaml")
			writeList(t, path, src.configMaps)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, binary, "migrate", "--explicit", "-o", "json", "--application-ownership", "off", "--validate=false", path)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("migrate: %v: %s", err, stderr.String())
			}
			var got struct {
				BypassAuth           bool     `json:"bypassAuth"`
				TrustControllers     bool     `json:"trustControllers"`
				SystemUsers          []string `json:"systemUsers"`
				ExternalUsers        []string `json:"externalUsers"`
				ExternalGroups       []string `json:"externalGroups"`
				ApplicationOwnership struct {
					GenerateUniqueAppIds bool `json:"generateUniqueAppIds"`
				} `json:"applicationOwnership"`
				// migrate writes scheduling from the filtering keys, every
				// key of it with --explicit.
				Scheduling *struct {
					ProcessNamespaces    []string `json:"processNamespaces"`
					BypassNamespaces     []string `json:"bypassNamespaces"`
					LabelNamespaces      []string `json:"labelNamespaces"`
					NoLabelNamespaces    []string `json:"noLabelNamespaces"`
					GenerateUniqueAppIds bool     `json:"generateUniqueAppIds"`
				} `json:"scheduling"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("migrate printed %q: %v", stdout.String(), err)
			}
			check := func(what string, want, got any) {
				t.Helper()
				w, _ := json.Marshal(want)
				g, _ := json.Marshal(got)
				if !bytes.Equal(w, g) {
					t.Errorf("%s: YuniKorn runs with %s, migrate wrote %s\nreport:\n%s", what, w, g, stderr.String())
				}
			}
			// bypassAuth true is how YuniKorn's controller stands aside (the
			// hand-over), never carried over: migrate writes false and
			// reports the hand-over exactly when YuniKorn reads true.
			check("bypassAuth", false, got.BypassAuth)
			if handedOver := strings.Contains(stderr.String(), "bypassAuth: handed over"); handedOver != yk.GetBypassAuth() {
				t.Errorf("bypassAuth: YuniKorn reads %v, migrate reported the hand-over: %v\nreport:\n%s", yk.GetBypassAuth(), handedOver, stderr.String())
			}
			check("trustControllers", yk.GetTrustControllers(), got.TrustControllers)
			check("systemUsers", patterns(yk.GetSystemUsers()), got.SystemUsers)
			check("externalUsers", patterns(yk.GetExternalUsers()), got.ExternalUsers)
			check("externalGroups", patterns(yk.GetExternalGroups()), got.ExternalGroups)
			check("generateUniqueAppId", yk.GetGenerateUniqueAppIds(), got.ApplicationOwnership.GenerateUniqueAppIds)
			if got.Scheduling == nil {
				t.Fatalf("migrate wrote no scheduling: %s", stdout.String())
			}
			check("processNamespaces", patterns(yk.GetProcessNamespaces()), got.Scheduling.ProcessNamespaces)
			check("bypassNamespaces", patterns(yk.GetBypassNamespaces()), got.Scheduling.BypassNamespaces)
			check("labelNamespaces", patterns(yk.GetLabelNamespaces()), got.Scheduling.LabelNamespaces)
			check("noLabelNamespaces", patterns(yk.GetNoLabelNamespaces()), got.Scheduling.NoLabelNamespaces)
			check("scheduling.generateUniqueAppIds", yk.GetGenerateUniqueAppIds(), got.Scheduling.GenerateUniqueAppIds)
		})
	}
}

// serveBinary is the yunikorn-userinfo binary under test: $E2E_SERVE_BINARY,
// else the repository's build.
func serveBinary(t *testing.T) string {
	t.Helper()
	binary := os.Getenv("E2E_SERVE_BINARY")
	if binary == "" {
		binary = "../../build/yunikorn-userinfo"
	}
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("the yunikorn-userinfo binary: %v (run `make build`, or set E2E_SERVE_BINARY)", err)
	}
	return binary
}

func patterns(res []*regexp.Regexp) []string {
	out := []string{}
	for _, re := range res {
		out = append(out, re.String())
	}
	return out
}

func readConfigMaps(t *testing.T, data []byte) []*v1.ConfigMap {
	t.Helper()
	var doc struct {
		Kind  string         `json:"kind"`
		Items []v1.ConfigMap `json:"items"`
	}
	j, err := utilyaml.ToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(j, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Kind == "List" {
		out := make([]*v1.ConfigMap, len(doc.Items))
		for i := range doc.Items {
			out[i] = &doc.Items[i]
		}
		return out
	}
	cm := &v1.ConfigMap{}
	if err := json.Unmarshal(j, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Name == "" {
		cm.Name = "yunikorn-configs"
	}
	return []*v1.ConfigMap{cm}
}

func writeList(t *testing.T, path string, cms []*v1.ConfigMap) {
	t.Helper()
	items := make([]any, len(cms))
	for i, cm := range cms {
		c := cm.DeepCopy()
		c.APIVersion, c.Kind = "v1", "ConfigMap"
		items[i] = c
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
