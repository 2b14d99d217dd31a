package manifests

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	policiesv1 "github.com/kubewarden/adm-controller/api/policies/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/test/manifests/internal/chartrender"
)

const chartDir = "charts/yunikorn-userinfo"

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor the
// chart writes, decoded strictly (the operator's module is not worth
// importing for one type).
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Scheme   string `json:"scheme"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// checkChartFile: Chart.yaml is valid chart metadata and values.yaml is
// YAML; templates are rendered and checked by the TestChart tests.
func checkChartFile(t *testing.T, rel string, data []byte) {
	switch filepath.Base(rel) {
	case "Chart.yaml":
		var md chart.Metadata
		require.NoError(t, decodeStrict(data, &md))
		assert.NoError(t, md.Validate())
	case "values.yaml":
		var v map[string]any
		require.NoError(t, yaml.UnmarshalStrict(data, &v))
	default:
		require.Equal(t, "templates", filepath.Base(filepath.Dir(rel)), "%s: only Chart.yaml, values.yaml and templates/", rel)
	}
}

// render renders the chart as `helm upgrade` does (the steady state:
// what deploy/ holds and the real-cluster suite installs) and decodes every
// document strictly.
func render(t *testing.T, values map[string]any, release, namespace string) ([]manifest, error) {
	t.Helper()
	return renderWith(t, values, release, namespace, chartrender.Options{Upgrade: true})
}

// renderInstall renders the chart as `helm install` and `helm template` do:
// a first install, with the registration gate.
func renderInstall(t *testing.T, values map[string]any, release, namespace string) ([]manifest, error) {
	t.Helper()
	return renderWith(t, values, release, namespace, chartrender.Options{})
}

func renderWith(t *testing.T, values map[string]any, release, namespace string, o chartrender.Options) ([]manifest, error) {
	t.Helper()
	out, err := chartrender.RenderWith(filepath.Join(repoRoot, chartDir), values, release, namespace, o)
	if err != nil {
		return nil, err
	}
	ms, err := decodeManifests(chartDir, out)
	require.NoError(t, err, "%s", out)
	return ms, nil
}

func mustRender(t *testing.T, values map[string]any, release, namespace string) []manifest {
	t.Helper()
	ms, err := render(t, values, release, namespace)
	require.NoError(t, err)
	return ms
}

// helmOnlyLabels are the labels the chart adds to those of deploy/.
var helmOnlyLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// comparable turns an object into JSON-like maps for comparison with
// deploy/: the labels only Helm adds removed, settings documents parsed.
func comparable(t *testing.T, obj any) map[string]any {
	t.Helper()
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	strip := func(meta any) {
		if mm, ok := meta.(map[string]any); ok {
			if labels, ok := mm["labels"].(map[string]any); ok {
				for _, k := range helmOnlyLabels {
					delete(labels, k)
				}
			}
		}
	}
	strip(m["metadata"])
	if spec, ok := m["spec"].(map[string]any); ok {
		if tmpl, ok := spec["template"].(map[string]any); ok {
			strip(tmpl["metadata"])
		}
	}
	if data, ok := m["data"].(map[string]any); ok {
		if s, ok := data[settingsKey].(string); ok {
			var parsed any
			require.NoError(t, yaml.Unmarshal([]byte(s), &parsed))
			data[settingsKey] = parsed
		}
	}
	return m
}

func byKey(t *testing.T, ms []manifest) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, m := range ms {
		meta, ok := m.obj.(metav1.Object)
		require.True(t, ok, "%s: %s has metadata", m.path, m.gvk)
		key := m.gvk.Kind + " " + meta.GetNamespace() + "/" + meta.GetName()
		require.NotContains(t, out, key, "%s twice", key)
		out[key] = comparable(t, m.obj)
	}
	return out
}

// deployUnder is every object of deploy/ under dir but the Namespace and
// the kustomizations, which the chart does not render (Helm installs into
// a namespace it is given).
func deployUnder(t *testing.T, dir string) []manifest {
	t.Helper()
	all, err := deployManifests()
	require.NoError(t, err)
	var out []manifest
	for _, m := range all {
		if strings.HasPrefix(m.path, dir) && m.gvk.Kind != "Namespace" && m.gvk.Kind != "Kustomization" {
			out = append(out, m)
		}
	}
	return out
}

// trustRBACDir holds the RBAC objects the chart renders with trustRBAC.
const trustRBACDir = "deploy/webhook/trust-rbac/"

// queueCheckDir holds the RBAC objects the chart renders with queueCheck.
const queueCheckDir = "deploy/webhook/queue-check/"

// schedulingDir holds the RBAC objects the chart renders with scheduling.
const schedulingDir = "deploy/webhook/scheduling/"

// configValidationDirs hold the objects the chart renders with
// configValidation: the ConfigMap webhook and its RBAC (standalone), the
// ConfigMap policy (Kubewarden).
const (
	configValidationDir   = "deploy/webhook/config-validation/"
	configValidationKWDir = "deploy/kubewarden/config-validation/"
)

// configValidationObject reports whether a rendered object is one only
// configValidation renders.
func configValidationObject(m manifest) bool {
	name := ""
	if meta, ok := m.obj.(metav1.Object); ok {
		name = meta.GetName()
	}
	return strings.HasSuffix(name, "-config-validation") || strings.HasSuffix(name, "-yunikorn-config-reader")
}

// TestChart_renderingIsDeploy: deploy/ is the chart's rendering with the
// default values (release and namespace yunikorn-userinfo), object for
// object, field for field, but for the labels Helm adds; and
// deploy/kubewarden is its kubewarden mode on the default PolicyServer.
func TestChart_renderingIsDeploy(t *testing.T) {
	t.Parallel()
	for dir, values := range map[string]map[string]any{
		"deploy/webhook/": nil,
		"deploy/kubewarden/": {"mode": "kubewarden",
			"kubewarden": map[string]any{"policyServer": map[string]any{"create": false, "name": "default"}}},
		trustRBACDir:        {"settings": map[string]any{"trustRBAC": true}},
		queueCheckDir:       {"settings": map[string]any{"queueCheck": "warn"}},
		schedulingDir:       {"settings": map[string]any{"scheduling": map[string]any{}}},
		configValidationDir: {"settings": map[string]any{"configValidation": "enforce"}},
		configValidationKWDir: {"mode": "kubewarden", "settings": map[string]any{"configValidation": "enforce"},
			"kubewarden": map[string]any{"policyServer": map[string]any{"create": false, "name": "default"}}},
	} {
		rendered := mustRender(t, values, webhookNamespace, webhookNamespace)
		deployed := deployUnder(t, dir)
		switch dir {
		case trustRBACDir, queueCheckDir, schedulingDir:
			// Only the RBAC objects: the rest is deploy/webhook with the
			// edits their comments name.
			rendered = slices.DeleteFunc(rendered, func(m manifest) bool { return m.gvk.Group != rbacv1.GroupName })
		case configValidationDir, configValidationKWDir:
			// Only what configValidation adds (the Kubewarden policy's
			// account is not the chart's there).
			rendered = slices.DeleteFunc(rendered, func(m manifest) bool { return !configValidationObject(m) })
		default:
			deployed = slices.DeleteFunc(deployed, func(m manifest) bool {
				return strings.HasPrefix(m.path, trustRBACDir) || strings.HasPrefix(m.path, queueCheckDir) ||
					strings.HasPrefix(m.path, schedulingDir) ||
					strings.HasPrefix(m.path, configValidationDir) || strings.HasPrefix(m.path, configValidationKWDir)
			})
		}
		got := byKey(t, rendered)
		want := byKey(t, deployed)
		assert.ElementsMatch(t, slices.Collect(maps.Keys(want)), slices.Collect(maps.Keys(got)), "%s: the same objects", dir)
		for k, w := range want {
			assert.Equal(t, w, got[k], "%s", k)
		}
	}
}

// TestChart_lint: Helm's own linter finds nothing above INFO, in both modes.
func TestChart_lint(t *testing.T) {
	t.Parallel()
	for _, values := range []map[string]any{nil, {"mode": "kubewarden"}} {
		l := lint.RunAll(filepath.Join(repoRoot, chartDir), values, webhookNamespace)
		for _, m := range l.Messages {
			assert.LessOrEqual(t, m.Severity, support.InfoSev, "%s", m)
		}
	}
}

// chartMatrix are the value sets every check runs on.
var chartMatrix = []struct {
	name, release, namespace string
	values                   string // YAML
}{
	{name: "defaults", release: "yunikorn-userinfo", namespace: "yunikorn-userinfo"},
	{name: "other release and namespace", release: "uinfo", namespace: "platform"},
	{name: "image by digest", release: "yunikorn-userinfo", namespace: "yunikorn-userinfo",
		values: "image: {repository: registry.example.com/yui, digest: 'sha256:" + strings.Repeat("ab", 32) + "'}"},
	{name: "existing secret", release: "yunikorn-userinfo", namespace: "yunikorn-userinfo",
		values: "tls: {certManager: false, existingSecret: my-tls, caBundle: " + "Q0EgUEVNCg==" + "}"},
	{name: "no twin, Ignore, extra namespaces", release: "yunikorn-userinfo", namespace: "yunikorn-userinfo",
		values: "validatingTwin: false\nfailurePolicy: Ignore\nexcludedNamespaces: [kube-system, cni]"},
	{name: "settings, monitoring, spread, no PDB", release: "yunikorn-userinfo", namespace: "yunikorn-userinfo",
		values: "settings: {externalUsers: ['^livy$'], bypassAuth: false}\nserviceMonitor: {enabled: true, labels: {release: prom}}\n" +
			"podDisruptionBudget: {enabled: false}\nreplicas: 3\ntopologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}]"},
	{name: "trustRBAC", release: "uinfo", namespace: "platform", values: "settings: {trustRBAC: {verb: submit-as}}"},
	{name: "networkPolicy, limits", release: "uinfo", namespace: "platform", values: networkPolicyValues +
		"\nserve: {maxConnsPerClient: 64, maxConns: -1, maxRequestsPerClient: 32, largeRequestBytes: 1048576, maxConcurrentLarge: 2, instances: 4}"},
	{name: "kubewarden", release: "yunikorn-userinfo", namespace: "kubewarden", values: "mode: kubewarden"},
	{name: "kubewarden with trustRBAC", release: "yunikorn-userinfo", namespace: "kubewarden", values: "mode: kubewarden\nsettings: {trustRBAC: true}"},
	{name: "queueCheck", release: "uinfo", namespace: "platform", values: "settings: {queueCheck: {mode: enforce, namespace: yk}}"},
	{name: "kubewarden with queueCheck", release: "yunikorn-userinfo", namespace: "kubewarden", values: "mode: kubewarden\nsettings: {queueCheck: warn}"},
	{name: "configValidation", release: "uinfo", namespace: "platform", values: "settings: {configValidation: {mode: enforce, namespace: yk}}"},
	{name: "configValidation and queueCheck, no twin, Ignore", release: "yunikorn-userinfo", namespace: "yunikorn-userinfo",
		values: "validatingTwin: false\nfailurePolicy: Ignore\nsettings: {configValidation: warn, queueCheck: warn}"},
	{name: "kubewarden with configValidation", release: "yunikorn-userinfo", namespace: "kubewarden",
		values: "mode: kubewarden\nsettings: {configValidation: {mode: warn, namespace: yk}}"},
	{name: "kubewarden without twin, monitor", release: "yunikorn-userinfo", namespace: "kubewarden",
		values: "mode: kubewarden\nvalidatingTwin: false\nkubewarden: {policyMode: monitor}"},
	{name: "monitor, recordedGroups", release: "yunikorn-userinfo", namespace: "yunikorn-userinfo",
		values: "monitor: true\nsettings: {recordedGroups: {exclude: ['^system:.*$']}}"},
	{name: "kubewarden, monitor", release: "yunikorn-userinfo", namespace: "kubewarden",
		values: "mode: kubewarden\nmonitor: true\nsettings: {recordedGroups: {omit: true}}"},
}

// TestChart_matrix renders each value set and runs the checks deploy/ gets:
// strict decoding (in render), the rules against metadata.yml, match
// conditions compiled as the API server compiles them, namespace
// selectors, webhooks pointing at the rendered Service, the twin mirroring
// the mutating webhooks, known serve flags, settings the twin does not
// override.
func TestChart_matrix(t *testing.T) {
	t.Parallel()
	for _, tc := range chartMatrix {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var values map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(tc.values), &values))
			// The first install's rendering (the registration gate's hooks
			// among it) decodes strictly too; the checks below are on the
			// steady state.
			mustRenderInstall(t, values, tc.release, tc.namespace)
			ms := mustRender(t, values, tc.release, tc.namespace)
			ms = checkConfigValidation(t, ms, values, tc.namespace)
			settingsWebhooks := 0
			var (
				mwcs    []*admissionregistrationv1.MutatingWebhookConfiguration
				vwcs    []*admissionregistrationv1.ValidatingWebhookConfiguration
				svcs    []*corev1.Service
				deps    []*appsv1.Deployment
				caps    []*policiesv1.ClusterAdmissionPolicy
				servers []*policiesv1.PolicyServer
			)
			for _, m := range ms {
				switch o := m.obj.(type) {
				case *admissionregistrationv1.MutatingWebhookConfiguration:
					mwcs = append(mwcs, o)
				case *admissionregistrationv1.ValidatingWebhookConfiguration:
					if settingsWebhook(o) {
						checkSettingsWebhook(t, o, tc.namespace)
						settingsWebhooks++
						break
					}
					vwcs = append(vwcs, o)
				case *corev1.Service:
					svcs = append(svcs, o)
				case *appsv1.Deployment:
					deps = append(deps, o)
				case *policiesv1.ClusterAdmissionPolicy:
					caps = append(caps, o)
				case *policiesv1.PolicyServer:
					servers = append(servers, o)
				}
				if meta, ok := m.obj.(metav1.Object); ok && meta.GetNamespace() != "" && m.gvk.Group != rbacv1.GroupName {
					assert.Equal(t, tc.namespace, meta.GetNamespace(), "%s %s", m.gvk.Kind, meta.GetName())
				}
			}
			twin := values["validatingTwin"] != false
			if values["mode"] == "kubewarden" {
				assert.Zero(t, settingsWebhooks, "no settings webhook without serve")
				assert.Empty(t, deps, "no webhook Deployment under Kubewarden")
				checkChartPolicies(t, caps, servers, twin)
				return
			}
			require.Len(t, mwcs, 1)
			require.Len(t, svcs, 1)
			require.Len(t, deps, 1)
			assert.Equal(t, 1, settingsWebhooks, "the settings ConfigMap webhook")
			assert.Contains(t, deps[0].Spec.Template.Spec.Containers[0].Args,
				"--settings-configmap="+tc.namespace+"/"+tc.release+"-settings")
			checkChartWebhooks(t, mwcs[0].Webhooks, svcs[0], tc.namespace, "/mutate")
			if !twin {
				assert.Empty(t, vwcs)
				assert.NotContains(t, strings.Join(deps[0].Spec.Template.Spec.Containers[0].Args, " "), "--validate-overlay")
				return
			}
			require.Len(t, vwcs, 1)
			var asMutating []admissionregistrationv1.MutatingWebhook
			for i, v := range vwcs[0].Webhooks {
				m := mwcs[0].Webhooks[i]
				assert.Equal(t, m.Rules, v.Rules)
				conds := v.MatchConditions
				if i == 0 && len(conds) > len(m.MatchConditions) {
					// The twin's own condition, where the values allow
					// it (TestChart_twinCondition says where, and
					// TestChart_twinConditionIsGo what it says).
					assert.Equal(t, twinConditionName(t), conds[len(conds)-1].Name)
					if conds = conds[:len(conds)-1]; len(conds) == 0 {
						conds = nil
					}
				}
				assert.Equal(t, m.MatchConditions, conds)
				assert.Equal(t, m.NamespaceSelector, v.NamespaceSelector)
				assert.Equal(t, m.FailurePolicy, v.FailurePolicy)
				asMutating = append(asMutating, admissionregistrationv1.MutatingWebhook{Name: v.Name, ClientConfig: v.ClientConfig,
					Rules: v.Rules, NamespaceSelector: v.NamespaceSelector, MatchConditions: v.MatchConditions})
			}
			checkChartWebhooks(t, asMutating, svcs[0], tc.namespace, "/validate")
			assert.Contains(t, deps[0].Spec.Template.Spec.Containers[0].Args, `--validate-overlay={"validateOnly":true}`)
			for _, arg := range deps[0].Spec.Template.Spec.Containers[0].Args[1:] {
				name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
				assert.Contains(t, serveFlags, name, "unknown serve flag %s", arg)
			}
		})
	}
}

// checkConfigValidation checks what configValidation renders, and returns
// the other objects: with it on, exactly one ConfigMap webhook (standalone)
// or policy (Kubewarden), for configmaps CREATE and UPDATE only, limited to
// YuniKorn's namespace by its selector and to the two names by a match
// condition that compiles, failing as the policy's other webhooks fail;
// with it off, neither.
func checkConfigValidation(t *testing.T, ms []manifest, values map[string]any, namespace string) []manifest {
	t.Helper()
	ykNS := ""
	switch c := values["settings"].(type) {
	case map[string]any:
		switch v := c["configValidation"].(type) {
		case string:
			if v != "off" {
				ykNS = "yunikorn"
			}
		case map[string]any:
			if v["mode"] != "off" {
				ykNS = "yunikorn"
				if ns, ok := v["namespace"].(string); ok {
					ykNS = ns
				}
			}
		}
	}
	failurePolicy := admissionregistrationv1.Fail
	if fp, ok := values["failurePolicy"].(string); ok {
		failurePolicy = admissionregistrationv1.FailurePolicyType(fp)
	}
	wantRules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	wantSelector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{ykNS}}}}
	var rest []manifest
	n := 0
	for _, m := range ms {
		switch o := m.obj.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			if !strings.HasSuffix(o.Name, "-config-validation") {
				break
			}
			n++
			if assert.Len(t, o.Webhooks, 1) {
				w := o.Webhooks[0]
				assert.Equal(t, wantRules, w.Rules)
				assert.Equal(t, wantSelector, w.NamespaceSelector)
				assert.Equal(t, &failurePolicy, w.FailurePolicy)
				if assert.NotNil(t, w.ClientConfig.Service) {
					assert.Equal(t, namespace, w.ClientConfig.Service.Namespace)
					assert.Equal(t, ptrTo("/validate"), w.ClientConfig.Service.Path)
				}
				assert.Len(t, w.MatchConditions, 1)
				assert.Contains(t, w.MatchConditions[0].Expression, "request.namespace == '"+ykNS+"'")
				compileConditions(t, o.Name, w.MatchConditions)
			}
			continue
		case *policiesv1.ClusterAdmissionPolicy:
			if !strings.HasSuffix(o.Name, "-config-validation") {
				break
			}
			n++
			assert.False(t, o.Spec.Mutating)
			assert.Equal(t, wantRules, o.Spec.Rules)
			assert.Equal(t, wantSelector, o.Spec.NamespaceSelector)
			assert.Equal(t, &failurePolicy, o.Spec.FailurePolicy)
			assert.Len(t, o.Spec.MatchConditions, 1)
			compileConditions(t, o.Name, o.Spec.MatchConditions)
			assert.Contains(t, o.Spec.ContextAwareResources, policiesv1.ContextAwareResource{APIVersion: "v1", Kind: "ConfigMap"})
			var settings map[string]any
			require.NoError(t, json.Unmarshal(o.Spec.Settings.Raw, &settings))
			assert.Equal(t, true, settings["validateOnly"])
			assert.NotNil(t, settings["configValidation"])
			continue
		}
		rest = append(rest, m)
	}
	if ykNS == "" {
		assert.Zero(t, n, "configValidation off: no ConfigMap webhook or policy")
	} else {
		assert.Equal(t, 1, n, "configValidation on: one ConfigMap webhook or policy")
	}
	return rest
}

// checkChartWebhooks: together the webhooks' rules are metadata.yml's, each
// match condition compiles, the namespace selector leaves out kube-system
// and the release's namespace, and each webhook calls the rendered Service
// at path.
func checkChartWebhooks(t *testing.T, hooks []admissionregistrationv1.MutatingWebhook, svc *corev1.Service, namespace, path string) {
	t.Helper()
	var rules []admissionregistrationv1.RuleWithOperations
	for _, w := range hooks {
		rules = append(rules, w.Rules...)
		checkNamespaceSelector(t, w.NamespaceSelector, namespace)
		cc := w.ClientConfig
		if assert.NotNil(t, cc.Service, "%s: service", w.Name) {
			assert.Equal(t, svc.Name, cc.Service.Name)
			assert.Equal(t, svc.Namespace, cc.Service.Namespace)
			assert.Equal(t, &path, cc.Service.Path)
		}
		compileConditions(t, w.Name, w.MatchConditions)
	}
	assert.ElementsMatch(t, expand(t, metadataRules(t)), expand(t, rules), "the rules are metadata.yml's")
}

// checkChartPolicies: the ClusterAdmissionPolicy (and its twin) has
// metadata.yml's rules, compiling match conditions, and runs on the
// rendered PolicyServer.
func checkChartPolicies(t *testing.T, caps []*policiesv1.ClusterAdmissionPolicy, servers []*policiesv1.PolicyServer, twin bool) {
	t.Helper()
	want := 1
	if twin {
		want = 2
	}
	require.Len(t, caps, want)
	require.Len(t, servers, 1, "a PolicyServer of its own")
	for _, p := range caps {
		assert.Equal(t, metadataRules(t), p.Spec.Rules, "%s: metadata.yml's rules", p.Name)
		assert.Equal(t, servers[0].Name, p.Spec.PolicyServer)
		compileConditions(t, p.Name, p.Spec.MatchConditions)
		checkNamespaceSelector(t, p.Spec.NamespaceSelector, kubewardenNS)
		var settings map[string]any
		require.NoError(t, json.Unmarshal(p.Spec.Settings.Raw, &settings))
		assert.Equal(t, !p.Spec.Mutating, settings["validateOnly"] == true, "%s: validateOnly exactly on the twin", p.Name)
	}
	assert.True(t, caps[0].Spec.Mutating)
}

// compileConditions compiles match conditions as the API server validates
// a new webhook configuration.
func compileConditions(t *testing.T, owner string, mcs []admissionregistrationv1.MatchCondition) {
	t.Helper()
	compiler := plugincel.NewCompiler(celEnv)
	for _, mc := range mcs {
		res := compiler.CompileCELExpression(&matchconditions.MatchCondition{Name: mc.Name, Expression: strings.TrimSpace(mc.Expression)},
			webhookVariables, environment.NewExpressions)
		assert.Nil(t, res.Error, "%s: %s", owner, mc.Name)
	}
}

// TestChart_refusesBrokenValues: values that would install a broken or
// unsafe webhook, or that are misspelt, fail the rendering with a message
// naming the value (values.schema.json, then the chart's own checks).
func TestChart_refusesBrokenValues(t *testing.T) {
	t.Parallel()
	for values, want := range map[string]string{
		"mode: both":                                                      "mode",
		"failurePolicy: Maybe":                                            "failurePolicy",
		"replica: 3":                                                      "replica",
		"settings: {bypasAuth: true}":                                     "bypasAuth",
		"settings: {validateOnly: true}":                                  "validateOnly",
		"image: {digest: latest}":                                         "digest",
		"settings: {trustRBAC: yes-please}":                               "trustRBAC",
		"settings: {trustRBAC: {verb: 'set all'}}":                        "trustRBAC",
		"tls: {certManager: false}":                                       "tls.existingSecret is required when tls.certManager is false",
		"tls: {certManager: false, existingSecret: s}":                    "tls.caBundle is required when tls.certManager is false",
		"mode: kubewarden\nkubewarden: {policyServer: {create: false}}":   "kubewarden.policyServer.name is required",
		"networkPolicy: {enabled: true}":                                  "networkPolicy.apiServer.cidrs, networkPolicy.apiServer.peers or serve.trustedSourceCIDRs is required",
		"networkPolicy: {enabled: true, apiServer: {cidrs: [10.0.0.1]}}":  "cidrs",
		"networkPolicy: {enabled: true, apiServer: {cidr: [10.0.0.0/8]}}": "cidr",
		"serve: {maxConns: 0}":                                            "maxConns",
		"serve: {reservedConns: 0}":                                       "reservedConns",
		"serve: {maxPendingConns: -2}":                                    "maxPendingConns",
		"serve: {trustedSourceCIDRs: [10.0.0.1]}":                         "trustedSourceCIDRs",
		"serve: {maxConcurrentLarge: 0}":                                  "maxConcurrentLarge",
	} {
		var v map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(values), &v))
		_, err := render(t, v, "yunikorn-userinfo", "yunikorn-userinfo")
		if assert.Error(t, err, values) {
			assert.Contains(t, err.Error(), want, values)
		}
	}
}

// checkSettingsWebhook: the settings ConfigMap's webhook sends only that
// ConfigMap, in the release's namespace, to /settings, and fails open.
func checkSettingsWebhook(t *testing.T, o *admissionregistrationv1.ValidatingWebhookConfiguration, namespace string) {
	t.Helper()
	if !assert.Len(t, o.Webhooks, 1) {
		return
	}
	w := o.Webhooks[0]
	ignore := admissionregistrationv1.Ignore
	assert.Equal(t, &ignore, w.FailurePolicy, "a fix must go through while no replica answers")
	if assert.NotNil(t, w.ClientConfig.Service) {
		assert.Equal(t, ptrTo("/settings"), w.ClientConfig.Service.Path)
		assert.Equal(t, namespace, w.ClientConfig.Service.Namespace)
	}
	assert.Equal(t, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{namespace}}}}, w.NamespaceSelector)
	if assert.Len(t, w.MatchConditions, 1) {
		assert.Equal(t, "object.metadata.name == '"+strings.TrimSuffix(o.Name, "-settings")+"-settings'", w.MatchConditions[0].Expression)
		compileConditions(t, o.Name, w.MatchConditions)
	}
}

// settingsWebhook reports whether a validating configuration is the one
// for the settings ConfigMap (RELEASE-settings), not a stage of the policy.
func settingsWebhook(v *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
	return strings.HasSuffix(v.Name, "-settings")
}
