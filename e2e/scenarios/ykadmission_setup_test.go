package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// ykAdmissionLabel marks the namespaces YuniKorn's admission controller
// covers in a scenario (its value is the scenario's controller namespace).
const ykAdmissionLabel = "e2e.yunikorn.apache.org/yunikorn-admission"

// ykAdmissionOnce serializes the scenarios that run YuniKorn's admission
// controller: it installs webhook configurations with fixed, cluster-wide
// names, so one runs at a time.
var ykAdmissionOnce sync.Mutex

// ykAdmission is YuniKorn's admission controller as a scenario runs it.
type ykAdmission struct {
	ac *cluster.YKAdmissionController
	// ns is its namespace: its yunikorn-configs, Secret, Service.
	ns string
}

// The admission controller's identity: its service account, with the
// rules of k8shim v1.9.0 deployments/scheduler/admission-controller-rbac.yaml.
const ykAdmissionSA = "yunikorn-admission-controller"

// startYKAdmission runs YuniKorn's admission controller for the rest of
// the test, as its deployment does: a namespace of its own with its
// service account and RBAC, the empty Secret it fills with its CA, and
// yunikorn-configs holding the suite's queues.yaml (the scheduler's) and
// configs (YuniKorn's string values). Its two webhooks cover the
// namespaces labelled ykAdmissionLabel=<its namespace> (coverNamespace)
// and its own. It is removed when the test ends.
func startYKAdmission(t *testing.T, configs map[string]string) *ykAdmission {
	t.Helper()
	ykAdmissionOnce.Lock()
	t.Cleanup(ykAdmissionOnce.Unlock)
	ctx := t.Context()
	cs := client(admin)

	created, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-ykac-"},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "create the admission controller's namespace")
	ns := created.Name
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{})
	})
	// Its validating webhook covers its own namespace (yunikorn-configs).
	labelNamespace(t, ns, ykAdmissionLabel, ns)

	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ykAdmissionSA}}, metav1.CreateOptions{})
	require.NoError(t, err)
	read := []string{"get", "watch", "list"}
	all := []string{"get", "watch", "list", "create", "patch", "update", "delete"}
	clusterRole := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-yunikorn-admission-" + ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: all},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read},
			{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: read},
		},
	}
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, clusterRole, metav1.CreateOptions{})
	require.NoError(t, err)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ykAdmissionSA, Namespace: ns}}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: clusterRole.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole.Name},
		Subjects:   subject,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, clusterRole.Name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(ctx, clusterRole.Name, metav1.DeleteOptions{})
	})
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-admission-controller-role"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "watch", "list", "update"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: read},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-admission-controller-rbac"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "yunikorn-admission-controller-role"},
		Subjects:   subject,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: cluster.YKSecret}, Type: corev1.SecretTypeOpaque,
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	data := map[string]string{
		"queues.yaml": queuesYAML,
		"admissionController.webHook.schedulerServiceAddress": cluster.YKSchedulerServiceAddress,
	}
	for k, v := range configs {
		data[k] = v
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-configs"}, Data: data,
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, ykAdmissionSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "a token for the admission controller's service account")
	kubeconfig, err := e2e.cluster.WriteTokenKubeconfig("yunikorn-admission-"+ns, tok.Status.Token)
	require.NoError(t, err)

	ac, err := e2e.cluster.StartAdmissionController(ctx, cluster.AdmissionControllerOptions{
		Name:       "yunikorn-admission-" + ns,
		Binary:     e2e.ykAdmissionBinary,
		Namespace:  ns,
		Kubeconfig: kubeconfig,
		Admin:      cs,
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: ykAdmissionLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{ns},
		}}},
		SchedulerRESTAddr: strings.TrimPrefix(e2e.scheduler.URL, "http://"),
	})
	require.NoError(t, err, "start YuniKorn's admission controller")
	t.Cleanup(func() {
		assert.NoError(t, ac.Remove(context.WithoutCancel(ctx)), "remove YuniKorn's admission controller")
	})
	t.Logf("YuniKorn's admission controller: namespace %s, its Service at %s, log %s", ns, ac.ServiceAddr, ac.Process.LogFile)
	return &ykAdmission{ac: ac, ns: ns}
}

// setConfig merges data into the controller's yunikorn-configs, as
// `kubectl patch --type merge` does; its validating webhook checks the
// result with the scheduler first.
func (yk *ykAdmission) setConfig(ctx context.Context, data map[string]string) error {
	patch := map[string]any{"data": data}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = client(admin).CoreV1().ConfigMaps(yk.ns).Patch(ctx, "yunikorn-configs", types.MergePatchType, b, metav1.PatchOptions{})
	return err
}

// cover puts a namespace under the controller's webhooks and waits until
// its mutation is in force there: a dry-run Pod of livy (whom the
// scenarios' controllers trust as an external user, and who supplies no
// user.info) comes back with spec.schedulerName yunikorn.
func (yk *ykAdmission) cover(t *testing.T, ns string) {
	t.Helper()
	labelNamespace(t, ns, ykAdmissionLabel, yk.ns)
	var last string
	err := cluster.Poll(t.Context(), enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		p, err := client(livy).CoreV1().Pods(ns).Create(ctx, newPod("ykac-enforced", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = "schedulerName " + p.Spec.SchedulerName
		return p.Spec.SchedulerName == schedulerName, nil
	})
	require.NoErrorf(t, err, "YuniKorn's admission controller in force in %s (%s)", ns, last)
}

// labelNamespace sets one label on a namespace.
func labelNamespace(t *testing.T, ns, key, value string) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: value}}})
	require.NoError(t, err)
	_, err = client(admin).CoreV1().Namespaces().Patch(t.Context(), ns, types.MergePatchType, b, metav1.PatchOptions{})
	require.NoError(t, err, "label namespace %s", ns)
}

// mutateDecisions returns the main webhook's mutate-stage decisions on a
// Pod CREATE, in order (a reinvocation adds a second one).
func mutateDecisions(t *testing.T, wh *cluster.Webhook, ns, pod string) []string {
	t.Helper()
	var out []string
	for _, a := range admissionsFor(t, wh, ns) {
		if a.Kind == "Pod" && a.Operation == "CREATE" && a.Name == pod && a.Stage == "mutate" {
			out = append(out, a.Decision)
		}
	}
	return out
}

// ykAutogenAppID is the application ID YuniKorn's admission controller
// gives a Pod without one (k8shim pkg/common/utils GenerateApplicationID,
// without generateUniqueAppId): yunikorn-<namespace>-autogen, at most 63
// bytes.
func ykAutogenAppID(ns string) string {
	id := fmt.Sprintf("yunikorn-%s-autogen", ns)
	if len(id) > 63 {
		id = id[:63]
	}
	return id
}
