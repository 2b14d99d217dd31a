package scenarios

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// appOwnerUser is the identity of the application ownership webhooks: it
// may read Pods in every namespace, as the chart grants when
// applicationOwnership is on (YuniKorn's application IDs are global).
const appOwnerUser = "userinfo-appowner"

// grantPodReader lets appOwnerUser list and watch Pods cluster-wide.
func grantPodReader(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	name := "e2e-" + nameFor(t.Name()) + "-pods"
	_, err := client(admin).RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client(admin).RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: appOwnerUser}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		assert.NoError(t, client(admin).RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}))
		assert.NoError(t, client(admin).RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}))
	})
}

// gatedPod is a YuniKorn Pod in application appID held by a scheduling
// gate: nothing schedules it until an update removes the gate.
func gatedPod(name, appID string) *corev1.Pod {
	p := ykPod(name, appID, nil)
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	return p
}

// relabel moves a gated Pod to application appID and removes its gate, in
// one UPDATE, as user.
func relabel(ctx context.Context, user, ns, pod, appID string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}},"spec":{"schedulingGates":null}}`, appIDLabel, appID)
	_, err := client(user).CoreV1().Pods(ns).Patch(ctx, pod, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// TestYuniKornApplicationOwnership checks application ownership against
// the real scheduler's semantics. With a webhook in warn mode it shows what
// the check guards against: YuniKorn puts a Pod in the application its ID
// names whatever its namespace, puts the Pods that name no ID in one
// generated application per namespace, and reads a gated Pod's application
// when the gate goes; in each case bob's Pod ends up in alice's application.
// With a webhook in enforce mode, each of those Pods is refused, and bob's
// own applications still work.
func TestYuniKornApplicationOwnership(t *testing.T) {
	start(t)
	ctx := t.Context()
	grantPodReader(t)
	startWebhookWith(t, "owner-warn", "owner-warn", "applicationOwnership: warn", appOwnerUser)
	startWebhookWith(t, "owner-enforce", "owner-enforce", "applicationOwnership: enforce", appOwnerUser)
	aliceID := e2e.identity[alice]

	t.Run("warn shows the shim's semantics", func(t *testing.T) {
		nsA, nsB := shortNamespace(t, "owner-warn"), shortNamespace(t, "owner-warn")
		bobClient, warnings := clientWithWarnings(t, bob)

		// An application ID is global: bob's Pod in nsB joins alice's
		// application of nsA.
		appID := "app-" + nsA + "-alice"
		_, err := client(alice).CoreV1().Pods(nsA).Create(ctx, ykPod("alice-1", appID, nil), metav1.CreateOptions{})
		require.NoError(t, err)
		waitScheduled(t, nsA, "alice-1", appID)
		_, err = bobClient.CoreV1().Pods(nsB).Create(ctx, ykPod("bob-joins", appID, nil), metav1.CreateOptions{})
		require.NoError(t, err, "warn mode admits")
		want := fmt.Sprintf("application %s is owned by another user: a pod of user %s may not join it"+ownerHint, appID, bob)
		assert.Contains(t, warnings.take(), want)
		app := waitScheduled(t, nsB, "bob-joins", appID)
		assert.Equal(t, aliceID.User, app.User, "bob's pod runs in alice's application, as alice")
		assert.Len(t, app.Allocations, 2, "both pods in one application across namespaces")

		// Without an ID, Pods of a namespace share its generated
		// application, which belongs to its first Pod's user.
		generated := "yunikorn-" + nsA + "-autogen"
		noID := func(name string) *corev1.Pod {
			p := ykPod(name, "", nil)
			p.Labels = nil
			return p
		}
		_, err = client(alice).CoreV1().Pods(nsA).Create(ctx, noID("alice-noid"), metav1.CreateOptions{})
		require.NoError(t, err)
		waitScheduled(t, nsA, "alice-noid", generated)
		_, err = bobClient.CoreV1().Pods(nsA).Create(ctx, noID("bob-noid"), metav1.CreateOptions{})
		require.NoError(t, err)
		got := warnings.take()
		assert.True(t, containsPrefix(got, "pods without an application ID in namespace "+nsA+" join YuniKorn's generated application "+generated+
			", which is owned by another user"), "warnings: %q", got)
		app = waitScheduled(t, nsA, "bob-noid", generated)
		assert.Equal(t, aliceID.User, app.User, "bob's pod without an ID runs in alice's generated application")

		// A gated Pod is placed when its gate goes, in the application it
		// names then.
		_, err = bobClient.CoreV1().Pods(nsB).Create(ctx, gatedPod("bob-gated", "app-"+nsB+"-bob"), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Empty(t, warnings.take(), "bob's own application")
		require.NoError(t, relabel(ctx, bob, nsB, "bob-gated", appID))
		app = waitScheduled(t, nsB, "bob-gated", appID)
		assert.Equal(t, aliceID.User, app.User, "the relabelled pod joined alice's application")
		assert.Len(t, app.Allocations, 3)
	})

	t.Run("enforce refuses each", func(t *testing.T) {
		nsA, nsB := shortNamespace(t, "owner-enforce"), shortNamespace(t, "owner-enforce")
		appID := "app-" + nsA + "-alice"
		_, err := client(alice).CoreV1().Pods(nsA).Create(ctx, ykPod("alice-1", appID, nil), metav1.CreateOptions{})
		require.NoError(t, err)
		waitScheduled(t, nsA, "alice-1", appID)
		owned := fmt.Sprintf("application %s is owned by another user: a pod of user %s may not join it"+ownerHint, appID, bob)

		_, err = client(bob).CoreV1().Pods(nsB).Create(ctx, ykPod("bob-joins", appID, nil), metav1.CreateOptions{})
		requireRefused(t, err, workloadsWebhook, owned)

		generated := "yunikorn-" + nsA + "-autogen"
		noID := ykPod("alice-noid", "", nil)
		noID.Labels = nil
		_, err = client(alice).CoreV1().Pods(nsA).Create(ctx, noID, metav1.CreateOptions{})
		require.NoError(t, err)
		waitScheduled(t, nsA, "alice-noid", generated)
		noID = ykPod("bob-noid", "", nil)
		noID.Labels = nil
		_, err = client(bob).CoreV1().Pods(nsA).Create(ctx, noID, metav1.CreateOptions{})
		requireRefused(t, err, workloadsWebhook, "pods without an application ID in namespace "+nsA+" join YuniKorn's generated application "+generated+
			", which is owned by another user: a pod of user "+bob+" may not join it; label it with an application ID of its own (applicationId), or run YuniKorn with admissionController.filtering.generateUniqueAppId"+ownerHint)
		_, err = client(bob).CoreV1().Pods(nsB).Create(ctx, ykPod("bob-explicit", generated, nil), metav1.CreateOptions{})
		requireRefused(t, err, workloadsWebhook, fmt.Sprintf("application %s is owned by another user: a pod of user %s may not join it"+ownerHint, generated, bob))

		bobApp := "app-" + nsB + "-bob"
		_, err = client(bob).CoreV1().Pods(nsB).Create(ctx, gatedPod("bob-gated", bobApp), metav1.CreateOptions{})
		require.NoError(t, err)
		requireRefused(t, relabel(ctx, bob, nsB, "bob-gated", appID), workloadsWebhook, owned)
		require.NoError(t, relabel(ctx, bob, nsB, "bob-gated", bobApp), "releasing the gate in his own application")
		app := waitScheduled(t, nsB, "bob-gated", bobApp)
		assert.Equal(t, bob, app.User)

		a, err := e2e.scheduler.Application(ctx, appID)
		require.NoError(t, err)
		assert.Len(t, a.Allocations, 1, "alice's application holds only her pod")

		// A deleted Pod: YuniKorn keeps its application completing for
		// completingTimeout, and a Pod joining meanwhile revives it with its
		// first user. The API server shows the Pod gone at once; serve's
		// index keeps its owner for the window, so bob is still refused.
		deletedApp := "app-" + nsA + "-deleted"
		_, err = client(alice).CoreV1().Pods(nsA).Create(ctx, ykPod("alice-deleted", deletedApp, nil), metav1.CreateOptions{})
		require.NoError(t, err)
		waitScheduled(t, nsA, "alice-deleted", deletedApp)
		require.NoError(t, client(alice).CoreV1().Pods(nsA).Delete(ctx, "alice-deleted", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		require.NoError(t, cluster.Poll(ctx, scheduleTimeout, pollInterval, func(ctx context.Context) (bool, error) {
			_, err := client(admin).CoreV1().Pods(nsA).Get(ctx, "alice-deleted", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}))
		// Make sure serve's cache has seen the deletion: a watch delivers
		// events in order, so once a Pod alice creates after it is seen
		// (bob's dry run into its application is refused), so was the
		// deletion, and a cache without the index's memory would have
		// forgotten alice's application by now.
		marker := "app-" + nsA + "-marker"
		_, err = client(alice).CoreV1().Pods(nsA).Create(ctx, ykPod("alice-marker", marker, nil), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, cluster.Poll(ctx, scheduleTimeout, pollInterval, func(ctx context.Context) (bool, error) {
			_, err := client(bob).CoreV1().Pods(nsB).Create(ctx, ykPod("bob-probe", marker, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return apierrors.IsForbidden(err), nil
		}), "serve's cache never saw alice's marker pod")
		_, err = client(bob).CoreV1().Pods(nsB).Create(ctx, ykPod("bob-after-delete", deletedApp, nil), metav1.CreateOptions{})
		requireRefused(t, err, workloadsWebhook, fmt.Sprintf("application %s is owned by another user: a pod of user %s may not join it"+ownerHint, deletedApp, bob))
		if a, err := e2e.scheduler.Application(ctx, deletedApp); assert.NoError(t, err, "YuniKorn still keeps the deleted Pod's application") {
			assert.Equal(t, aliceID.User, a.User)
			t.Logf("application %s after its only Pod was deleted: %s", deletedApp, a.State)
		}
	})
}

// shortNamespace is newNamespace with a short name (e2e-ao-xxxxx), so that
// YuniKorn's generated application ID, yunikorn-<namespace>-autogen, is not
// cut at 63 bytes as it is for the long names of subtests.
func shortNamespace(t *testing.T, webhook string) string {
	t.Helper()
	ns, err := createNamespace(t.Context(), client(admin), "ao", map[string]string{webhookLabel: webhook})
	require.NoError(t, err)
	t.Logf("namespace %s", ns)
	require.NoError(t, waitEnforced(t.Context(), ns))
	return ns
}

// containsPrefix reports whether one of list starts with prefix.
func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// ownerHint ends an ownership refusal, which names no owner.
const ownerHint = "; who owns it is not shown here: a user who may list Pods in every namespace finds out with yunikorn-userinfo audit"
