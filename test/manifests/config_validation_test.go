package manifests

import (
	"testing"

	policiesv1 "github.com/kubewarden/adm-controller/api/policies/v1"
	"github.com/stretchr/testify/assert"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
)

// TestConfigValidationSelection evaluates, for sample ConfigMap requests,
// whether the API server would call configValidation's standalone webhook
// and its Kubewarden policy (deploy/*/config-validation), match conditions
// included: only yunikorn-defaults and yunikorn-configs in YuniKorn's
// namespace, on CREATE and UPDATE.
func TestConfigValidationSelection(t *testing.T) {
	t.Parallel()
	cfg := object[*admissionregistrationv1.ValidatingWebhookConfiguration](t, "deploy/webhook/config-validation/validatingwebhookconfiguration.yaml")
	p := object[*policiesv1.ClusterAdmissionPolicy](t, "deploy/kubewarden/config-validation/clusteradmissionpolicy.yaml")
	var hooks []admissionregistrationv1.MutatingWebhook
	for _, v := range cfg.Webhooks {
		hooks = append(hooks, admissionregistrationv1.MutatingWebhook{Name: v.Name, ClientConfig: v.ClientConfig,
			Rules: v.Rules, NamespaceSelector: v.NamespaceSelector, MatchConditions: v.MatchConditions})
	}
	policy := []admissionregistrationv1.MutatingWebhook{{Name: "clusterwide-" + p.Name + ".kubewarden.admission",
		Rules: p.Spec.Rules, NamespaceSelector: p.Spec.NamespaceSelector, MatchConditions: p.Spec.MatchConditions}}

	configMaps := corev1.SchemeGroupVersion.WithResource("configmaps")
	kind := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"queues.yaml": "x"}}
	}
	req := func(op admission.Operation, ns, name string) request {
		r := request{operation: op, resource: configMaps, kind: kind, namespace: ns, name: name, object: cm(ns, name)}
		if op == admission.Update {
			r.oldObject = cm(ns, name)
		}
		if op == admission.Delete {
			r.object, r.oldObject = nil, cm(ns, name)
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		r      request
		called bool
	}{
		{"create yunikorn-configs", req(admission.Create, "yunikorn", "yunikorn-configs"), true},
		{"update yunikorn-configs", req(admission.Update, "yunikorn", "yunikorn-configs"), true},
		{"update yunikorn-defaults", req(admission.Update, "yunikorn", "yunikorn-defaults"), true},
		{"delete yunikorn-configs", req(admission.Delete, "yunikorn", "yunikorn-configs"), false},
		{"another ConfigMap of YuniKorn's namespace", req(admission.Update, "yunikorn", "kube-root-ca.crt"), false},
		{"a name that only starts alike", req(admission.Update, "yunikorn", "yunikorn-configs-old"), false},
		{"yunikorn-configs elsewhere", req(admission.Update, "default", "yunikorn-configs"), false},
		{"leader election in kube-system", req(admission.Update, "kube-system", "yunikorn-configs"), false},
		{"generated name", req(admission.Create, "yunikorn", ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.called, len(called(t, hooks, tc.r)) == 1, "standalone webhook called")
			assert.Equal(t, tc.called, len(called(t, policy, tc.r)) == 1, "ClusterAdmissionPolicy called")
		})
	}
}
