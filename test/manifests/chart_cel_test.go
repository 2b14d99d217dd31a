package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
)

// celFile is files/cel-policies.json, which make generate writes from
// internal/cel.
type celFile struct {
	ParamKeys   []string          `json:"paramKeys"`
	ContextKeys map[string]string `json:"contextKeys"`
	Defaults    map[string]string `json:"defaults"`
	Targets     []struct {
		Name       string          `json:"name"`
		Mutating   json.RawMessage `json:"mutating"`
		Validating json.RawMessage `json:"validating"`
	} `json:"targets"`
}

// v1 renders the MutatingAdmissionPolicies as admissionregistration.k8s.io/v1:
// Helm's default capabilities in a test binary are Kubernetes 1.20, where
// the chart refuses to choose (TestChart_celModeOldCluster).
var v1 = map[string]any{"mapAPIVersion": "v1"}

// TestChart_celModeOldCluster: before Kubernetes 1.34 there is no
// MutatingAdmissionPolicy, and the chart says so.
func TestChart_celModeOldCluster(t *testing.T) {
	t.Parallel()
	_, err := render(t, map[string]any{"mode": "cel"}, "r", "ns")
	require.ErrorContains(t, err, "mode: cel needs MutatingAdmissionPolicy: Kubernetes 1.34 or later")
}

func readCELFile(t *testing.T) celFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "files", "cel-policies.json"))
	require.NoError(t, err)
	var f celFile
	require.NoError(t, json.Unmarshal(raw, &f))
	require.NotEmpty(t, f.Targets)
	return f
}

func kindsOf(ms []manifest) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.gvk.Kind)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func jsonEq(t *testing.T, want json.RawMessage, got any, msg string) {
	t.Helper()
	b, err := json.Marshal(got)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(b), msg)
}

// TestChart_celMode: mode cel renders no webhook, and the policies as
// internal/cel wrote them (one source): each spec equal to the generated
// file's, each binding denying, pointed at the ConfigMap parameter and
// failing closed without it.
func TestChart_celMode(t *testing.T) {
	t.Parallel()
	f := readCELFile(t)
	ms := mustRender(t, map[string]any{"mode": "cel", "cel": v1}, "yunikorn-userinfo", "yunikorn-userinfo")
	assert.Equal(t, []string{"ConfigMap", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}, kindsOf(ms), "no webhook in mode cel")
	maps, vaps := map[string]*admissionregistrationv1.MutatingAdmissionPolicy{}, map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{}
	var param *corev1.ConfigMap
	bindings := 0
	for _, m := range ms {
		switch o := m.obj.(type) {
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			maps[o.Name] = o
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			vaps[o.Name] = o
		case *corev1.ConfigMap:
			param = o
		case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			bindings++
			require.NotNil(t, o.Spec.ParamRef)
			assert.Equal(t, "yunikorn-userinfo-cel", o.Spec.ParamRef.Name)
			assert.Equal(t, admissionregistrationv1.DenyAction, *o.Spec.ParamRef.ParameterNotFoundAction)
			assert.Contains(t, o.Spec.MatchResources.NamespaceSelector.MatchExpressions[0].Values, "kube-system")
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			bindings++
			require.NotNil(t, o.Spec.ParamRef)
			assert.Equal(t, "yunikorn-userinfo", o.Spec.ParamRef.Namespace)
			assert.Equal(t, admissionregistrationv1.DenyAction, *o.Spec.ParamRef.ParameterNotFoundAction)
			assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, o.Spec.ValidationActions)
		}
	}
	assert.Equal(t, len(maps)+len(vaps), bindings, "a binding per policy")
	for _, tg := range f.Targets {
		name := "yunikorn-userinfo-" + tg.Name
		if tg.Mutating != nil {
			require.Contains(t, maps, name)
			jsonEq(t, tg.Mutating, maps[name].Spec, name+": the chart ships internal/cel's mutating policy")
		}
		require.Contains(t, vaps, name)
		jsonEq(t, tg.Validating, vaps[name].Spec, name+": the chart ships internal/cel's validating policy")
	}
	require.NotNil(t, param)
	// The chart's default settings: its own systemUsers, the policy's
	// defaults for the rest.
	want := map[string]string{}
	for k, v := range f.Defaults {
		want[k] = v
	}
	want["systemUsers"] = "^system:serviceaccount:kube-system:[^:]+$\n^system:kube-controller-manager$"
	assert.Equal(t, want, param.Data)
	for k := range param.Data {
		assert.Contains(t, f.ParamKeys, k)
	}
}

// TestChart_celParams: the settings reach the ConfigMap parameter in the
// form internal/cel's ParamData writes; the comma-separated string form
// (split by the policy only) is refused.
func TestChart_celParams(t *testing.T) {
	t.Parallel()
	ms := mustRender(t, map[string]any{"mode": "cel", "monitor": true, "cel": map[string]any{"mapAPIVersion": "v1beta1"}, "settings": map[string]any{
		"bypassAuth": true, "trustControllers": false, "userLabelKey": "l", "externalUsers": []any{"^livy$", "a\nb"},
		"externalGroups": []any{}, "recordedGroups": map[string]any{"omit": false, "exclude": []any{"^system:"}},
	}}, "r", "ns")
	var param *corev1.ConfigMap
	maps := 0
	for _, m := range ms {
		switch o := m.obj.(type) {
		case *corev1.ConfigMap:
			param = o
		case *admissionregistrationv1beta1.MutatingAdmissionPolicy:
			maps++
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit},
				o.Spec.ValidationActions, "monitor: warn instead of refusing")
		}
	}
	assert.Equal(t, 3, maps, "cel.mapAPIVersion v1beta1")
	require.NotNil(t, param)
	assert.Equal(t, "true", param.Data["bypassAuth"])
	assert.Equal(t, "false", param.Data["trustControllers"])
	assert.Equal(t, "l", param.Data["userLabelKey"])
	assert.Equal(t, "^livy$\na\\nb", param.Data["externalUsers"])
	assert.Equal(t, "", param.Data["externalGroups"])
	assert.Equal(t, "filter", param.Data["recordedGroups"])
	assert.Equal(t, "^system:", param.Data["recordedGroupsExclude"])
	assert.Equal(t, "", param.Data["recordedGroupsInclude"])

	_, err := render(t, map[string]any{"mode": "cel", "cel": v1, "settings": map[string]any{"recordedGroups": map[string]any{"omit": true}}}, "r", "ns")
	require.NoError(t, err)
	_, err = render(t, map[string]any{"mode": "cel", "cel": v1, "settings": map[string]any{"externalUsers": "^a$,^b$"}}, "r", "ns")
	require.ErrorContains(t, err, "settings.externalUsers: modes cel and hybrid take a list of patterns")
	_, err = render(t, map[string]any{"mode": "cel", "cel": v1, "failurePolicy": "Ignore"}, "r", "ns")
	require.ErrorContains(t, err, "failurePolicy: mode cel always fails closed")
}

// contextOn is internal/cel's test of whether a context setting turns its
// rule on, for the expectations below.
func contextOn(key string, v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != "off"
	case []any:
		return len(x) > 0
	case map[string]any:
		if key == "trustRBAC" || key == "scheduling" {
			return true
		}
		mode, ok := x["mode"].(string)
		return !ok || mode != "off"
	}
	return true
}

// TestChart_celModeSettings: every settings fixture the policy accepts
// renders in mode cel exactly when none of its rules needs the cluster,
// and is refused otherwise with a message naming each such setting; mode
// hybrid renders it unless it turns on a setting that admits what the CEL
// policies refuse (trustRBAC, trustPodTokens, workloads, adopters,
// followYuniKornConfig).
func TestChart_celModeSettings(t *testing.T) {
	t.Parallel()
	f := readCELFile(t)
	cases := settingsFixtures(t)
	refusedCEL, refusedHybrid, rendered := 0, 0, 0
	for _, c := range cases {
		if !c.Valid || c.SettingsText != "" {
			continue
		}
		if _, ok := chartSettingsExceptions[c.Name]; ok {
			continue
		}
		var s map[string]any
		require.NoError(t, json.Unmarshal(c.Settings, &s), c.Name)
		if s == nil {
			continue
		}
		var need, loose []string
		for k, v := range s {
			if _, ok := f.ContextKeys[k]; ok && contextOn(k, v) {
				need = append(need, k)
				switch k {
				case "trustRBAC", "trustPodTokens", "workloads", "adopters", "followYuniKornConfig":
					loose = append(loose, k)
				}
			}
		}
		commaForm := false
		for _, k := range []string{"systemUsers", "externalUsers", "externalGroups"} {
			if _, ok := s[k].(string); ok {
				commaForm = true
			}
		}
		if g, ok := s["recordedGroups"].(map[string]any); ok {
			for _, k := range []string{"include", "exclude"} {
				if _, ok := g[k].(string); ok {
					commaForm = true
				}
			}
		}
		_, err := render(t, map[string]any{"mode": "cel", "cel": v1, "settings": s}, "yunikorn-userinfo", "yunikorn-userinfo")
		switch {
		case len(need) > 0:
			if assert.Error(t, err, "%s: mode cel must refuse %v", c.Name, need) {
				refusedCEL++
				for _, k := range need {
					assert.Contains(t, err.Error(), "settings."+k+" ("+f.ContextKeys[k]+")", c.Name)
				}
				assert.Contains(t, err.Error(), "need the webhook", c.Name)
			}
		case commaForm:
			assert.ErrorContains(t, err, "take a list of patterns here", c.Name)
		default:
			if assert.NoError(t, err, "%s: mode cel expresses %s", c.Name, c.Settings) {
				rendered++
			}
		}
		_, err = render(t, map[string]any{"mode": "hybrid", "cel": v1, "settings": s}, "yunikorn-userinfo", "yunikorn-userinfo")
		switch {
		case len(loose) > 0:
			if assert.Error(t, err, "%s: mode hybrid must refuse %v", c.Name, loose) {
				refusedHybrid++
				for _, k := range loose {
					assert.Contains(t, err.Error(), "settings."+k, c.Name)
				}
			}
		case commaForm:
			assert.ErrorContains(t, err, "take a list of patterns here", c.Name)
		default:
			assert.NoError(t, err, "%s: mode hybrid takes %s", c.Name, c.Settings)
		}
	}
	t.Logf("mode cel: %d fixtures rendered, %d refused as needing the webhook; hybrid: %d refused", rendered, refusedCEL, refusedHybrid)
	assert.GreaterOrEqual(t, rendered, 8)
	assert.Greater(t, refusedCEL, 5)
	assert.Greater(t, refusedHybrid, 0)
}

// TestChart_hybridMode: the webhook and the CEL policies; the webhook's
// failurePolicy is hybrid.webhookFailurePolicy (Ignore by default, so the
// core still holds and Pods are still admitted while it is down), a
// first install renders no registration gate with Ignore, and the
// validating twin comes only with hybrid.validatingTwin.
func TestChart_hybridMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		values map[string]any
		want   admissionregistrationv1.FailurePolicyType
	}{
		{map[string]any{"mode": "hybrid", "cel": v1}, admissionregistrationv1.Ignore},
		{map[string]any{"mode": "hybrid", "cel": v1, "hybrid": map[string]any{"webhookFailurePolicy": "Fail", "validatingTwin": true}}, admissionregistrationv1.Fail},
	} {
		ms, err := renderInstall(t, tc.values, "yunikorn-userinfo", "yunikorn-userinfo")
		require.NoError(t, err)
		kinds := kindsOf(ms)
		for _, k := range []string{"Deployment", "MutatingWebhookConfiguration", "MutatingAdmissionPolicy", "ValidatingAdmissionPolicy"} {
			assert.Contains(t, kinds, k)
		}
		// The twin only with hybrid.validatingTwin (set in the Fail case).
		twin := slices.ContainsFunc(ms, func(m manifest) bool {
			v, ok := m.obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
			return ok && !settingsWebhook(v)
		})
		assert.Equal(t, tc.want == admissionregistrationv1.Fail, twin)
		gate := false
		for _, m := range ms {
			switch o := m.obj.(type) {
			case *admissionregistrationv1.MutatingWebhookConfiguration:
				for _, w := range o.Webhooks {
					if tc.want == admissionregistrationv1.Ignore {
						assert.Equal(t, tc.want, *w.FailurePolicy, w.Name)
					}
				}
			case *admissionregistrationv1.ValidatingWebhookConfiguration:
				for _, w := range o.Webhooks {
					if tc.want == admissionregistrationv1.Ignore {
						assert.Equal(t, tc.want, *w.FailurePolicy, w.Name)
					}
				}
			}
			if strings.HasSuffix(m.gvk.Kind, "Job") {
				gate = true
			}
		}
		assert.Equal(t, tc.want == admissionregistrationv1.Fail, gate, "the registration gate only with Fail")
	}
	_, err := render(t, map[string]any{"mode": "hybrid", "hybrid": map[string]any{"webhookFailurePolicy": "Never"}}, "r", "ns")
	require.Error(t, err)
}

// TestChart_celParamsAsInternalCEL: for every settings fixture the CEL
// mode expresses, the ConfigMap parameter the chart writes holds exactly
// what internal/cel's ParamData writes for the same settings over the
// chart's defaults (testdata/cel-params.json, which make generate writes
// and make verify checks): one encoding of the settings. The comma-
// separated string form is refused (only the policy splits it).
func TestChart_celParamsAsInternalCEL(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "cel-params.json"))
	require.NoError(t, err)
	var examples []struct {
		Name     string            `json:"name"`
		Settings map[string]any    `json:"settings"`
		Data     map[string]string `json:"data"`
	}
	require.NoError(t, json.Unmarshal(raw, &examples))
	require.NotEmpty(t, examples)
	compared := 0
	for _, ex := range examples {
		ms, err := render(t, map[string]any{"mode": "cel", "cel": v1, "settings": ex.Settings}, "yunikorn-userinfo", "yunikorn-userinfo")
		if err != nil {
			assert.ErrorContains(t, err, "take a list of patterns here", ex.Name)
			continue
		}
		found := false
		for _, m := range ms {
			if cm, ok := m.obj.(*corev1.ConfigMap); ok && cm.Name == "yunikorn-userinfo-cel" {
				found = true
				assert.Equal(t, ex.Data, cm.Data, ex.Name)
			}
		}
		assert.True(t, found, ex.Name)
		compared++
	}
	t.Logf("%d of %d settings compared", compared, len(examples))
	assert.GreaterOrEqual(t, compared, 8)
}
