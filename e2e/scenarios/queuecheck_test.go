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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// queueReaderUser is the identity the queue-check webhook reads YuniKorn's
// configuration with: it may read ConfigMaps in the scheduler's namespace
// and Namespaces, as the chart grants.
const queueReaderUser = "userinfo-queues"

// TestYuniKornQueueCheck: with queueCheck warn, the webhook reads the
// scheduler's own yunikorn-configs through the host capability and, for
// each new pod, works out what YuniKorn will do. Every pod it admits
// without a warning is placed by the real scheduler, in the queue the
// placement rules give; every pod it warns about is rejected by it.
func TestYuniKornQueueCheck(t *testing.T) {
	start(t)
	ctx := t.Context()
	admin := client(admin)

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-userinfo-queues", Namespace: schedulerNamespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}
	_, err := admin.RbacV1().Roles(schedulerNamespace).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(schedulerNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-userinfo-queues"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: queueReaderUser}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	startWebhookWith(t, "queue", webhookQueue, fmt.Sprintf("queueCheck: {mode: warn, namespace: %s}", schedulerNamespace), queueReaderUser)
	ns := newNamespace(t, webhookQueue)

	carol := `{"user":"carol","groups":["analysts"]}`
	for _, tc := range []struct {
		name, user, queue, annotation string
		wantQueue                     string // "" when YuniKorn must reject it
	}{
		{name: "alice-own-queue", user: alice, wantQueue: "root.alice"},
		{name: "bob-admin-of-analytics", user: bob, queue: "root.analytics", wantQueue: "root.analytics"},
		{name: "livy-for-carol", user: livy, annotation: carol, wantQueue: "root.analytics"},
		{name: "dave-contractor", user: dave},
		{name: "dave-asks-shared", user: dave, queue: "root.shared"},
		{name: "obrien-bad-name", user: obrien},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, warnings := clientWithWarnings(t, tc.user)
			appID := "app-" + ns + "-" + tc.name
			pod := ykPod(tc.name, appID, nil)
			if tc.queue != "" {
				pod.Labels["queue"] = tc.queue
			}
			if tc.annotation != "" {
				pod.Annotations = map[string]string{annotationKey: tc.annotation}
			}
			_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			require.NoError(t, err, "warn mode admits")
			got := warnings.take()
			if tc.wantQueue != "" {
				assert.Empty(t, got, "no warning for a pod YuniKorn will place")
				app := waitScheduled(t, ns, tc.name, appID)
				assert.Equal(t, tc.wantQueue, app.QueueName, "YuniKorn places it where the placement rules say")
				return
			}
			require.Len(t, got, 1, "one warning for a pod YuniKorn will reject")
			assert.True(t, strings.HasPrefix(got[0], "queue check: YuniKorn will reject this Pod of user "), got[0])
			t.Logf("warning: %s", got[0])
			var p *corev1.Pod
			err = cluster.Poll(ctx, scheduleTimeout, pollInterval, func(ctx context.Context) (bool, error) {
				p, err = admin.CoreV1().Pods(ns).Get(ctx, tc.name, metav1.GetOptions{})
				return err == nil && p.Status.Phase == corev1.PodFailed, nil
			})
			require.NoError(t, err, "YuniKorn fails the pod it was warned about (status %+v)", p.Status)
			assert.Equal(t, "ApplicationRejected", p.Status.Reason)
			app := requireRejected(t, appID)
			t.Logf("YuniKorn: %s", app.RejectedMessage)
		})
	}
}
