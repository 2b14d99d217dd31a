package main

import (
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
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
	"github.com/yunikorn-userinfo/userinfo/internal/cel"
)

// kubewardenDocs splits migrate --kubewarden's output into its documents,
// decoded.
func kubewardenDocs(t *testing.T, out string) []map[string]any {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var docs []map[string]any
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			break
		}
		docs = append(docs, d)
	}
	return docs
}

func spec(t *testing.T, doc map[string]any) map[string]any {
	t.Helper()
	s, ok := doc["spec"].(map[string]any)
	require.True(t, ok, "spec of %v", doc)
	return s
}

// TestMigrate_kubewardenGolden: the two ClusterAdmissionPolicies printed
// for the examples, byte for byte (-update rewrites the golden files).
func TestMigrate_kubewardenGolden(t *testing.T) {
	cache := compilationCache(t)
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"migrate-kubewarden-frontends.golden", []string{filepath.Join(ykExamples, "frontends.yaml")}},
		{"migrate-kubewarden-open-follow.golden", []string{filepath.Join(ykExamples, "open.yaml"), "--follow", "--queue-check", "warn", "--twin-mode", "protect"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			res := runCLIWith(t, cache, "", append([]string{"migrate", "--kubewarden"}, tc.args...)...)
			require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
			path := filepath.Join("testdata", "golden", tc.golden)
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(res.stdout), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(want), res.stdout, "golden output (run with -update to accept a change)")
		})
	}
}

// TestMigrate_kubewarden: the mutating policy protects, the twin monitors
// (or protects with --twin-mode protect); with --twin-mode protect and
// settings that read nothing from the cluster, every field but the
// settings is deploy/kubewarden's; both settings are the
// migrated ones (the twin's with validateOnly), and the embedded policy
// accepts them.
func TestMigrate_kubewarden(t *testing.T) {
	cache := compilationCache(t)
	eng, err := engine.New(t.Context(), embeddedPolicy, engine.Options{MaxInstances: 1, CompilationCache: cache})
	require.NoError(t, err)
	t.Cleanup(func() { _ = eng.Close(t.Context()) })
	example := filepath.Join(ykExamples, "frontends.yaml")

	plain := runCLIWith(t, cache, "", "migrate", example)
	require.Equal(t, 0, plain.code, plain.stderr)
	want, err := settings.Decode("migrate", []byte(plain.stdout))
	require.NoError(t, err)

	res := runCLIWith(t, cache, "", "migrate", example, "--kubewarden")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Equal(t, plain.stderr, res.stderr, "the same report")
	docs := kubewardenDocs(t, res.stdout)
	require.Len(t, docs, 2)
	assert.Equal(t, "yunikorn-user-info", docs[0]["metadata"].(map[string]any)["name"])
	assert.Equal(t, "yunikorn-user-info-validate", docs[1]["metadata"].(map[string]any)["name"])
	assert.Equal(t, "protect", spec(t, docs[0])["mode"], "the mutating policy protects: in monitor its patches would be dropped")
	assert.Equal(t, "monitor", spec(t, docs[1])["mode"], "the twin watches")
	for i, d := range docs {
		raw, err := json.Marshal(spec(t, d)["settings"])
		require.NoError(t, err)
		var got map[string]any
		require.NoError(t, json.Unmarshal(raw, &got))
		var w map[string]any
		require.NoError(t, json.Unmarshal(want, &w))
		if i == 1 {
			w["validateOnly"] = true
		}
		assert.Equal(t, w, got, "policy %d: the migrated settings", i)
		v, err := eng.ValidateSettings(t.Context(), raw)
		require.NoError(t, err)
		assert.True(t, v.Valid, v.Message)
	}

	// deploy/kubewarden's settings read nothing from the cluster: no
	// scheduling setting.
	res = runCLIWith(t, cache, "", "migrate", example, "--kubewarden", "--twin-mode", "protect", "--module", "registry://example.com/p:v9",
		"--scheduling=false")
	require.Equal(t, 0, res.code, res.stderr)
	docs = kubewardenDocs(t, res.stdout)
	require.Len(t, docs, 2)
	for i, f := range []string{"clusteradmissionpolicy.yaml", "clusteradmissionpolicy-validate.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubewarden", f))
		require.NoError(t, err)
		var deploy map[string]any
		require.NoError(t, yaml.Unmarshal(raw, &deploy))
		ds, gs := spec(t, deploy), spec(t, docs[i])
		assert.Equal(t, "registry://example.com/p:v9", gs["module"])
		if i == 1 {
			// The twin's own condition carries the migrated allow-lists
			// (deploy/kubewarden's, the chart's defaults).
			raw, err := json.Marshal(gs["settings"])
			require.NoError(t, err)
			s, err := cel.ParseSettings(raw)
			require.NoError(t, err)
			for j, c := range []map[string]any{ds, gs} {
				conds := c["matchConditions"].([]any)
				last := conds[len(conds)-1].(map[string]any)
				require.Equal(t, cel.TwinConditionName, last["name"])
				if j == 1 {
					assert.Equal(t, cel.TwinCondition(s), last["expression"], "the twin's condition, from the migrated settings")
				}
				last["expression"] = "checked"
			}
		}
		for _, k := range []string{"settings", "module"} {
			delete(ds, k)
			delete(gs, k)
		}
		assert.Equal(t, ds, gs, "%s: everything but the settings and the module is deploy/kubewarden's", f)
		assert.Equal(t, deploy["metadata"], docs[i]["metadata"], f)
	}
}

// TestMigrate_follow: --follow writes followYuniKornConfig instead of
// copies of the followed keys, in the ConfigMaps' namespace or
// --namespace; the rest stays; the policy accepts it.
func TestMigrate_follow(t *testing.T) {
	cache := compilationCache(t)
	ns := writeFile(t, "cm.yaml", "kind: ConfigMap\nmetadata: {name: yunikorn-configs, namespace: yk}\ndata:\n"+
		"  admissionController.accessControl.externalUsers: \"^livy$\"\n  admissionController.filtering.bypassNamespaces: \"^kube-system$,^infra$\"\n")
	res := runCLIWith(t, cache, "", "migrate", ns, "--follow", "--application-ownership", "warn", "-o", "json")
	require.Equal(t, 0, res.code, res.stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	assert.Equal(t, map[string]any{
		"followYuniKornConfig": map[string]any{"namespace": "yk"},
		"applicationOwnership": map[string]any{"mode": "warn"},
		"scheduling":           map[string]any{},
	}, got)
	assert.Contains(t, res.stderr, `admissionController.accessControl.externalUsers: mapped: "^livy$" -> externalUsers: ["^livy$"]`,
		"the report says what the policy will follow")
	assert.Contains(t, res.stderr, `followYuniKornConfig: mapped: "yk": the access control keys above`)

	res = runCLIWith(t, cache, "", "migrate", ns, "--follow", "-n", "other", "-o", "json")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, `"namespace": "other"`)
}

func TestMigrate_kubewardenErrors(t *testing.T) {
	cache := compilationCache(t)
	example := filepath.Join(ykExamples, "frontends.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--module", "registry://x"}, "--module needs --kubewarden"},
		{[]string{"--twin-mode", "protect"}, "--twin-mode needs --kubewarden"},
		{[]string{"--kubewarden", "--twin-mode", "enforce"}, `invalid --twin-mode "enforce": want monitor or protect`},
		{[]string{"--kubewarden", "-o", "json"}, "--kubewarden writes YAML: drop --output json"},
	} {
		res := runCLIWith(t, cache, "", append([]string{"migrate", example}, tc.args...)...)
		assert.Equal(t, 1, res.code)
		assert.Empty(t, res.stdout)
		assert.Equal(t, "Error: "+tc.want+"\n", res.stderr, "%v", tc.args)
	}
}

// TestMigrate_handOver: run after the hand-over (bypassAuth "true" in
// yunikorn-configs), migrate prints the enforcing settings, never
// bypassAuth: true, and with --kubeconfig names the registration of this
// policy that YuniKorn's admission controller stands aside for, or says
// that none is registered.
func TestMigrate_handOver(t *testing.T) {
	cache := compilationCache(t)
	webhooks := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/yunikorn/configmaps/yunikorn-configs":
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"yunikorn-configs","namespace":"yunikorn"},`+
				`"data":{"admissionController.accessControl.bypassAuth":"true","admissionController.accessControl.externalUsers":"^livy$",`+
				`"admissionController.filtering.generateUniqueAppId":"true"}}`)
		case "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations":
			fmt.Fprint(w, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfigurationList","metadata":{},"items":[`+webhooks+`]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	defer srv.Close()
	kubeconfig := writeFile(t, "kubeconfig", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \""+srv.URL+"\"}\n"+
		"users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n")

	res := runCLIWith(t, cache, "", "migrate", "--kubeconfig", kubeconfig, "-o", "json", "--scheduling=false")
	require.Equal(t, 0, res.code, res.stderr)
	assert.JSONEq(t, `{"bypassAuth":false,"externalUsers":["^livy$"]}`, res.stdout, "the enforcing settings, not bypassAuth: true")
	assert.Contains(t, res.stderr, `admissionController.accessControl.bypassAuth: handed over: "true": `)
	assert.Contains(t, res.stderr, "migrate: hand-over: bypassAuth is \"true\" and no webhook configuration of this policy is registered: "+
		"nothing checks user.info on this cluster now.")

	webhooks = `{"metadata":{"name":"yunikorn-admission-controller-mutations"},"webhooks":[{"name":"admission-webhook.yunikorn.mutate-pods"}]},` +
		`{"metadata":{"name":"yunikorn-userinfo"},"webhooks":[{"name":"workloads.user-info.yunikorn.apache.org"}]}`
	res = runCLIWith(t, cache, "", "migrate", "--kubeconfig", kubeconfig, "-o", "json", "--scheduling=false")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stderr, "migrate: hand-over: YuniKorn's admission controller stands aside (bypassAuth \"true\") for this "+
		"policy's yunikorn-userinfo: these settings are what it must enforce, not bypassAuth\n")

	res = runCLIWith(t, cache, "", "migrate", "--kubeconfig", kubeconfig, "--follow", "-o", "json", "--scheduling=false")
	require.Equal(t, 0, res.code, res.stderr)
	assert.JSONEq(t, `{"followYuniKornConfig":{"namespace":"yunikorn"}}`, res.stdout, "followed: nothing copied, bypassAuth \"true\" not followed")
}
