package scenarios

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// Annotations YuniKorn's admission controller writes.
const (
	allowPreemptionKey = "yunikorn.apache.org/allow-preemption"
	canonicalAppIDKey  = "yunikorn.apache.org/app-id"
)

// webhookYKFirst labels the namespaces of this webhook's configuration
// registered under a name that sorts before YuniKorn's (as Kubewarden's
// clusterwide-<policy> does).
const webhookYKFirst = "ykac-first"

// TestYuniKornAdmissionBeside: YuniKorn's own admission controller (k8shim
// v1.9.0, unmodified, installing its own webhook configurations) and this
// webhook, both real, on the same Pods, as README "Running both, and in
// which order" describes. The API server calls mutating configurations in
// name order: the suite's main configuration (yunikorn-userinfo-e2e) sorts
// after YuniKorn's (yunikorn-admission-controller-mutations), a second one
// (clusterwide-...) before it.
//
//   - bypassAuth "false", this webhook after YuniKorn's: YuniKorn writes
//     alice's user.info and this policy accepts it unchanged; a forged value
//     is refused (by YuniKorn, first); livy, an external user of both,
//     submits for carol.
//   - bypassAuth "false", this webhook first: the policy records alice,
//     and YuniKorn refuses alice's Pod, since alice may not supply
//     user.info (the documented failure).
//   - bypassAuth "true": the order does not matter. This webhook writes
//     user.info, YuniKorn the scheduler name, the application ID labels and
//     allow-preemption; nothing else changes and nothing conflicts; a
//     forged value is refused, now by this policy; YuniKorn still validates
//     yunikorn-configs edits against the scheduler.
//
// Every admitted Pod is then scheduled by the real YuniKorn scheduler as
// the user its user.info names, in the queue its placement rules give.
func TestYuniKornAdmissionBeside(t *testing.T) {
	start(t)
	ctx := t.Context()
	yk := startYKAdmission(t, map[string]string{
		"admissionController.accessControl.bypassAuth":    "false",
		"admissionController.accessControl.externalUsers": "^" + livy + "$",
	})

	// This webhook first, for the namespaces labelled webhookYKFirst.
	first, err := e2e.registerWebhook(ctx, "clusterwide-yunikorn-userinfo-e2e", e2e.webhook, webhookYKFirst)
	require.NoError(t, err)
	t.Cleanup(func() {
		err := client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), first.Name, metav1.DeleteOptions{})
		assert.NoError(t, err)
	})
	require.Less(t, first.Name, cluster.YKMutations, "sorts before YuniKorn's")
	require.Greater(t, "yunikorn-userinfo-e2e", cluster.YKMutations, "the main configuration sorts after YuniKorn's")

	after := newNamespace(t, webhookMain)
	before := newNamespace(t, webhookYKFirst)
	yk.cover(t, after)
	yk.cover(t, before)

	alicePod := func(ns, name, appID string, annotations map[string]string) (*corev1.Pod, error) {
		p := newPod(name, annotations) // no schedulerName: YuniKorn's controller sets it
		if appID != "" {
			p.Labels = map[string]string{appIDLabel: appID}
		}
		return client(alice).CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	}
	forCarol := map[string]string{annotationKey: `{"user":"carol","groups":["analysts"]}`}
	aliceID := e2e.identity[alice]

	t.Run("bypassAuth false, this webhook after YuniKorn's", func(t *testing.T) {
		p, err := alicePod(after, "alice-autogen", "", nil)
		require.NoError(t, err, "alice's Pod is admitted")
		appID := ykAutogenAppID(after)
		assert.Equal(t, map[string]string{annotationKey: aliceID.annotation(), allowPreemptionKey: "true"}, p.Annotations,
			"YuniKorn recorded alice (the same bytes this policy writes) and allow-preemption")
		assert.Equal(t, map[string]string{canonicalAppIDKey: appID, appIDLabel: appID}, p.Labels, "YuniKorn's generated application ID")
		assert.Equal(t, schedulerName, p.Spec.SchedulerName)
		decisions := mutateDecisions(t, e2e.webhook, after, "alice-autogen")
		assert.NotEmpty(t, decisions)
		assert.NotContains(t, decisions, "mutated", "this policy found YuniKorn's value right and changed nothing")
		app := waitScheduled(t, after, "alice-autogen", appID)
		assert.Equal(t, aliceID.User, app.User)
		assert.Equal(t, aliceID.Groups, app.Groups)
		assert.Equal(t, "root.alice", app.QueueName)

		_, err = client(bob).CoreV1().Pods(after).Create(ctx, ykPod("bob-as-carol", "app-"+after+"-forged", forCarol), metav1.CreateOptions{})
		requireRefusedByYuniKorn(t, err, e2e.identity[bob].notAllowed())

		appCarol := "app-" + after + "-carol"
		p, err = client(livy).CoreV1().Pods(after).Create(ctx, ykPod("livy-for-carol", appCarol, forCarol), metav1.CreateOptions{})
		require.NoError(t, err, "livy, an external user of both, submits for carol")
		assert.Equal(t, forCarol[annotationKey], p.Annotations[annotationKey])
		app = waitScheduled(t, after, "livy-for-carol", appCarol)
		assert.Equal(t, "carol", app.User)
		assert.Equal(t, "root.analytics", app.QueueName)
	})

	t.Run("bypassAuth false, this webhook first", func(t *testing.T) {
		_, err := alicePod(before, "alice-refused", "", nil)
		requireRefusedByYuniKorn(t, err, aliceID.notAllowed())
		assert.Contains(t, mutateDecisions(t, e2e.webhook, before, "alice-refused"), "mutated",
			"this policy recorded alice first; YuniKorn then saw a user.info that alice may not supply")
	})

	// Hand user.info over: YuniKorn's controller reloads its configuration
	// (service.enableConfigHotRefresh is true by default).
	require.NoError(t, yk.setConfig(ctx, map[string]string{"admissionController.accessControl.bypassAuth": "true"}),
		"patch yunikorn-configs (YuniKorn's validating webhook checks it with the scheduler)")
	var last error
	err = cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		_, last = client(alice).CoreV1().Pods(before).Create(ctx, newPod("bypass-in-force", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last == nil, nil
	})
	require.NoError(t, err, "YuniKorn's controller reloads bypassAuth: %v", last)

	t.Run("bypassAuth true, either order", func(t *testing.T) {
		for _, tc := range []struct{ order, ns string }{{"this webhook first", before}, {"this webhook after YuniKorn's", after}} {
			t.Run(tc.order, func(t *testing.T) {
				name := "alice-bypass"
				appID := "app-" + tc.ns + "-bypass"
				p, err := alicePod(tc.ns, name, appID, nil)
				require.NoError(t, err, "alice's Pod is admitted")
				// Exactly what each wrote, and nothing else.
				assert.Equal(t, map[string]string{annotationKey: aliceID.annotation(), allowPreemptionKey: "true"}, p.Annotations)
				assert.Equal(t, map[string]string{appIDLabel: appID}, p.Labels, "an application ID of its own is kept as it is")
				assert.Equal(t, schedulerName, p.Spec.SchedulerName)
				assert.Contains(t, mutateDecisions(t, e2e.webhook, tc.ns, name), "mutated", "this policy wrote user.info")
				app := waitScheduled(t, tc.ns, name, appID)
				assert.Equal(t, aliceID.User, app.User)
				assert.Equal(t, aliceID.Groups, app.Groups)
				assert.Equal(t, "root.alice", app.QueueName)

				_, err = client(bob).CoreV1().Pods(tc.ns).Create(ctx, ykPod("bob-as-carol", "app-"+tc.ns+"-forged", forCarol), metav1.CreateOptions{})
				requireRefused(t, err, workloadsWebhook, e2e.identity[bob].notAllowed())
			})
		}
		// A Pod without an application ID, with this webhook first: the
		// labels are YuniKorn's generated ones.
		p, err := alicePod(before, "alice-autogen", "", nil)
		require.NoError(t, err)
		appID := ykAutogenAppID(before)
		assert.Equal(t, map[string]string{canonicalAppIDKey: appID, appIDLabel: appID}, p.Labels)
		app := waitScheduled(t, before, "alice-autogen", appID)
		assert.Equal(t, aliceID.User, app.User)
	})

	t.Run("YuniKorn still validates yunikorn-configs", func(t *testing.T) {
		bad := "partitions:\n  - name: default\n    queues:\n      - name: root\n        resources:\n          max: {memory: 1000}\n"
		err := yk.setConfig(ctx, map[string]string{"queues.yaml": bad})
		require.Error(t, err, "the scheduler refuses limits on the root queue")
		var status apierrors.APIStatus
		require.True(t, errors.As(err, &status), "%T: %v", err, err)
		assert.Contains(t, status.Status().Message, `admission webhook "`+cluster.YKValidateConfWebhook+`" denied the request`)
		assert.Contains(t, status.Status().Message, "root queue must not have resource limits set", "the scheduler's reason")
		t.Logf("YuniKorn's validating webhook: %s", status.Status().Message)
	})

	t.Logf("the API server called YuniKorn's controller over %d connections through its Service", yk.ac.Service.Accepted.Load())
	assert.Positive(t, yk.ac.Service.Accepted.Load())
	assert.Zero(t, yk.ac.Service.Failed.Load(), "every connection reached the controller")
}

// requireRefusedByYuniKorn checks that err is the API server's refusal by
// YuniKorn's Pod webhook with the given message. Its answer carries a
// message and no code (k8shim pkg/admission admissionResponseBuilder), which
// the API server turns into 400 (k8s.io/apiserver
// pkg/admission/plugin/webhook/errors ToStatusErr); this policy's refusals
// are 403.
func requireRefusedByYuniKorn(t *testing.T, err error, message string) {
	t.Helper()
	require.Error(t, err, "the API server accepted a request YuniKorn's controller must refuse")
	var status apierrors.APIStatus
	require.Truef(t, errors.As(err, &status), "want an API status error, got %T: %v", err, err)
	assert.Equal(t, `admission webhook "`+cluster.YKMutatePodsWebhook+`" denied the request: `+message, status.Status().Message)
	assert.EqualValues(t, 400, status.Status().Code)
}
