package scenarios

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// webhookGate labels the namespace of TestChartRegistrationGate.
const webhookGate = "gate"

// TestChartRegistrationGate: the chart's first-install rendering (make
// chart-render's install.yaml) against the real API server. Its webhook
// configurations, registered with failurePolicy Ignore, refuse nothing
// while the webhook cannot answer; the registration gate's RBAC, as
// rendered, lets its ServiceAccount apply the gate Job's own patches and
// nothing else; after them the configurations fail closed. What the Job
// waits for (the Certificate, the Deployment's rollout) needs cert-manager
// and a kubelet, which this cluster has not: the webhook is started and
// stopped here instead.
func TestChartRegistrationGate(t *testing.T) {
	start(t)
	ctx := t.Context()
	rendering, err := cluster.ReadRendering(chartRendering(e2e.repo, "E2E_CHART_INSTALL", "install.yaml"))
	require.NoError(t, err)
	mwcDoc, err := rendering.One("MutatingWebhookConfiguration")
	require.NoError(t, err)
	vwcDoc, err := rendering.OneValidating()
	require.NoError(t, err)
	jobDoc, err := rendering.One("Job")
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict(jobDoc, &job))

	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-gate", Binary: e2e.serveBinary, SettingsFile: e2e.settingsFile,
	})
	require.NoError(t, err, "start the gate's webhook")
	t.Cleanup(func() { assert.NoError(t, wh.Stop(), "stop the gate's webhook") })

	// The configurations under their rendered names (the gate's RBAC and
	// patches name them), pointed at this webhook, for this test's
	// namespace only.
	labels := map[string]string{webhookLabel: webhookGate}
	mwc, err := cluster.AdaptWebhookConfiguration(mwcDoc, "", wh.BaseURL, e2e.cluster.PKI.CAPEM, labels)
	require.NoError(t, err)
	vwc, err := cluster.AdaptValidatingWebhookConfiguration(vwcDoc, "", wh.BaseURL, e2e.cluster.PKI.CAPEM, labels)
	require.NoError(t, err)
	var rendered struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	require.NoError(t, yaml.Unmarshal(mwcDoc, &rendered))
	mwc.Name = rendered.Metadata.Name
	require.NoError(t, yaml.Unmarshal(vwcDoc, &rendered))
	vwc.Name = rendered.Metadata.Name
	for _, w := range mwc.Webhooks {
		require.Equal(t, admissionregistrationv1.Ignore, *w.FailurePolicy, "%s: a first install registers Ignore", w.Name)
	}
	admission := client(admin).AdmissionregistrationV1()
	_, err = admission.MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, admission.MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), mwc.Name, metav1.DeleteOptions{}))
	})
	_, err = admission.ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, admission.ValidatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), vwc.Name, metav1.DeleteOptions{}))
	})
	ns := newNamespace(t, webhookGate) // waits until the webhook annotates there

	// Before the webhook serves (here: while it is down), nothing is
	// refused: the install window of a fail-closed webhook.
	require.NoError(t, wh.Stop(), "stop the gate's webhook")
	var last error
	err = cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		_, last = client(alice).CoreV1().Pods(ns).Create(ctx, newPod("dry-run", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last == nil, nil
	})
	require.NoError(t, err, "with Ignore, a Pod is admitted while the webhook is down: %v", last)
	p, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod("in-window", nil), metav1.CreateOptions{})
	require.NoError(t, err, "with Ignore, a Pod is admitted while the webhook is down")
	assert.Empty(t, p.Annotations[annotationKey], "unannotated: what audit reports")

	// The gate's RBAC, as rendered, in the release's namespace.
	release := job.Namespace
	_, err = client(admin).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: release}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	createGateRBAC(t, rendering, release)

	// The webhook serves (the Job's wait); the Job's containers' patches,
	// as its ServiceAccount.
	require.NoError(t, wh.Start(ctx), "restart the gate's webhook")
	sa := impersonatingClient(t, fmt.Sprintf("system:serviceaccount:%s:%s", release, job.Spec.Template.Spec.ServiceAccountName),
		"system:serviceaccounts", "system:serviceaccounts:"+release, "system:authenticated")
	require.Len(t, job.Spec.Template.Spec.Containers, 2)
	for _, c := range job.Spec.Template.Spec.Containers {
		require.Len(t, c.Args, 6, c.Name)
		kind, name := c.Args[1], c.Args[2]
		patch := []byte(strings.TrimPrefix(c.Args[5], "--patch="))
		err = cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
			// RBAC reaches the authorizer through informers: retry a
			// refusal for a moment.
			switch kind {
			case "mutatingwebhookconfiguration":
				_, last = sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
			case "validatingwebhookconfiguration":
				_, last = sa.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
			default:
				return false, fmt.Errorf("the Job patches an unexpected kind %s", kind)
			}
			return last == nil || !apierrors.IsForbidden(last), nil
		})
		require.NoError(t, err, "%s: %v", c.Name, last)
		require.NoError(t, last, "%s: the gate's patch as its ServiceAccount", c.Name)
	}
	gotM, err := admission.MutatingWebhookConfigurations().Get(ctx, mwc.Name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, w := range gotM.Webhooks {
		assert.Equal(t, admissionregistrationv1.Fail, *w.FailurePolicy, w.Name)
	}
	gotV, err := admission.ValidatingWebhookConfigurations().Get(ctx, vwc.Name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, w := range gotV.Webhooks {
		assert.Equal(t, admissionregistrationv1.Fail, *w.FailurePolicy, w.Name)
	}
	// Nothing else: the account may not touch another configuration.
	_, err = sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "yunikorn-userinfo-e2e", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the gate may read only its own configurations: %v", err)
	_, err = sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, "yunikorn-userinfo-e2e", types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`), metav1.PatchOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the gate may patch only its own configurations: %v", err)

	// Enforced and fail closed from now on.
	require.NoError(t, waitEnforced(ctx, ns))
	require.NoError(t, wh.Stop(), "stop the gate's webhook again")
	err = cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		_, last = client(alice).CoreV1().Pods(ns).Create(ctx, newPod("dry-run", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil, nil
	})
	require.NoError(t, err, "after the gate, a Pod is refused while the webhook is down")
	requireCallFailed(t, last)
}

// createGateRBAC creates the registration gate's ServiceAccount and RBAC
// from the rendering, strictly validated by the API server, and deletes
// them at the end.
func createGateRBAC(t *testing.T, rendering *cluster.Rendering, release string) {
	t.Helper()
	ctx := t.Context()
	cs := client(admin)
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	gate := func(doc []byte) bool {
		return strings.Contains(string(doc), "app.kubernetes.io/component: registration-gate")
	}
	for _, doc := range rendering.All("ServiceAccount") {
		if !gate(doc) {
			continue
		}
		var o corev1.ServiceAccount
		require.NoError(t, yaml.UnmarshalStrict(doc, &o))
		_, err := cs.CoreV1().ServiceAccounts(release).Create(ctx, &o, strict)
		require.NoError(t, err)
	}
	for _, doc := range rendering.All("ClusterRole") {
		if !gate(doc) {
			continue
		}
		var o rbacv1.ClusterRole
		require.NoError(t, yaml.UnmarshalStrict(doc, &o))
		_, err := cs.RbacV1().ClusterRoles().Create(ctx, &o, strict)
		require.NoError(t, err)
		t.Cleanup(func() {
			assert.NoError(t, cs.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), o.Name, metav1.DeleteOptions{}))
		})
	}
	for _, doc := range rendering.All("ClusterRoleBinding") {
		if !gate(doc) {
			continue
		}
		var o rbacv1.ClusterRoleBinding
		require.NoError(t, yaml.UnmarshalStrict(doc, &o))
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &o, strict)
		require.NoError(t, err)
		t.Cleanup(func() {
			assert.NoError(t, cs.RbacV1().ClusterRoleBindings().Delete(context.WithoutCancel(ctx), o.Name, metav1.DeleteOptions{}))
		})
	}
	for _, doc := range rendering.All("Role") {
		if !gate(doc) {
			continue
		}
		var o rbacv1.Role
		require.NoError(t, yaml.UnmarshalStrict(doc, &o))
		_, err := cs.RbacV1().Roles(release).Create(ctx, &o, strict)
		require.NoError(t, err)
	}
	for _, doc := range rendering.All("RoleBinding") {
		if !gate(doc) {
			continue
		}
		var o rbacv1.RoleBinding
		require.NoError(t, yaml.UnmarshalStrict(doc, &o))
		_, err := cs.RbacV1().RoleBindings(release).Create(ctx, &o, strict)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		err := cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), release, metav1.DeleteOptions{})
		assert.True(t, err == nil || apierrors.IsNotFound(err), "delete %s: %v", release, err)
	})
}
