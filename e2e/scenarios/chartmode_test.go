package scenarios

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// celModeLabel selects the namespaces the chart's CEL bindings cover in
// these scenarios (the bindings are cluster-wide: narrowed to the test's
// namespace as the webhook configurations are).
const celModeLabel = "e2e.yunikorn.apache.org/cel-mode"

var admissionPolicyKinds = map[string]string{
	"MutatingAdmissionPolicy":          "mutatingadmissionpolicies",
	"MutatingAdmissionPolicyBinding":   "mutatingadmissionpolicybindings",
	"ValidatingAdmissionPolicy":        "validatingadmissionpolicies",
	"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
}

// installCELObjects creates the rendering's CEL objects as rendered, but
// for three changes that keep the scenario to its own namespace ns: names
// get the namespace as a suffix (policies and bindings are cluster-wide),
// each binding also requires celModeLabel=ns of the namespace, and the
// ConfigMap parameter lives in ns, with the suite's externalUsers (as the
// webhook's settings have them). Everything is deleted at the end.
func installCELObjects(t *testing.T, rendering *cluster.Rendering, ns string) {
	t.Helper()
	ctx := t.Context()
	cfg, err := e2e.cluster.Config(admin)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)

	var param corev1.ConfigMap
	paramDoc := ""
	for _, doc := range rendering.All("ConfigMap") {
		if strings.Contains(string(doc), "app.kubernetes.io/component: cel") {
			paramDoc = string(doc)
		}
	}
	require.NotEmpty(t, paramDoc, "the rendering has the CEL policies' ConfigMap parameter")
	require.NoError(t, yaml.UnmarshalStrict([]byte(paramDoc), &param))
	paramName := param.Name
	param.Namespace = ns
	param.Data["externalUsers"] = strings.Join(externalUsers, "\n")
	_, err = client(admin).CoreV1().ConfigMaps(ns).Create(ctx, &param, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(t, err)

	created := 0
	for _, kind := range []string{"MutatingAdmissionPolicy", "ValidatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding"} {
		for _, doc := range rendering.All(kind) {
			var obj unstructured.Unstructured
			require.NoError(t, yaml.Unmarshal(doc, &obj.Object))
			obj.SetName(obj.GetName() + "-" + ns)
			if strings.HasSuffix(kind, "Binding") {
				policy, _, _ := unstructured.NestedString(obj.Object, "spec", "policyName")
				require.NoError(t, unstructured.SetNestedField(obj.Object, policy+"-"+ns, "spec", "policyName"))
				ref, _, _ := unstructured.NestedString(obj.Object, "spec", "paramRef", "name")
				require.Equal(t, paramName, ref, "%s %s reads the chart's ConfigMap", kind, obj.GetName())
				require.NoError(t, unstructured.SetNestedField(obj.Object, ns, "spec", "paramRef", "namespace"))
				require.NoError(t, unstructured.SetNestedStringMap(obj.Object, map[string]string{celModeLabel: ns},
					"spec", "matchResources", "namespaceSelector", "matchLabels"))
			}
			gvk := obj.GroupVersionKind()
			res := dyn.Resource(schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: admissionPolicyKinds[kind]})
			_, err := res.Create(ctx, &obj, metav1.CreateOptions{FieldValidation: "Strict"})
			require.NoErrorf(t, err, "create %s %s as rendered", kind, obj.GetName())
			created++
			name := obj.GetName()
			t.Cleanup(func() {
				assert.NoError(t, res.Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{}), "delete %s %s", kind, name)
			})
		}
	}
	require.Equal(t, 14, created, "three mutating and four validating policies, each with its binding")
}

// celNamespace creates the test's namespace with labels, and waits until
// the CEL policies stamp a dry-run Pod there.
func celNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns, err := createNamespace(t.Context(), client(admin), t.Name(), labels)
	require.NoError(t, err)
	t.Logf("namespace %s", ns)
	return ns
}

// requireCELRefused checks that err is the API server's refusal by one of
// the chart's ValidatingAdmissionPolicies, with the message.
// With the webhook up as well (hybrid), its mutating webhook, which runs
// before the validating policies, refuses first.
func requireCELRefused(t *testing.T, err error, message string, webhookUp bool) {
	t.Helper()
	require.Error(t, err, "the API server accepted a request the CEL policies must refuse")
	var status apierrors.APIStatus
	require.Truef(t, errors.As(err, &status), "want an API status error, got %T: %v", err, err)
	if webhookUp {
		assert.Contains(t, status.Status().Message, `admission webhook "workloads.user-info.yunikorn.apache.org" denied the request`)
	} else {
		assert.Contains(t, status.Status().Message, "ValidatingAdmissionPolicy")
	}
	assert.Contains(t, status.Status().Message, message)
	assert.EqualValues(t, 403, status.Status().Code)
}

// checkCore shows the core rules in ns: alice's Pod and Deployment are
// stamped with her identity as the module writes it, her forgery of bob's
// identity is refused, livy (externalUsers) may supply one, and a
// recorded identity cannot be changed.
func checkCore(t *testing.T, ns, suffix string, webhookUp bool) {
	t.Helper()
	ctx := t.Context()
	want := e2e.identity[alice].annotation()
	p, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod("alice-"+suffix, nil), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a Pod")
	assert.Equal(t, want, p.Annotations[annotationKey], "stamped with alice's identity, byte for byte")

	_, err = client(alice).CoreV1().Pods(ns).Create(ctx, newPod("forged-"+suffix,
		map[string]string{annotationKey: e2e.identity[bob].annotation()}), metav1.CreateOptions{})
	requireCELRefused(t, err, e2e.identity[alice].notAllowed(), webhookUp)

	forged := e2e.identity[bob].annotation()
	p2, err := client(livy).CoreV1().Pods(ns).Create(ctx, newPod("livy-"+suffix, map[string]string{annotationKey: forged}), metav1.CreateOptions{})
	require.NoError(t, err, "livy is an external user")
	assert.Equal(t, forged, p2.Annotations[annotationKey])

	p.Annotations[annotationKey] = forged
	_, err = client(alice).CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
	requireCELRefused(t, err, "user info annotation change is not allowed", webhookUp)

	d, err := client(alice).AppsV1().Deployments(ns).Create(ctx, newDeployment("alice-"+suffix, 0, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, d.Spec.Template.Annotations[annotationKey], "the template is stamped too")
}

// requireMAPServed skips on API servers before 1.36, which do not serve
// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (the chart
// renders it for the suite's newest version, 1.37).
func requireMAPServed(t *testing.T) {
	t.Helper()
	if e2e.kubeMinor < 36 {
		t.Skipf("Kubernetes 1.%d serves no admissionregistration.k8s.io/v1 MutatingAdmissionPolicy", e2e.kubeMinor)
	}
}

// waitCELEnforced polls dry runs as alice until every CEL policy
// checkCore relies on is in force: her Pod is stamped (the Pods' mutating
// policy), her forgery of bob's identity is refused (the Pods' validating
// policy) and her Deployment's template is stamped (the templates'
// mutating policy). Policies, bindings and parameters reach the admission
// chain through informers, each pair on its own: on a loaded machine the
// mutating policy can stamp while its validating twin is not loaded yet.
func waitCELEnforced(t *testing.T, ns string) {
	t.Helper()
	want := e2e.identity[alice].annotation()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	var last string
	err := cluster.Poll(t.Context(), enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		p, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod("enforced", nil), dry)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if p.Annotations[annotationKey] != want {
			last = "no annotation yet"
			return false, nil
		}
		if _, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod("enforced-forged",
			map[string]string{annotationKey: e2e.identity[bob].annotation()}), dry); err == nil {
			last = "a forged Pod is admitted: the validating policy is not in force yet"
			return false, nil
		}
		d, err := client(alice).AppsV1().Deployments(ns).Create(ctx, newDeployment("enforced", 0, nil), dry)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if d.Spec.Template.Annotations[annotationKey] != want {
			last = "the Deployment's template is not stamped yet"
			return false, nil
		}
		return true, nil
	})
	require.NoErrorf(t, err, "wait for the CEL policies in %s (%s)", ns, last)
}

// TestChartModeCEL: the chart's mode cel rendering (make chart-render's
// cel.yaml) on the real API server, with no webhook anywhere: Pods and
// templates are stamped, forgeries and changes refused, by the API server
// alone.
func TestChartModeCEL(t *testing.T) {
	start(t)
	requireMAPServed(t)
	rendering, err := cluster.ReadRendering(chartRendering(e2e.repo, "E2E_CHART_CEL", "cel.yaml"))
	require.NoError(t, err)
	for _, k := range []string{"Deployment", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		assert.Empty(t, rendering.All(k), "mode cel renders no %s", k)
	}
	ns := celNamespace(t, nil)
	_, err = client(admin).CoreV1().Namespaces().Patch(t.Context(), ns, "application/merge-patch+json",
		[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, celModeLabel, ns)), metav1.PatchOptions{})
	require.NoError(t, err)
	installCELObjects(t, rendering, ns)
	waitCELEnforced(t, ns)
	checkCore(t, ns, "cel", false)
}

// hybridConfigNamespace is where the hybrid rendering's configValidation
// looks (make chart-render's hybrid-config.yaml).
const hybridConfigNamespace = "e2e-hybrid-yunikorn"

// TestChartModeHybridWebhookDown: the chart's mode hybrid rendering with a
// context check on (configValidation of YuniKorn's ConfigMaps in
// hybridConfigNamespace: make chart-render's hybrid-config.yaml), its
// webhook configurations pointed at a serve of their own with the
// rendering's settings, beside the standalone rendering's pointed at the
// same serve; then that serve is stopped. Hybrid: the CEL policies still
// stamp Pods and refuse forgeries; the webhook (failurePolicy Ignore,
// hybrid.webhookFailurePolicy) is skipped, so its context check lets a
// broken YuniKorn configuration through while it is down (it refused it
// while up). Standalone: every Pod is refused (fail closed). Mode cel never
// has a webhook to lose (TestChartModeCEL).
func TestChartModeHybridWebhookDown(t *testing.T) {
	start(t)
	requireMAPServed(t)
	ctx := t.Context()
	rendering, err := cluster.ReadRendering(chartRendering(e2e.repo, "E2E_CHART_HYBRID_CONFIG", "hybrid-config.yaml"))
	require.NoError(t, err)
	mwcDoc, err := rendering.One("MutatingWebhookConfiguration")
	require.NoError(t, err)
	cvDoc, err := rendering.OneValidating()
	require.NoError(t, err, "hybrid has no validating twin by default; this is configValidation's webhook")
	require.Contains(t, string(cvDoc), "yunikorn-configmaps.validate")
	var settingsDoc []byte
	for _, doc := range rendering.All("ConfigMap") {
		if !strings.Contains(string(doc), "app.kubernetes.io/component: cel") {
			settingsDoc = doc
		}
	}
	require.NotNil(t, settingsDoc, "the webhook's settings ConfigMap")
	settings, err := cluster.AdaptSettings(settingsDoc, externalUsers)
	require.NoError(t, err)
	settingsFile := filepath.Join(t.TempDir(), "hybrid-settings.yaml")
	require.NoError(t, os.WriteFile(settingsFile, settings, 0o600))

	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-hybrid", Binary: e2e.serveBinary, SettingsFile: settingsFile,
	})
	require.NoError(t, err, "start the hybrid webhook")
	t.Cleanup(func() { assert.NoError(t, wh.Stop(), "stop the hybrid webhook") })

	// The hybrid namespace (the name configValidation was rendered for):
	// the webhooks and the CEL policies.
	hybridNS := hybridConfigNamespace
	label := "hybrid-" + hybridNS
	cs := client(admin)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hybridNS,
		Labels: map[string]string{webhookLabel: label, celModeLabel: hybridNS}}}, metav1.CreateOptions{})
	require.NoError(t, err, "create namespace %s (left over from an interrupted run?)", hybridNS)
	t.Cleanup(func() {
		assert.NoError(t, cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), hybridNS, metav1.DeleteOptions{}))
	})
	_, err = prepareNamespace(ctx, cs, hybridNS)
	require.NoError(t, err)
	admission := cs.AdmissionregistrationV1()
	mwc, err := cluster.AdaptWebhookConfiguration(mwcDoc, "yunikorn-userinfo-e2e-"+hybridNS, wh.BaseURL, e2e.cluster.PKI.CAPEM,
		map[string]string{webhookLabel: label})
	require.NoError(t, err)
	for _, w := range mwc.Webhooks {
		require.Equal(t, "Ignore", string(*w.FailurePolicy), "%s: hybrid's webhook is skipped while down", w.Name)
	}
	_, err = admission.MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, admission.MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), mwc.Name, metav1.DeleteOptions{}))
	})
	cv, err := cluster.AdaptValidatingWebhookConfiguration(cvDoc, "yunikorn-userinfo-e2e-config-"+hybridNS, wh.BaseURL, e2e.cluster.PKI.CAPEM,
		map[string]string{webhookLabel: label})
	require.NoError(t, err)
	_, err = admission.ValidatingWebhookConfigurations().Create(ctx, cv, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, admission.ValidatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), cv.Name, metav1.DeleteOptions{}))
	})
	installCELObjects(t, rendering, hybridNS)

	// The standalone namespace: the shipped standalone pair, same serve.
	standaloneLabel := "standalone-" + hybridNS
	smwc, err := e2e.registerWebhook(ctx, "yunikorn-userinfo-e2e-"+standaloneLabel, wh, standaloneLabel)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, admission.MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), smwc.Name, metav1.DeleteOptions{}))
	})
	standaloneNS, err := createNamespace(ctx, cs, t.Name(), map[string]string{webhookLabel: standaloneLabel})
	require.NoError(t, err)
	require.NoError(t, waitEnforced(ctx, standaloneNS))
	waitCELEnforced(t, hybridNS)

	// A YuniKorn configuration the scheduler could not load, written with
	// dryRun: configValidation refuses it while the webhook runs.
	broken := func() error {
		_, err := cs.CoreV1().ConfigMaps(hybridNS).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-configs"},
			Data:       map[string]string{"queues.yaml": "partitions: ["},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	var last error
	require.NoError(t, cluster.Poll(ctx, enforceTimeout, pollInterval, func(context.Context) (bool, error) {
		last = broken()
		return last != nil, nil
	}), "configValidation refuses a broken queues.yaml while the webhook runs")
	assert.Contains(t, last.Error(), `admission webhook "yunikorn-configmaps.validate.user-info.yunikorn.apache.org" denied the request`)

	// Up: both the mutating webhook and the CEL policies judge hybrid's Pods.
	checkCore(t, hybridNS, "up", true)
	assert.Positive(t, countAdmissions(admissionsFor(t, wh, hybridNS), "Pod", "CREATE", e2e.identity[alice].User, ""),
		"the hybrid webhook was called while up")

	require.NoError(t, wh.Stop(), "stop the webhook")
	// Down: hybrid still stamps and refuses; its context check is skipped;
	// standalone refuses everything.
	checkCore(t, hybridNS, "down", false)
	assert.NoError(t, broken(), "hybrid with webhookFailurePolicy Ignore: the context check is skipped while the webhook is down")
	_, err = client(alice).CoreV1().Pods(standaloneNS).Create(ctx, newPod("while-down", nil), metav1.CreateOptions{})
	requireCallFailed(t, err)
	t.Logf("webhook down: hybrid stamped and refused forgeries by CEL alone and skipped its context check; standalone refused every Pod")
}
