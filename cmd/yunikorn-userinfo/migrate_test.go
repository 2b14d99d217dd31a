package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/ykconfig"
)

// The example ConfigMaps of the conversion's own tests.
const ykExamples = "../../internal/yunikorn/ykconfig/testdata"

// TestMigrate_validSettings: for every example and every combination of
// options, what migrate prints is accepted by the embedded policy's
// validate_settings, asked here independently of migrate's own check, on
// the document decoded as run -s and serve -s decode it.
func TestMigrate_validSettings(t *testing.T) {
	cache := compilationCache(t)
	eng, err := engine.New(t.Context(), embeddedPolicy, engine.Options{MaxInstances: 1, CompilationCache: cache})
	require.NoError(t, err)
	t.Cleanup(func() { _ = eng.Close(t.Context()) })

	examples, err := filepath.Glob(filepath.Join(ykExamples, "*"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(examples), 4)
	optionSets := [][]string{
		nil,
		{"--explicit"},
		{"--queue-check", "enforce", "--application-ownership", "warn"},
		{"--explicit", "--queue-check", "off", "--application-ownership", "off", "-n", "yk"},
	}
	for _, ex := range examples {
		for _, format := range []string{"yaml", "json"} {
			for _, opts := range optionSets {
				args := append([]string{"migrate", ex, "-o", format}, opts...)
				t.Run(filepath.Base(ex)+" "+strings.Join(args[2:], " "), func(t *testing.T) {
					res := runCLIWith(t, cache, "", args...)
					require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
					assert.True(t, strings.HasPrefix(res.stderr, "migrate: "), "stderr: %s", res.stderr)
					if format == "json" {
						assert.True(t, json.Valid([]byte(res.stdout)), "%s", res.stdout)
					}
					s, err := settings.Decode("stdout", []byte(res.stdout))
					require.NoError(t, err)
					v, err := eng.ValidateSettings(t.Context(), s)
					require.NoError(t, err)
					assert.True(t, v.Valid, "refused: %s\n%s", v.Message, res.stdout)
				})
			}
		}
	}
}

// podRequest is a Pod CREATE by user with groups, carrying annotations.
func podRequest(user string, groups []string, annotations map[string]string) string {
	if groups == nil {
		groups = []string{}
	}
	obj := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "team-a", "annotations": annotations},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}},
	}
	req := map[string]any{
		"uid": "u1", "kind": map[string]string{"group": "", "version": "v1", "kind": "Pod"},
		"resource":  map[string]string{"group": "", "version": "v1", "resource": "pods"},
		"namespace": "team-a", "operation": "CREATE",
		"userInfo": map[string]any{"username": user, "groups": groups},
		"object":   obj,
	}
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	return string(b)
}

type runResponse struct {
	Allowed bool   `json:"allowed"`
	Patch   string `json:"patch"`
	Status  *struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	} `json:"status"`
}

// TestMigrate_behaviour: the migrated settings, given to run -s, let the
// front-ends and groups that YuniKorn's configuration allows supply the
// annotation, refuse everyone else's, and record a submitter without one.
func TestMigrate_behaviour(t *testing.T) {
	cache := compilationCache(t)
	dir := t.TempDir()
	migrated := func(t *testing.T, example string) string {
		res := runCLIWith(t, cache, "", "migrate", filepath.Join(ykExamples, example))
		require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
		path := filepath.Join(dir, example+".settings.yaml")
		require.NoError(t, os.WriteFile(path, []byte(res.stdout), 0o600))
		return path
	}
	evaluate := func(t *testing.T, settingsPath, request string) runResponse {
		res := runCLIWith(t, cache, request, "run", "-s", settingsPath, "-r", "-")
		require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
		var r runResponse
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &r), "%s", res.stdout)
		return r
	}
	carol := map[string]string{"yunikorn.apache.org/user.info": `{"user":"carol","groups":["analysts"]}`}

	frontends := migrated(t, "frontends.yaml")
	t.Run("allowed front-end supplies", func(t *testing.T) {
		r := evaluate(t, frontends, podRequest("jupyterhub", []string{"system:authenticated"}, carol))
		assert.True(t, r.Allowed)
		patch, err := base64.StdEncoding.DecodeString(r.Patch)
		require.NoError(t, err)
		assert.NotContains(t, string(patch), "user.info", "the supplied value is kept")
		// The filtering keys became scheduling: team-a is processed and
		// labelled (labelNamespaces ^team-).
		assert.Contains(t, string(patch), `{"op":"add","path":"/spec/schedulerName","value":"yunikorn"}`)
		assert.Contains(t, string(patch), `"yunikorn.apache.org/app-id":"yunikorn-team-a-autogen"`)
	})
	t.Run("allowed group supplies", func(t *testing.T) {
		r := evaluate(t, frontends, podRequest("pat", []string{"platform-admins"}, carol))
		assert.True(t, r.Allowed)
	})
	t.Run("others may not", func(t *testing.T) {
		r := evaluate(t, frontends, podRequest("livy-impostor", []string{"dev"}, carol))
		assert.False(t, r.Allowed)
		require.NotNil(t, r.Status)
		assert.Equal(t, 403, r.Status.Code)
		assert.Equal(t, "user livy-impostor with groups [dev] is not allowed to set user annotation; "+
			`the value is not exactly your record; it would be {"user":"livy-impostor","groups":["dev"]}`, r.Status.Message)
	})
	t.Run("submitter recorded", func(t *testing.T) {
		r := evaluate(t, frontends, podRequest("alice", []string{"dev"}, nil))
		assert.True(t, r.Allowed)
		patch, err := base64.StdEncoding.DecodeString(r.Patch)
		require.NoError(t, err)
		assert.Contains(t, string(patch), `"{\"user\":\"alice\",\"groups\":[\"dev\"]}"`)
	})
	// YuniKorn splits "^svc-[a-z]{2,8}$" at the comma: "svc-ab" matches
	// neither piece there, so it may not supply the annotation here either,
	// while a name containing "8}" matches the second piece in both.
	mistakes := migrated(t, "mistakes.json")
	t.Run("split as YuniKorn splits", func(t *testing.T) {
		assert.False(t, evaluate(t, mistakes, podRequest("svc-ab", nil, carol)).Allowed)
		assert.True(t, evaluate(t, mistakes, podRequest("x8}", nil, carol)).Allowed)
		assert.True(t, evaluate(t, mistakes, podRequest("bo", []string{"data-eng"}, carol)).Allowed)
	})
	open := migrated(t, "open.yaml")
	// bypassAuth "true" is YuniKorn's admission controller standing
	// aside (the hand-over): not carried over, so a forged value is
	// refused and a missing one recorded.
	t.Run("bypassAuth not carried over", func(t *testing.T) {
		assert.False(t, evaluate(t, open, podRequest("anyone", nil, carol)).Allowed)
		assert.True(t, evaluate(t, open, podRequest("anyone", nil, nil)).Allowed)
	})
}

func TestMigrate_errors(t *testing.T) {
	cache := compilationCache(t)
	example := filepath.Join(ykExamples, "frontends.yaml")
	other := writeFile(t, "other.yaml", "kind: ConfigMap\nmetadata: {name: scheduler-config}\ndata: {}\n")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"nothing", []string{"migrate"}, "nothing to read: give the ConfigMap FILE(s), or --kubeconfig"},
		{"both", []string{"migrate", example, "--kubeconfig", "k"}, "give FILEs or --kubeconfig, not both"},
		{"format", []string{"migrate", example, "-o", "toml"}, `invalid --output "toml": want yaml or json`},
		{"mode", []string{"migrate", example, "--application-ownership", "on"}, `convert: application ownership mode "on": want one of enforce, warn, off`},
		{"same twice", []string{"migrate", example, example}, example + ": ConfigMap yunikorn-configs given twice"},
		{"other ConfigMap", []string{"migrate", other}, other + `: ConfigMap "scheduler-config" is neither yunikorn-configs nor yunikorn-defaults, the two YuniKorn reads`},
		{"missing file", []string{"migrate", "testdata/none.yaml"}, "read ConfigMaps: open testdata/none.yaml: no such file or directory"},
		{"kubeconfig", []string{"migrate", "--kubeconfig", "testdata/none.kubeconfig"}, "read --kubeconfig testdata/none.kubeconfig: ..."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLIWith(t, cache, "", tc.args...)
			assert.Equal(t, 1, res.code)
			assert.Empty(t, res.stdout)
			if prefix, ok := strings.CutSuffix(tc.want, "..."); ok {
				assert.True(t, strings.HasPrefix(res.stderr, "Error: "+prefix), "stderr: %s", res.stderr)
				return
			}
			assert.Equal(t, "Error: "+tc.want+"\n", res.stderr)
		})
	}
}

// TestMigrate_kubeconfig reads the ConfigMaps from an API server (a fake
// one answering the two GETs): yunikorn-defaults absent, yunikorn-configs
// present in the namespace given, through the context given.
func TestMigrate_kubeconfig(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/yk/configmaps/yunikorn-configs":
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"yunikorn-configs","namespace":"yk"},`+
				`"data":{"admissionController.accessControl.externalUsers":"^livy$,","service.policyGroup":"batch"}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	defer srv.Close()
	kubeconfig := writeFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: "`+srv.URL+`"}
- name: wrong
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: fake
  context: {cluster: fake, user: u}
- name: wrong
  context: {cluster: wrong, user: u}
current-context: wrong
`)
	res := runCLIWith(t, compilationCache(t), "", "migrate", "--kubeconfig", kubeconfig, "--context", "fake", "-n", "yk",
		"-o", "json", "--queue-check", "warn")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	// generateUniqueAppId is not set: migrate also looks for Pods in
	// generated applications, which this server does not serve.
	assert.Equal(t, []string{"/api/v1/namespaces/yk/configmaps/yunikorn-defaults", "/api/v1/namespaces/yk/configmaps/yunikorn-configs",
		"/api/v1/pods"}, paths)
	assert.Contains(t, res.stderr, "migrate: could not look for Pods in generated applications (audit finds them): list Pods: ")
	assert.JSONEq(t, `{"externalUsers":["^livy$"],"queueCheck":{"mode":"warn","namespace":"yk","policyGroup":"batch"},"scheduling":{}}`, res.stdout)
	assert.Contains(t, res.stderr, "migrate: yk/yunikorn-configs: "+ykconfig.CheckedAgainst+"\n")

	res = runCLIWith(t, compilationCache(t), "", "migrate", "--kubeconfig", kubeconfig, "--context", "fake", "-n", "elsewhere")
	assert.Equal(t, 1, res.code)
	assert.Equal(t, "Error: no ConfigMap yunikorn-configs or yunikorn-defaults in namespace \"elsewhere\": is YuniKorn installed there? (--namespace)\n", res.stderr)
}

// TestMigrate_autogen: with generateUniqueAppId false (YuniKorn's
// default, or set so), the report says that the Pods without an
// application ID of a namespace share one generated application and what
// to do; with --kubeconfig it names the namespaces whose generated
// application already holds Pods without user.info, reading the Pods page
// by page. With unique IDs there is no such line, and no Pod is read.
func TestMigrate_autogen(t *testing.T) {
	cache := compilationCache(t)
	const line = "admissionController.filtering.generateUniqueAppId: warning: "
	res := runCLIWith(t, cache, "", "migrate", filepath.Join(ykExamples, "frontends.yaml"))
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stderr, line+"not set (YuniKorn's default false): every Pod without an application ID in a namespace "+
		"joins one application, yunikorn-NAMESPACE-autogen, which YuniKorn charges to the user of whichever Pod created it first "+
		"(\"nobody\" when")
	assert.Contains(t, res.stderr, "What follows: this webhook records each submitter, yet YuniKorn keeps charging their Pods to "+
		"that application's user (per-user queues, limits and ACLs see no change), and with applicationOwnership on, every other "+
		"user of the namespace is refused. To do: set admissionController.filtering.generateUniqueAppId \"true\" (and "+
		"scheduling.generateUniqueAppIds: true in these settings: --unique-app-ids)")
	assert.Contains(t, res.stderr, "or give the workloads application IDs")
	assert.Contains(t, res.stderr, "audit --yunikorn URL")
	assert.NotContains(t, res.stdout, "generateUniqueAppIds: true")
	// --unique-app-ids writes unique IDs, and says that YuniKorn's key
	// must follow in the hand-over.
	res = runCLIWith(t, cache, "", "migrate", filepath.Join(ykExamples, "frontends.yaml"), "--unique-app-ids", "--application-ownership", "warn")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Equal(t, 2, strings.Count(res.stdout, "generateUniqueAppIds: true # from --unique-app-ids\n"), "scheduling and applicationOwnership: %s", res.stdout)
	assert.Contains(t, res.stderr, "The output sets scheduling.generateUniqueAppIds: true (--unique-app-ids); set "+
		"admissionController.filtering.generateUniqueAppId \"true\" in yunikorn-configs in the same patch that hands user.info over")
	res = runCLIWith(t, cache, "", "migrate", filepath.Join(ykExamples, "frontends.yaml"), "--scheduling=false")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stderr, "applicationOwnership.generateUniqueAppIds (with --application-ownership): true in these settings")
	res = runCLIWith(t, cache, "", "migrate", filepath.Join(ykExamples, "layered.yaml"))
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.NotContains(t, res.stderr, line, `"1" is true: unique IDs`)

	pod := func(ns, name, scheduler string, labels, annotations map[string]string) map[string]any {
		return map[string]any{"metadata": map[string]any{"namespace": ns, "name": name, "labels": labels, "annotations": annotations},
			"spec": map[string]any{"schedulerName": scheduler}}
	}
	ui := map[string]string{"yunikorn.apache.org/user.info": `{"user":"ann"}`}
	pages := [][]map[string]any{
		{
			pod("a", "bare", "yunikorn", nil, nil),                                      // in yunikorn-a-autogen, no user.info
			pod("a", "recorded", "yunikorn", nil, ui),                                   // recorded
			pod("b", "named", "yunikorn", map[string]string{"applicationId": "x"}, nil), // its own application
			pod("c", "other", "default-scheduler", nil, nil),                            // not YuniKorn's
			pod("e", "unique", "yunikorn", map[string]string{"applicationId": "e-uniqueautogen"}, nil),
		},
		{pod("d", "bare", "yunikorn", nil, nil), pod("d", "bare2", "yunikorn", nil, nil)},
	}
	unique := "false"
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path+"?"+r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/yunikorn/configmaps/yunikorn-configs":
			fmt.Fprintf(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"yunikorn-configs","namespace":"yunikorn"},`+
				`"data":{"admissionController.filtering.generateUniqueAppId":%q}}`, unique)
		case "/api/v1/pods":
			page, next := 0, "1"
			if r.URL.Query().Get("continue") == "1" {
				page, next = 1, ""
			}
			items, _ := json.Marshal(pages[page])
			fmt.Fprintf(w, `{"apiVersion":"v1","kind":"PodList","metadata":{"continue":%q},"items":%s}`, next, items)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	defer srv.Close()
	kubeconfig := writeFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: "`+srv.URL+`"}
users:
- name: u
  user: {token: t}
contexts:
- name: fake
  context: {cluster: fake, user: u}
current-context: fake
`)
	res = runCLIWith(t, cache, "", "migrate", "--kubeconfig", kubeconfig)
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stderr, line+`"false": every Pod without an application ID`)
	assert.Contains(t, res.stderr, "migrate: namespaces whose generated application yunikorn-NAMESPACE-autogen already holds Pods "+
		"without user.info (its owner may be \"nobody\" or the first Pod's user; recreate them once the IDs are unique or set): "+
		"a (1), d (2) (all 7 Pods read)\n")
	assert.Equal(t, []string{"/api/v1/pods?limit=500", "/api/v1/pods?continue=1&limit=500"}, paths[2:], "paged")

	unique, paths = "true", nil
	res = runCLIWith(t, cache, "", "migrate", "--kubeconfig", kubeconfig)
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.NotContains(t, res.stderr, line)
	assert.NotContains(t, res.stderr, "autogen")
	assert.Len(t, paths, 2, "no Pod read: %v", paths)
}
