package scenarios

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// followTimeout bounds how long an edit of yunikorn-configs may take to
// change the rule: the webhook's ConfigMap watch and one request.
const followTimeout = 10 * time.Second

// TestFollowYuniKornConfig: with followYuniKornConfig, the running
// webhook takes its access control from a yunikorn-configs ConfigMap, and
// an edit of it changes the rule within seconds, without a restart: bob
// (group ops) may not supply user.info; once externalGroups names ops he
// may; a typo in the value keeps the rule last read (with a warning); and
// bypassAuth "true" (YuniKorn's admission controller handed over) is not
// followed.
func TestFollowYuniKornConfig(t *testing.T) {
	start(t)
	ctx := t.Context()
	admin := client(admin)

	// YuniKorn's namespace of this scenario alone, so that the edits
	// below never reach the real scheduler's yunikorn-configs.
	yk, err := createNamespace(ctx, admin, t.Name()+"-yk", nil)
	require.NoError(t, err)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-configs", Namespace: yk},
		Data:       map[string]string{"admissionController.accessControl.externalUsers": "^livy$"},
	}
	_, err = admin.CoreV1().ConfigMaps(yk).Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().Roles(yk).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-userinfo-follow"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(yk).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-userinfo-follow"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "e2e-userinfo-follow"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: queueReaderUser}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	wh := startWebhookWith(t, "follow", "follow", "followYuniKornConfig: {namespace: "+yk+"}", queueReaderUser)
	pid := wh.Process.Pid()
	ns := newNamespace(t, "follow")
	carol := `{"user":"carol","groups":["analysts"]}`
	bobID := e2e.identity[bob]
	n := 0
	// create has bob submit a Pod that names carol, and returns the
	// refusal (nil when admitted) and the warnings.
	create := func() (error, []string) {
		n++
		cs, warnings := clientWithWarnings(t, bob)
		pod := newPod(fmt.Sprintf("bob-for-carol-%d", n), map[string]string{annotationKey: carol})
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err, warnings.take()
	}
	edit := func(data map[string]string) time.Time {
		t.Helper()
		cur, err := admin.CoreV1().ConfigMaps(yk).Get(ctx, "yunikorn-configs", metav1.GetOptions{})
		require.NoError(t, err)
		cur.Data = data
		_, err = admin.CoreV1().ConfigMaps(yk).Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		return time.Now()
	}
	// until polls until bob's create is admitted (want) or refused.
	until := func(what string, want bool, since time.Time) []string {
		t.Helper()
		var warnings []string
		var last error
		err := cluster.Poll(ctx, followTimeout, 100*time.Millisecond, func(context.Context) (bool, error) {
			last, warnings = create()
			return (last == nil) == want, nil
		})
		require.NoError(t, err, "%s: still %v after %s", what, last, followTimeout)
		t.Logf("%s: in force %.3fs after the edit", what, time.Since(since).Seconds())
		return warnings
	}

	err, _ = create()
	requireRefused(t, err, workloadsWebhook, bobID.notAllowed())

	at := edit(map[string]string{
		"admissionController.accessControl.externalUsers":  "^livy$",
		"admissionController.accessControl.externalGroups": "^ops$",
	})
	warnings := until("externalGroups ^ops$", true, at)
	assert.Empty(t, warnings)

	at = edit(map[string]string{
		"admissionController.accessControl.externalUsers":  "^livy$",
		"admissionController.accessControl.externalGroups": "^ops$,(",
	})
	// A typo: the rule last read stays, and every answer says so.
	var typo []string
	err = cluster.Poll(ctx, followTimeout, 100*time.Millisecond, func(context.Context) (bool, error) {
		var err error
		err, typo = create()
		require.NoError(t, err, "a typo in yunikorn-configs never refuses what the rule last read admits")
		return len(typo) > 0, nil
	})
	require.NoError(t, err, "the typo is reported within %s", followTimeout)
	t.Logf("typo reported %.3fs after the edit: %s", time.Since(at).Seconds(), typo)
	require.Len(t, typo, 1)
	assert.True(t, strings.HasPrefix(typo[0], "followYuniKornConfig: admissionController.accessControl.externalGroups in "+yk+
		"/yunikorn-configs: its value is not one YuniKorn can use"), typo[0])
	assert.Contains(t, typo[0], "the value last read stays in force")

	// The hand-over: YuniKorn's admission controller stands aside with
	// bypassAuth "true"; the webhook keeps enforcing.
	at = edit(map[string]string{"admissionController.accessControl.bypassAuth": "true"})
	until("bypassAuth true, externalGroups gone", false, at)
	err, _ = create()
	requireRefused(t, err, workloadsWebhook, bobID.notAllowed())
	exited, _ := wh.Process.Exited()
	assert.False(t, exited)
	assert.Equal(t, pid, wh.Process.Pid(), "the same webhook process throughout: no restart, no rollout")
}
