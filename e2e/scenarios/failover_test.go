package scenarios

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// With failurePolicy: Fail, a stopped webhook means creates are refused
// (the webhook fails closed); once it is back, creates work again and are
// annotated.
//
// The scenario has a serve process and a webhook configuration of its own,
// which cover only its namespace (labelled webhookFailover, which the main
// configuration does not select), so stopping its webhook affects no other
// scenario.
func TestWebhookDownFailsClosed(t *testing.T) {
	start(t)
	ctx := t.Context()
	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-failover", Binary: e2e.serveBinary, SettingsFile: e2e.settingsFile,
	})
	require.NoError(t, err, "start the failover webhook")
	t.Cleanup(func() { assert.NoError(t, wh.Stop(), "stop the failover webhook") })
	mwc, err := e2e.registerWebhook(ctx, "yunikorn-userinfo-e2e-failover", wh, webhookFailover)
	require.NoError(t, err)
	t.Cleanup(func() {
		err := client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), mwc.Name, metav1.DeleteOptions{})
		assert.NoError(t, err, "delete the failover webhook configuration")
	})
	ns := newNamespace(t, webhookFailover)
	want := e2e.identity[alice].annotation()

	_, err = client(alice).CoreV1().Pods(ns).Create(ctx, newPod("before", nil), metav1.CreateOptions{})
	require.NoError(t, err, "create while the webhook runs")

	require.NoError(t, wh.Stop(), "stop the failover webhook")
	_, err = client(alice).CoreV1().Pods(ns).Create(ctx, newPod("while-down", nil), metav1.CreateOptions{})
	requireCallFailed(t, err)
	_, err = client(alice).AppsV1().Deployments(ns).Create(ctx, newDeployment("while-down", 1, nil), metav1.CreateOptions{})
	requireCallFailed(t, err)
	_, err = client(admin).CoreV1().Pods(ns).Get(ctx, "while-down", metav1.GetOptions{})
	assert.Truef(t, apierrors.IsNotFound(err), "nothing stored while the webhook is down: %v", err)

	require.NoError(t, wh.Start(ctx), "restart the failover webhook")
	// The API server may hold a broken connection for a moment; retry the
	// create until it goes through, then check what was stored.
	var last error
	err = cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		_, last = client(alice).CoreV1().Pods(ns).Create(ctx, newPod("after", nil), metav1.CreateOptions{})
		return last == nil, nil
	})
	require.NoErrorf(t, err, "create after the restart (last error: %v)", last)
	p, err := client(admin).CoreV1().Pods(ns).Get(ctx, "after", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, p.Annotations[annotationKey])
}

// requireCallFailed checks that err is the API server's refusal because the
// webhook could not be called (failurePolicy: Fail).
func requireCallFailed(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err, "the API server accepted a request while the webhook was down")
	var status apierrors.APIStatus
	require.Truef(t, errors.As(err, &status), "want an API status error, got %T: %v", err, err)
	t.Logf("refused while down: %d %s", status.Status().Code, status.Status().Message)
	assert.Contains(t, status.Status().Message, fmt.Sprintf("failed calling webhook %q", workloadsWebhook))
}
