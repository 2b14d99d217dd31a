package manifests

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// userInfoKey is the annotation the policy guards.
const userInfoKey = "yunikorn.apache.org/user.info"

// celEnv is the API server's CEL environment at its default compatibility
// version, as the webhook admission plugin builds it.
var celEnv = environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())

// webhookVariables are the variables a webhook match condition sees.
var webhookVariables = plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}

// policyWebhook is the webhook Kubewarden's controller registers for the
// ClusterAdmissionPolicy: its rules, selector, failure policy and match
// conditions, sent to the policy server.
func policyWebhook(t *testing.T) admissionregistrationv1.MutatingWebhook {
	t.Helper()
	p := clusterAdmissionPolicy(t)
	return admissionregistrationv1.MutatingWebhook{
		Name:              "clusterwide-" + p.Name + ".kubewarden.admission",
		Rules:             p.Spec.Rules,
		FailurePolicy:     p.Spec.FailurePolicy,
		MatchPolicy:       p.Spec.MatchPolicy,
		NamespaceSelector: p.Spec.NamespaceSelector,
		ObjectSelector:    p.Spec.ObjectSelector,
		SideEffects:       p.Spec.SideEffects,
		TimeoutSeconds:    p.Spec.TimeoutSeconds,
		MatchConditions:   p.Spec.MatchConditions,
	}
}

// TestMatchConditions_compile compiles every match condition the way the
// API server validates a new webhook configuration (NewExpressions, the
// strictest environment), and checks the names as it does.
func TestMatchConditions_compile(t *testing.T) {
	t.Parallel()
	cfg := object[*admissionregistrationv1.MutatingWebhookConfiguration](t, webhookFile)
	hooks := append(slices.Clone(cfg.Webhooks), policyWebhook(t))
	compiler := plugincel.NewCompiler(celEnv)
	n := 0
	for _, w := range hooks {
		names := map[string]bool{}
		for _, mc := range w.MatchConditions {
			n++
			assert.Empty(t, validation.IsQualifiedName(mc.Name), "%s: match condition name %q", w.Name, mc.Name)
			assert.False(t, names[mc.Name], "%s: match condition %q twice", w.Name, mc.Name)
			names[mc.Name] = true
			res := compiler.CompileCELExpression(&matchconditions.MatchCondition{Name: mc.Name, Expression: strings.TrimSpace(mc.Expression)},
				webhookVariables, environment.NewExpressions)
			if assert.Nil(t, res.Error, "%s: %s", w.Name, mc.Name) {
				assert.Equal(t, "bool", res.OutputType.String(), "%s: %s must be a boolean", w.Name, mc.Name)
			}
		}
	}
	assert.Equal(t, 3, n, "two in the webhook configuration, one in the policy")
}

// request is an admission request, as far as webhook selection goes.
type request struct {
	operation   admission.Operation
	resource    schema.GroupVersionResource
	subresource string
	kind        schema.GroupVersionKind
	namespace   string
	object      runtime.Object
	oldObject   runtime.Object
	name        string // "sample" when empty
}

// called returns the names of the webhooks the API server would call for
// the request: those whose rules match it, whose namespace selector matches
// its namespace, and whose match conditions all hold, each step done by the
// API server's own code (k8s.io/apiserver admission/plugin/webhook). A match
// condition error fails the test: with failurePolicy Fail it would reject
// the request.
func called(t *testing.T, hooks []admissionregistrationv1.MutatingWebhook, r request) []string {
	t.Helper()
	name := "sample"
	if r.name != "" {
		name = r.name
	}
	attr := admission.NewAttributesRecord(r.object, r.oldObject, r.kind, r.namespace, name, r.resource, r.subresource,
		r.operation, nil, false, &user.DefaultInfo{Name: "alice", Groups: []string{"devs", "system:authenticated"}})
	versioned := &admission.VersionedAttributes{Attributes: attr, VersionedObject: r.object, VersionedOldObject: r.oldObject, VersionedKind: r.kind}
	nsLabels := labels.Set{corev1.LabelMetadataName: r.namespace}
	compiler := plugincel.NewConditionCompiler(celEnv)

	var out []string
	for i := range hooks {
		acc := webhook.NewMutatingWebhookAccessor(hooks[i].Name, "config", &hooks[i])
		if !slices.ContainsFunc(acc.GetRules(), func(rule admissionregistrationv1.RuleWithOperations) bool {
			m := rules.Matcher{Rule: rule, Attr: attr}
			return m.Matches()
		}) {
			continue
		}
		selector, err := acc.GetParsedNamespaceSelector()
		require.NoError(t, err)
		if !selector.Matches(nsLabels) {
			continue
		}
		res := acc.GetCompiledMatcher(compiler).Match(t.Context(), versioned, nil, nil)
		require.NoError(t, res.Error, "%s: match conditions", hooks[i].Name)
		if res.Matches {
			out = append(out, strings.SplitN(hooks[i].Name, ".", 2)[0])
		}
	}
	return out
}

func pod(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: "default", Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func binding(annotations map[string]string) *corev1.Binding {
	return &corev1.Binding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
		ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: "default", Annotations: annotations},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
	}
}

// TestWebhookSelection evaluates, for sample requests, which of the
// standalone webhooks and whether the ClusterAdmissionPolicy the API server
// would call, match conditions included.
func TestWebhookSelection(t *testing.T) {
	t.Parallel()
	cfg := object[*admissionregistrationv1.MutatingWebhookConfiguration](t, webhookFile)
	policy := []admissionregistrationv1.MutatingWebhook{policyWebhook(t)}

	pods := corev1.SchemeGroupVersion.WithResource("pods")
	podKind := corev1.SchemeGroupVersion.WithKind("Pod")
	alice := map[string]string{userInfoKey: `{"user":"alice"}`}
	mallory := map[string]string{userInfoKey: `{"user":"mallory"}`}
	other := map[string]string{"example.com/x": "y"}
	both := map[string]string{userInfoKey: `{"user":"alice"}`, "example.com/x": "y"}
	statusUpdate := func(ns string, old, new map[string]string) request {
		return request{operation: admission.Update, resource: pods, subresource: "status", kind: podKind,
			namespace: ns, object: pod(new), oldObject: pod(old)}
	}

	tests := []struct {
		name         string
		request      request
		wantWebhooks []string
		wantPolicy   bool
	}{
		{name: "pod create", request: request{operation: admission.Create, resource: pods, kind: podKind, namespace: "default", object: pod(nil)},
			wantWebhooks: []string{"workloads"}, wantPolicy: true},
		{name: "pod update", request: request{operation: admission.Update, resource: pods, kind: podKind, namespace: "default", object: pod(nil), oldObject: pod(alice)},
			wantWebhooks: []string{"workloads"}, wantPolicy: true},
		{name: "pod create in kube-system", request: request{operation: admission.Create, resource: pods, kind: podKind, namespace: "kube-system", object: pod(nil)}},
		{name: "pod create in the webhook namespace", request: request{operation: admission.Create, resource: pods, kind: podKind, namespace: webhookNamespace, object: pod(nil)},
			wantPolicy: true},
		{name: "pod create in the kubewarden namespace", request: request{operation: admission.Create, resource: pods, kind: podKind, namespace: kubewardenNS, object: pod(nil)},
			wantWebhooks: []string{"workloads"}},
		{name: "pod delete", request: request{operation: admission.Delete, resource: pods, kind: podKind, namespace: "default", oldObject: pod(alice)}},
		{name: "deployment update", request: request{operation: admission.Update, resource: appsv1.SchemeGroupVersion.WithResource("deployments"),
			kind: appsv1.SchemeGroupVersion.WithKind("Deployment"), namespace: "default",
			object: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, oldObject: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}}},
			wantWebhooks: []string{"workloads"}, wantPolicy: true},

		// pods/status: only when user.info appears, disappears or changes.
		{name: "status, no annotations", request: statusUpdate("default", nil, nil)},
		{name: "status, empty annotations", request: statusUpdate("default", map[string]string{}, map[string]string{})},
		{name: "status, other annotations", request: statusUpdate("default", other, other)},
		{name: "status, other annotation added", request: statusUpdate("default", nil, other)},
		{name: "status, user.info unchanged", request: statusUpdate("default", alice, alice)},
		{name: "status, user.info unchanged, other changed", request: statusUpdate("default", alice, both)},
		{name: "status, user.info added", request: statusUpdate("default", nil, alice),
			wantWebhooks: []string{"pod-subresources"}, wantPolicy: true},
		{name: "status, user.info added to other annotations", request: statusUpdate("default", other, both),
			wantWebhooks: []string{"pod-subresources"}, wantPolicy: true},
		{name: "status, user.info removed", request: statusUpdate("default", alice, nil),
			wantWebhooks: []string{"pod-subresources"}, wantPolicy: true},
		{name: "status, user.info removed, other kept", request: statusUpdate("default", both, other),
			wantWebhooks: []string{"pod-subresources"}, wantPolicy: true},
		{name: "status, user.info changed", request: statusUpdate("default", alice, mallory),
			wantWebhooks: []string{"pod-subresources"}, wantPolicy: true},
		{name: "status, user.info emptied", request: statusUpdate("default", alice, map[string]string{userInfoKey: ""}),
			wantWebhooks: []string{"pod-subresources"}, wantPolicy: true},
		{name: "status, changed in kube-system", request: statusUpdate("kube-system", alice, mallory)},
		{name: "ephemeral containers, user.info changed", request: request{operation: admission.Update, resource: pods, subresource: "ephemeralcontainers",
			kind: podKind, namespace: "default", object: pod(mallory), oldObject: pod(alice)},
			wantWebhooks: []string{"pod-subresources"}, wantPolicy: true},
		{name: "ephemeral containers, unchanged", request: request{operation: admission.Update, resource: pods, subresource: "ephemeralcontainers",
			kind: podKind, namespace: "default", object: pod(alice), oldObject: pod(alice)}},

		// pods/binding: only a Binding that carries user.info.
		{name: "binding, no annotations", request: request{operation: admission.Create, resource: pods, subresource: "binding",
			kind: corev1.SchemeGroupVersion.WithKind("Binding"), namespace: "default", object: binding(nil)}},
		{name: "binding, other annotations", request: request{operation: admission.Create, resource: pods, subresource: "binding",
			kind: corev1.SchemeGroupVersion.WithKind("Binding"), namespace: "default", object: binding(other)}},
		{name: "binding with user.info", request: request{operation: admission.Create, resource: pods, subresource: "binding",
			kind: corev1.SchemeGroupVersion.WithKind("Binding"), namespace: "default", object: binding(both)},
			wantWebhooks: []string{"pod-binding"}, wantPolicy: true},

		// The legacy bindings resource merges the same way.
		{name: "legacy binding, no annotations", request: request{operation: admission.Create, resource: corev1.SchemeGroupVersion.WithResource("bindings"),
			kind: corev1.SchemeGroupVersion.WithKind("Binding"), namespace: "default", object: binding(nil)}},
		{name: "legacy binding, other annotations", request: request{operation: admission.Create, resource: corev1.SchemeGroupVersion.WithResource("bindings"),
			kind: corev1.SchemeGroupVersion.WithKind("Binding"), namespace: "default", object: binding(other)}},
		{name: "legacy binding with user.info", request: request{operation: admission.Create, resource: corev1.SchemeGroupVersion.WithResource("bindings"),
			kind: corev1.SchemeGroupVersion.WithKind("Binding"), namespace: "default", object: binding(both)},
			wantWebhooks: []string{"pod-binding"}, wantPolicy: true},
		{name: "legacy binding with user.info in kube-system", request: request{operation: admission.Create, resource: corev1.SchemeGroupVersion.WithResource("bindings"),
			kind: corev1.SchemeGroupVersion.WithKind("Binding"), namespace: "kube-system", object: binding(both)}},

		// Not in the rules.
		{name: "eviction", request: request{operation: admission.Create, resource: pods, subresource: "eviction",
			kind: policyv1.SchemeGroupVersion.WithKind("Eviction"), namespace: "default",
			object: &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "sample", Annotations: alice}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.wantWebhooks, called(t, cfg.Webhooks, tc.request), "standalone webhooks called")
			assert.Equal(t, tc.wantPolicy, len(called(t, policy, tc.request)) == 1, "ClusterAdmissionPolicy called")
		})
	}
}

// TestWebhookSelection_everyRuleReachesOneWebhook sends a request for each
// (resource, operation) of metadata.yml: exactly one standalone webhook and
// the policy match it by rules.
func TestWebhookSelection_everyRuleReachesOneWebhook(t *testing.T) {
	t.Parallel()
	cfg := object[*admissionregistrationv1.MutatingWebhookConfiguration](t, webhookFile)
	policy := policyWebhook(t)
	for _, k := range expand(t, metadataRules(t)) {
		resource, sub, _ := strings.Cut(k.resource, "/")
		attr := admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{}, "default", "sample",
			schema.GroupVersionResource{Group: k.group, Version: k.version, Resource: resource}, sub,
			admission.Operation(k.operation), nil, false, nil)
		matching := func(w admissionregistrationv1.MutatingWebhook) bool {
			return slices.ContainsFunc(w.Rules, func(rule admissionregistrationv1.RuleWithOperations) bool {
				m := rules.Matcher{Rule: rule, Attr: attr}
				return m.Matches()
			})
		}
		n := 0
		for _, w := range cfg.Webhooks {
			if matching(w) {
				n++
			}
		}
		assert.Equal(t, 1, n, "%s: standalone webhooks matching", k)
		assert.True(t, matching(policy), "%s: the policy matches", k)
	}
}
