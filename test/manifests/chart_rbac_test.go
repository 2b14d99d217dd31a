package manifests

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	policiesv1 "github.com/kubewarden/adm-controller/api/policies/v1"
)

// rbacRendering is what a rendering holds for trustRBAC.
type rbacRendering struct {
	roles    map[string]*rbacv1.ClusterRole
	bindings []*rbacv1.ClusterRoleBinding
	accounts []*corev1.ServiceAccount
	deploy   *appsv1.Deployment
	server   *policiesv1.PolicyServer
	settings string // the standalone settings ConfigMap's settings.yaml
	nsRoles  []*rbacv1.Role
	nsBinds  []*rbacv1.RoleBinding
	policies []*policiesv1.ClusterAdmissionPolicy
	webhooks []admissionregistrationv1.MutatingWebhook
	twins    []admissionregistrationv1.ValidatingWebhook
}

func renderRBAC(t *testing.T, values, namespace string) rbacRendering {
	t.Helper()
	var v map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(values), &v))
	r := rbacRendering{roles: map[string]*rbacv1.ClusterRole{}}
	for _, m := range mustRender(t, v, "yunikorn-userinfo", namespace) {
		switch o := m.obj.(type) {
		case *rbacv1.ClusterRole:
			r.roles[o.Name] = o
		case *rbacv1.ClusterRoleBinding:
			r.bindings = append(r.bindings, o)
		case *corev1.ServiceAccount:
			r.accounts = append(r.accounts, o)
		case *appsv1.Deployment:
			r.deploy = o
		case *policiesv1.PolicyServer:
			r.server = o
		case *corev1.ConfigMap:
			r.settings = o.Data["settings.yaml"]
		case *rbacv1.Role:
			r.nsRoles = append(r.nsRoles, o)
		case *rbacv1.RoleBinding:
			r.nsBinds = append(r.nsBinds, o)
		case *policiesv1.ClusterAdmissionPolicy:
			r.policies = append(r.policies, o)
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			r.webhooks = append(r.webhooks, o.Webhooks...)
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			r.twins = append(r.twins, o.Webhooks...)
		}
	}
	return r
}

var reviewerRules = []rbacv1.PolicyRule{{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}}}

// TestChart_trustRBAC: with trustRBAC off nothing may call the API server
// (no token, no role); on, the webhook's (or the PolicyServer's) account
// may create SubjectAccessReviews and nothing else, and the role operators
// bind to front-ends names exactly the access the policy asks.
func TestChart_trustRBAC(t *testing.T) {
	t.Parallel()
	off := renderRBAC(t, "", webhookNamespace)
	assert.Empty(t, off.roles)
	assert.Empty(t, off.bindings)
	require.NotNil(t, off.deploy)
	assert.Equal(t, false, *off.deploy.Spec.Template.Spec.AutomountServiceAccountToken)

	on := renderRBAC(t, "settings: {trustRBAC: true}", webhookNamespace)
	require.NotNil(t, on.deploy)
	assert.Equal(t, true, *on.deploy.Spec.Template.Spec.AutomountServiceAccountToken, "serve needs a token to ask the API server")
	require.Contains(t, on.roles, "yunikorn-userinfo-access-reviewer")
	assert.Equal(t, reviewerRules, on.roles["yunikorn-userinfo-access-reviewer"].Rules)
	require.Len(t, on.bindings, 1)
	assert.Equal(t, "yunikorn-userinfo-access-reviewer", on.bindings[0].RoleRef.Name)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: on.deploy.Spec.Template.Spec.ServiceAccountName, Namespace: webhookNamespace}},
		on.bindings[0].Subjects)
	require.Contains(t, on.roles, "yunikorn-userinfo-userinfo-setter")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"yunikorn.apache.org"}, Resources: []string{"userinfos", "usergroups"}, Verbs: []string{"set"}}},
		on.roles["yunikorn-userinfo-userinfo-setter"].Rules)
	assert.Contains(t, on.settings, "trustRBAC: true")

	custom := renderRBAC(t, "settings: {trustRBAC: {verb: submit-as, resource: users, groupsResource: teams, group: batch.example.com, acceptWildcardGrants: true, maxGroups: 4}}", webhookNamespace)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"batch.example.com"}, Resources: []string{"users", "teams"}, Verbs: []string{"submit-as"}}},
		custom.roles["yunikorn-userinfo-userinfo-setter"].Rules)
	partial := renderRBAC(t, "settings: {trustRBAC: {verb: submit-as}}", webhookNamespace)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"yunikorn.apache.org"}, Resources: []string{"userinfos", "usergroups"}, Verbs: []string{"submit-as"}}},
		partial.roles["yunikorn-userinfo-userinfo-setter"].Rules, "unset members take the policy's defaults")

	kw := renderRBAC(t, "mode: kubewarden\nsettings: {trustRBAC: true}", kubewardenNS)
	require.NotNil(t, kw.server)
	require.Len(t, kw.accounts, 1)
	assert.Equal(t, kw.accounts[0].Name, kw.server.Spec.ServiceAccountName, "the PolicyServer runs as the account the role is bound to")
	require.Len(t, kw.bindings, 1)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: kw.accounts[0].Name, Namespace: kubewardenNS}}, kw.bindings[0].Subjects)
	assert.Equal(t, reviewerRules, kw.roles["yunikorn-userinfo-access-reviewer"].Rules)

	shared := renderRBAC(t, "mode: kubewarden\nsettings: {trustRBAC: true}\nkubewarden: {policyServer: {create: false, name: default}}", kubewardenNS)
	assert.Empty(t, shared.accounts, "another PolicyServer's account is not ours to make")
	assert.Empty(t, shared.bindings)
	assert.Contains(t, shared.roles, "yunikorn-userinfo-userinfo-setter")
}

// TestChart_queueCheck: queueCheck reads YuniKorn's ConfigMaps in its own
// namespace and namespaces' annotations, and with schedulerUsers the Pods
// that placeholders name as originators, and nothing else; under
// Kubewarden the policies list those kinds as their context.
func TestChart_queueCheck(t *testing.T) {
	t.Parallel()
	read := []string{"get", "list", "watch"}
	off := renderRBAC(t, "settings: {queueCheck: 'off'}", webhookNamespace)
	assert.Empty(t, off.nsRoles)
	assert.Empty(t, off.roles)
	assert.Equal(t, false, *off.deploy.Spec.Template.Spec.AutomountServiceAccountToken)

	on := renderRBAC(t, "settings: {queueCheck: {mode: enforce, namespace: yk-system}}", webhookNamespace)
	assert.Equal(t, true, *on.deploy.Spec.Template.Spec.AutomountServiceAccountToken)
	require.Len(t, on.nsRoles, 1)
	assert.Equal(t, "yk-system", on.nsRoles[0].Namespace, "in YuniKorn's namespace only")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: read}}, on.nsRoles[0].Rules)
	require.Len(t, on.nsBinds, 1)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: on.deploy.Spec.Template.Spec.ServiceAccountName, Namespace: webhookNamespace}},
		on.nsBinds[0].Subjects)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read}},
		on.roles["yunikorn-userinfo-namespace-reader"].Rules)
	assert.NotContains(t, on.roles, "yunikorn-userinfo-access-reviewer", "no SubjectAccessReviews without trustRBAC")

	// The scheduler's placeholders: the originator Pods they name.
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: read}},
		on.roles["yunikorn-userinfo-owner-reader"].Rules)
	noPlaceholders := renderRBAC(t, "settings: {queueCheck: enforce, schedulerUsers: []}", webhookNamespace)
	assert.NotContains(t, noPlaceholders.roles, "yunikorn-userinfo-owner-reader", "no placeholders to read for")

	kw := renderRBAC(t, "mode: kubewarden\nsettings: {queueCheck: warn}", kubewardenNS)
	require.Len(t, kw.policies, 2)
	for _, p := range kw.policies {
		assert.Equal(t, []policiesv1.ContextAwareResource{{APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "v1", Kind: "Namespace"}, {APIVersion: "v1", Kind: "Pod"}},
			p.Spec.ContextAwareResources, p.Name)
	}
	require.Len(t, kw.nsBinds, 1)
	assert.Equal(t, kw.server.Spec.ServiceAccountName, kw.nsBinds[0].Subjects[0].Name)
	assert.Equal(t, "yunikorn", kw.nsRoles[0].Namespace)
	plain := renderRBAC(t, "mode: kubewarden", kubewardenNS)
	for _, p := range plain.policies {
		assert.Empty(t, p.Spec.ContextAwareResources, "no context without the check")
	}
}

// TestChart_workloads: the kinds settings.workloads enables reach the policy
// (webhook rules, both stages; the ClusterAdmissionPolicies' rules), and the
// proofs may read the owners of entries that name operators, and Pods with
// trustPodTokens: read access, and contextAwareResources under Kubewarden.
func TestChart_workloads(t *testing.T) {
	t.Parallel()
	read := []string{"get", "list", "watch"}
	const values = `settings:
  workloads:
    - jobset
    - {preset: kuberay, operators: ["^system:serviceaccount:ray-system:kuberay-operator$"]}
    - {group: example.com, version: v1, kind: Notebook, resource: notebooks, paths: [spec.template.metadata.annotations]}
  trustPodTokens: true
`
	on := renderRBAC(t, values, webhookNamespace)
	require.NotNil(t, on.deploy)
	assert.Equal(t, true, *on.deploy.Spec.Template.Spec.AutomountServiceAccountToken, "the proofs read owners")
	custom := func(group, resource string) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
		}
	}
	want := []admissionregistrationv1.RuleWithOperations{custom("jobset.x-k8s.io", "jobsets"),
		custom("ray.io", "rayclusters"), custom("ray.io", "rayjobs"), custom("ray.io", "rayservices"), custom("example.com", "notebooks")}
	require.NotEmpty(t, on.webhooks)
	assert.Equal(t, want, on.webhooks[0].Rules[4:], "the workloads webhook receives the enabled kinds")
	require.NotEmpty(t, on.twins)
	assert.Equal(t, want, on.twins[0].Rules[4:], "and so does its validating twin")
	require.Contains(t, on.roles, "yunikorn-userinfo-owner-reader")
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: read},
		{APIGroups: []string{"ray.io"}, Resources: []string{"rayjobs"}, Verbs: read},
		{APIGroups: []string{"ray.io"}, Resources: []string{"rayservices"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: read},
	}, on.roles["yunikorn-userinfo-owner-reader"].Rules, "owners of the entries that name operators, and Pods for trustPodTokens; not jobsets")

	kw := renderRBAC(t, "mode: kubewarden\n"+values, kubewardenNS)
	require.Len(t, kw.policies, 2)
	for _, p := range kw.policies {
		assert.Equal(t, []policiesv1.ContextAwareResource{{APIVersion: "ray.io/v1", Kind: "RayCluster"}, {APIVersion: "ray.io/v1", Kind: "RayJob"},
			{APIVersion: "ray.io/v1", Kind: "RayService"}, {APIVersion: "v1", Kind: "Pod"}}, p.Spec.ContextAwareResources, p.Name)
		assert.Len(t, p.Spec.Rules, 11, "the six built-in rules and five enabled kinds")
	}
	require.NotNil(t, kw.server)
	assert.NotEmpty(t, kw.server.Spec.ServiceAccountName)

	owned := renderRBAC(t, "settings: {applicationOwnership: {mode: enforce}}", webhookNamespace)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: read}},
		owned.roles["yunikorn-userinfo-owner-reader"].Rules, "applicationOwnership lists Pods")

	off := renderRBAC(t, "settings: {workloads: [jobset], applicationOwnership: 'off'}", webhookNamespace)
	assert.NotContains(t, off.roles, "yunikorn-userinfo-owner-reader", "no operators named, nothing to read")
	assert.Equal(t, false, *off.deploy.Spec.Template.Spec.AutomountServiceAccountToken)
}

// TestChart_scheduling: the scheduling setting reads Namespaces and
// PriorityClasses over the cluster (each unless its switch is off), and
// nothing when it is absent or null; under Kubewarden the policies list
// them as their context, Namespace once with queueCheck.
func TestChart_scheduling(t *testing.T) {
	t.Parallel()
	read := []string{"get", "list", "watch"}
	for _, values := range []string{"settings: {}", "settings: {scheduling: null}"} {
		off := renderRBAC(t, values, webhookNamespace)
		assert.NotContains(t, off.roles, "yunikorn-userinfo-scheduling-reader", values)
		assert.Equal(t, false, *off.deploy.Spec.Template.Spec.AutomountServiceAccountToken, values)
	}

	on := renderRBAC(t, "settings: {scheduling: {}}", webhookNamespace)
	assert.Equal(t, true, *on.deploy.Spec.Template.Spec.AutomountServiceAccountToken)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read},
		{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: read},
	}, on.roles["yunikorn-userinfo-scheduling-reader"].Rules)

	noPreemption := renderRBAC(t, "settings: {scheduling: {preemption: false}}", webhookNamespace)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read}},
		noPreemption.roles["yunikorn-userinfo-scheduling-reader"].Rules)
	listsOnly := renderRBAC(t, "settings: {scheduling: {preemption: false, namespaceAnnotations: false}}", webhookNamespace)
	assert.NotContains(t, listsOnly.roles, "yunikorn-userinfo-scheduling-reader", "nothing to read")

	kw := renderRBAC(t, "mode: kubewarden\nsettings: {scheduling: {}}", kubewardenNS)
	require.NotNil(t, kw.server)
	require.Len(t, kw.policies, 2)
	for _, p := range kw.policies {
		assert.Equal(t, []policiesv1.ContextAwareResource{{APIVersion: "v1", Kind: "Namespace"}, {APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"}},
			p.Spec.ContextAwareResources, p.Name)
	}
	both := renderRBAC(t, "mode: kubewarden\nsettings: {scheduling: {}, queueCheck: warn}", kubewardenNS)
	for _, p := range both.policies {
		assert.Equal(t, []policiesv1.ContextAwareResource{{APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "v1", Kind: "Namespace"},
			{APIVersion: "v1", Kind: "Pod"}, {APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"}}, p.Spec.ContextAwareResources, p.Name)
	}
}

// TestChart_follow: followYuniKornConfig may read ConfigMaps in the
// namespace it follows (and nowhere else), under either mode; a namespace
// queueCheck already grants gets no second Role.
func TestChart_follow(t *testing.T) {
	t.Parallel()
	read := []string{"get", "list", "watch"}
	on := renderRBAC(t, "settings: {followYuniKornConfig: {namespace: yk-system}}", webhookNamespace)
	assert.Equal(t, true, *on.deploy.Spec.Template.Spec.AutomountServiceAccountToken, "the policy calls the API server")
	require.Len(t, on.nsRoles, 1)
	assert.Equal(t, "yk-system", on.nsRoles[0].Namespace)
	assert.Equal(t, "yunikorn-userinfo-follow-config-reader", on.nsRoles[0].Name)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: read}}, on.nsRoles[0].Rules)
	require.Len(t, on.nsBinds, 1)
	assert.Equal(t, on.deploy.Spec.Template.Spec.ServiceAccountName, on.nsBinds[0].Subjects[0].Name)

	both := renderRBAC(t, "settings: {followYuniKornConfig: true, queueCheck: warn}", webhookNamespace)
	require.Len(t, both.nsRoles, 1, "queueCheck's reader covers the same namespace")
	assert.Equal(t, "yunikorn", both.nsRoles[0].Namespace)

	off := renderRBAC(t, "settings: {followYuniKornConfig: false}", webhookNamespace)
	assert.Empty(t, off.nsRoles)

	kw := renderRBAC(t, "mode: kubewarden\nsettings: {followYuniKornConfig: true}", kubewardenNS)
	require.Len(t, kw.policies, 2)
	for _, p := range kw.policies {
		assert.Equal(t, []policiesv1.ContextAwareResource{{APIVersion: "v1", Kind: "ConfigMap"}}, p.Spec.ContextAwareResources, p.Name)
	}
	require.Len(t, kw.nsRoles, 1)
	assert.Equal(t, "yunikorn", kw.nsRoles[0].Namespace)
	assert.Equal(t, kw.server.Spec.ServiceAccountName, kw.nsBinds[0].Subjects[0].Name)
}
