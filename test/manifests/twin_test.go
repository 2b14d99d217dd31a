package manifests

import (
	"encoding/json"
	"strings"
	"testing"

	policiesv1 "github.com/kubewarden/adm-controller/api/policies/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestValidatingWebhookConfiguration_mirrorsMutating: the validating twin
// sees exactly the requests the mutating webhooks see (the same rules,
// match conditions, selectors, failure and match policies, timeouts and
// Service), at /validate.
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
		assert.Equal(t, m.MatchConditions, v.MatchConditions, "%s: match conditions", v.Name)
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
// policy but for its name, mutating: false and validateOnly: true.
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
	assert.Equal(t, *want, twin.Spec, "the same spec otherwise")
	assert.Equal(t, main.Annotations, twin.Annotations)
}
