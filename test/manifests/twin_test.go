package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	policiesv1 "github.com/kubewarden/adm-controller/api/policies/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestValidatingWebhookConfiguration_mirrorsMutating: the validating twin
// sees the requests the mutating webhooks see (the same rules, match
// conditions, selectors, failure and match policies, timeouts and
// Service), at /validate, but for the Pod creates its own match condition
// leaves to the API server.
func TestValidatingWebhookConfiguration_mirrorsMutating(t *testing.T) {
	t.Parallel()
	mut := object[*admissionregistrationv1.MutatingWebhookConfiguration](t, webhookFile)
	val := object[*admissionregistrationv1.ValidatingWebhookConfiguration](t, validatingFile)
	assert.Equal(t, mut.Annotations, val.Annotations, "the same CA injection")
	assert.Equal(t, mut.Labels, val.Labels)
	assert.NotEqual(t, mut.Name, val.Name)
	require.Len(t, val.Webhooks, len(mut.Webhooks))
	for i, m := range mut.Webhooks {
		v := val.Webhooks[i]
		assert.Equal(t, strings.Replace(m.Name, ".user-info.", ".validate.user-info.", 1), v.Name)
		assert.Equal(t, m.Rules, v.Rules, "%s: rules", v.Name)
		wantConditions := m.MatchConditions
		if i == 0 {
			// The twin's own condition for Pods and workloads: the API
			// server skips it for a Pod create carrying the submitter's
			// own record (test/cel proves the twin admits those).
			wantConditions = append(wantConditions, twinCondition(t))
		}
		assert.Equal(t, wantConditions, v.MatchConditions, "%s: match conditions", v.Name)
		assert.Equal(t, m.NamespaceSelector, v.NamespaceSelector, "%s: namespaceSelector", v.Name)
		assert.Equal(t, m.ObjectSelector, v.ObjectSelector, "%s: objectSelector", v.Name)
		assert.Equal(t, m.FailurePolicy, v.FailurePolicy, "%s: failurePolicy", v.Name)
		assert.Equal(t, m.MatchPolicy, v.MatchPolicy, "%s: matchPolicy", v.Name)
		assert.Equal(t, m.SideEffects, v.SideEffects, "%s: sideEffects", v.Name)
		assert.Equal(t, m.TimeoutSeconds, v.TimeoutSeconds, "%s: timeoutSeconds", v.Name)
		assert.Equal(t, m.AdmissionReviewVersions, v.AdmissionReviewVersions, "%s: admissionReviewVersions", v.Name)
		want := m.ClientConfig.DeepCopy()
		want.Service.Path = ptrTo("/validate")
		assert.Equal(t, *want, v.ClientConfig, "%s: clientConfig", v.Name)
	}
}

// twinCase is one entry of testdata/twin-conditions.json, which
// internal/cel writes (make generate): settings, the chart values that
// say the same, and the twin's match condition Go writes for them.
type twinCase struct {
	Name       string         `json:"name"`
	Values     map[string]any `json:"values"`
	Expression string         `json:"expression"`
}

func twinCases(t *testing.T) []twinCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "test", "manifests", "testdata", "twin-conditions.json"))
	require.NoError(t, err)
	var f struct {
		Cases []twinCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	require.NotEmpty(t, f.Cases)
	return f.Cases
}

// twinConditionName is the condition's name in the chart's
// files/cel-policies.json.
func twinConditionName(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "files", "cel-policies.json"))
	require.NoError(t, err)
	var f struct {
		Twin struct {
			Name string `json:"name"`
		} `json:"twin"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	require.NotEmpty(t, f.Twin.Name)
	return f.Twin.Name
}

// twinCondition is the twin's match condition with the chart's default
// settings.
func twinCondition(t *testing.T) admissionregistrationv1.MatchCondition {
	t.Helper()
	for _, c := range twinCases(t) {
		if c.Name == "the chart's defaults" {
			return admissionregistrationv1.MatchCondition{Name: twinConditionName(t), Expression: c.Expression}
		}
	}
	t.Fatal("no case for the chart's defaults")
	return admissionregistrationv1.MatchCondition{}
}

// TestChart_twinConditionIsGo: the chart fills the twin's condition from
// its values to the very text internal/cel writes for the same settings
// (which test/cel checks against the module).
func TestChart_twinConditionIsGo(t *testing.T) {
	t.Parallel()
	name := twinConditionName(t)
	for _, c := range twinCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			vwc := twinConfiguration(t, map[string]any{"settings": c.Values})
			require.Len(t, vwc.Webhooks[0].MatchConditions, 1)
			assert.Equal(t, name, vwc.Webhooks[0].MatchConditions[0].Name)
			assert.Equal(t, c.Expression, vwc.Webhooks[0].MatchConditions[0].Expression)
		})
	}
}

// twinConfiguration renders the chart with values and returns the
// validating twin's configuration.
func twinConfiguration(t *testing.T, values map[string]any) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	var vwcs []*admissionregistrationv1.ValidatingWebhookConfiguration
	for _, m := range mustRender(t, values, webhookNamespace, webhookNamespace) {
		if v, ok := m.obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok && !strings.HasSuffix(v.Name, "-config-validation") && !settingsWebhook(v) {
			vwcs = append(vwcs, v)
		}
	}
	require.Len(t, vwcs, 1)
	return vwcs[0]
}

// TestDeployment_validateOverlay: /validate evaluates with validateOnly.
func TestDeployment_validateOverlay(t *testing.T) {
	t.Parallel()
	_, _, flags := webhookContainer(t)
	overlay, ok := flags["validate-overlay"]
	require.True(t, ok, "--validate-overlay is set")
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(overlay), &got))
	assert.Equal(t, map[string]any{"validateOnly": true}, got)
}

// TestClusterAdmissionPolicy_twin: the validating twin is the mutating
// policy but for its name, mutating: false, validateOnly: true and its
// own match condition.
func TestClusterAdmissionPolicy_twin(t *testing.T) {
	t.Parallel()
	main := clusterAdmissionPolicy(t)
	twin := object[*policiesv1.ClusterAdmissionPolicy](t, policyTwinFile)
	assert.Equal(t, main.Name+"-validate", twin.Name)
	assert.True(t, main.Spec.Mutating)
	assert.False(t, twin.Spec.Mutating, "Kubewarden registers it as a validating webhook")

	var mainSettings, twinSettings map[string]any
	require.NoError(t, json.Unmarshal(main.Spec.Settings.Raw, &mainSettings))
	require.NoError(t, json.Unmarshal(twin.Spec.Settings.Raw, &twinSettings))
	assert.Equal(t, true, twinSettings["validateOnly"])
	delete(twinSettings, "validateOnly")
	assert.Equal(t, mainSettings, twinSettings, "the same settings otherwise")

	want := main.Spec.DeepCopy()
	want.Mutating = false
	want.Settings = twin.Spec.Settings
	// And the twin's own match condition, as the standalone twin's.
	want.MatchConditions = append(want.MatchConditions, twinCondition(t))
	assert.Equal(t, *want, twin.Spec, "the same spec otherwise")
	assert.Equal(t, main.Annotations, twin.Annotations)
}

// TestChart_twinCondition: the chart writes the twin's match condition
// only when the twin would admit what it skips: settings that turn on no
// rule needing context, recordedGroups unset, and
// validatingTwinSkipsOwnRecord not turned off; in mode hybrid with the
// twin too.
func TestChart_twinCondition(t *testing.T) {
	t.Parallel()
	want := twinCondition(t)
	for _, tc := range []struct {
		name   string
		values map[string]any
		skips  bool
	}{
		{"defaults", nil, true},
		{"allow-lists and bypass", map[string]any{"settings": map[string]any{"externalUsers": []any{"^livy$"}, "externalGroups": []any{"^fe$"}, "bypassAuth": true}}, true},
		{"turned off", map[string]any{"validatingTwinSkipsOwnRecord": false}, false},
		{"recordedGroups", map[string]any{"settings": map[string]any{"recordedGroups": map[string]any{"omit": true}}}, false},
		{"trustRBAC", map[string]any{"settings": map[string]any{"trustRBAC": true}}, false},
		{"queueCheck", map[string]any{"settings": map[string]any{"queueCheck": "warn"}}, false},
		{"queueCheck off", map[string]any{"settings": map[string]any{"queueCheck": "off"}}, true},
		{"applicationOwnership", map[string]any{"settings": map[string]any{"applicationOwnership": "enforce"}}, false},
		{"scheduling", map[string]any{"settings": map[string]any{"scheduling": map[string]any{}}}, false},
		{"followYuniKornConfig", map[string]any{"settings": map[string]any{"followYuniKornConfig": true}}, false},
		{"adopters", map[string]any{"settings": map[string]any{"adopters": map[string]any{"users": []any{"^a$"}}}}, false},
		{"hybrid with the twin", map[string]any{"mode": "hybrid", "hybrid": map[string]any{"validatingTwin": true}, "cel": map[string]any{"mapAPIVersion": "v1"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vwc := twinConfiguration(t, tc.values)
			conds := vwc.Webhooks[0].MatchConditions
			if tc.skips {
				require.Len(t, conds, 1)
				assert.Equal(t, want.Name, conds[0].Name)
			} else {
				assert.Empty(t, conds)
			}
		})
	}
}

// TestChart_kubewardenTwinCondition: under Kubewarden the twin's
// ClusterAdmissionPolicy carries the same condition, after its own, under
// the same rule for when; the mutating policy never does.
func TestChart_kubewardenTwinCondition(t *testing.T) {
	t.Parallel()
	name := twinConditionName(t)
	for _, tc := range []struct {
		name     string
		settings map[string]any
		want     bool
	}{
		{"defaults", nil, true},
		{"trustRBAC", map[string]any{"trustRBAC": true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{"mode": "kubewarden", "settings": tc.settings}
			found := map[string][]string{}
			for _, m := range mustRender(t, values, webhookNamespace, webhookNamespace) {
				if p, ok := m.obj.(*policiesv1.ClusterAdmissionPolicy); ok {
					for _, c := range p.Spec.MatchConditions {
						found[p.Name] = append(found[p.Name], c.Name)
					}
				}
			}
			require.Len(t, found, 2)
			assert.NotContains(t, found["yunikorn-user-info"], name)
			if tc.want {
				assert.Equal(t, []string{"user-info-may-change", name}, found["yunikorn-user-info-validate"])
			} else {
				assert.Equal(t, []string{"user-info-may-change"}, found["yunikorn-user-info-validate"])
			}
		})
	}
}
