package scenarios

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// webhookSettingsTypo labels the namespace of TestSettingsTypoDrain.
const webhookSettingsTypo = "settings-typo"

// typoReplicaIPs are the two replicas' addresses (TestReplicas uses
// 127.0.0.2-4).
var typoReplicaIPs = []string{"127.0.0.7", "127.0.0.8"}

// TestSettingsTypoDrain: a settings typo never leaves the cluster without
// a serving replica. Two `serve` replicas behind a balancer that behaves as
// kube-proxy, with the chart's settings ConfigMap webhook (/settings):
// `kubectl edit` of the ConfigMap with a typo is refused with the policy's
// message. A typo that gets stored anyway (written while no replica
// answered, whose failurePolicy is Ignore) is refused by the running
// replicas' reloads, which is the increase YunikornUserinfoSettingsRefused
// fires on; the replica restarted then (a drain) stays up not ready with
// the reason, and Pods are still admitted, stamped, by the other. Fixed,
// the restarted replica turns ready by itself.
func TestSettingsTypoDrain(t *testing.T) {
	start(t)
	ctx := t.Context()
	flags := chartServeFlags(t)
	ns := newNamespace(t, "")

	// The mounted ConfigMap: its key is the file's name.
	settingsFile := filepath.Join(e2e.cluster.Dir, "settings-typo.yaml")
	base, err := os.ReadFile(e2e.settingsFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(settingsFile, base, 0o600))
	const configMap = "yunikorn-userinfo-settings"

	host, err := cluster.LoopbackHostName()
	require.NoError(t, err)
	var replicas []*cluster.Webhook
	var backends []cluster.BalancerBackend
	for i, ip := range typoReplicaIPs {
		args := []string{"--settings-reload-interval", "1s", "--settings-configmap", ns + "/" + configMap}
		for _, name := range []string{"validate-overlay", "instances", "timeout"} {
			args = append(args, "--"+name, flags[name])
		}
		wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
			Name: fmt.Sprintf("serve-typo-%d", i), Binary: e2e.serveBinary, SettingsFile: settingsFile,
			ListenIP: ip, DNSNames: []string{host}, ExtraArgs: args,
		})
		require.NoError(t, err, "start replica %d", i)
		t.Cleanup(func() { assert.NoError(t, wh.Stop(), "stop replica %d", i) })
		replicas = append(replicas, wh)
		backends = append(backends, cluster.BalancerBackend{Addr: wh.Addr, ReadyURL: wh.ReadyzURL})
	}
	probe, err := e2e.cluster.HTTPClient()
	require.NoError(t, err)
	lb, err := cluster.StartBalancer(cluster.BalancerOptions{Backends: backends, Probe: probe, ProbeInterval: 500 * time.Millisecond})
	require.NoError(t, err, "start the balancer")
	t.Cleanup(func() { _ = lb.Close() })
	for i := range replicas {
		require.NoError(t, lb.WaitReady(ctx, i, true, 10*time.Second))
	}
	_, port, err := net.SplitHostPort(lb.Addr)
	require.NoError(t, err)
	service := &cluster.Webhook{BaseURL: "https://" + net.JoinHostPort(host, port)}

	// The Pod webhooks, and the settings ConfigMap's, as the chart
	// registers them (failurePolicy Ignore, that one ConfigMap only).
	mwc, err := e2e.registerWebhook(ctx, "yunikorn-userinfo-e2e-settings-typo", service, webhookSettingsTypo)
	require.NoError(t, err)
	vwc := settingsConfigMapWebhook(service.BaseURL, ns, configMap)
	_, err = client(admin).AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		bg := context.WithoutCancel(ctx)
		adm := client(admin).AdmissionregistrationV1()
		assert.NoError(t, adm.MutatingWebhookConfigurations().Delete(bg, mwc.Name, metav1.DeleteOptions{}))
		assert.NoError(t, adm.ValidatingWebhookConfigurations().Delete(bg, vwc.Name, metav1.DeleteOptions{}))
	})
	_, err = client(admin).CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+webhookLabel+`":"`+webhookSettingsTypo+`"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, waitEnforced(ctx, ns))

	// kubectl edit with a typo: refused with the policy's message. The
	// webhook configuration takes a moment to be in force.
	cms := client(admin).CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configMap},
		Data: map[string]string{filepath.Base(settingsFile): string(base)}}, metav1.CreateOptions{})
	require.NoError(t, err, "the shipped settings are accepted")
	const typo = "bypassAuth: \"true\"\n"
	const reason = `provided settings are not valid: settings.bypassAuth: must be a boolean, got string "true"`
	cm.Data[filepath.Base(settingsFile)] = typo
	var editErr error
	require.NoError(t, cluster.Poll(ctx, 30*time.Second, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, editErr = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return editErr != nil, nil
	}), "the typo is refused")
	assert.ErrorContains(t, editErr, reason)
	stored, err := cms.Get(ctx, configMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(base), stored.Data[filepath.Base(settingsFile)], "the typo was not stored")

	// The typo stored anyway: every running replica refuses the reload
	// and keeps its settings. YunikornUserinfoSettingsRefused is
	// sum by (namespace, pod) (increase(settings_reloads_total{outcome!="applied"}[15m])) > 0:
	// each replica's invalid count goes from 0 to at least 1.
	const invalid = `yunikorn_userinfo_settings_reloads_total{outcome="invalid"}`
	for i, wh := range replicas {
		n, err := metricValue(ctx, wh.MetricsURL, invalid)
		require.NoError(t, err)
		require.Zero(t, n, "replica %d: no refused reload yet", i)
	}
	require.NoError(t, os.WriteFile(settingsFile, []byte(typo), 0o600))
	for i, wh := range replicas {
		require.NoError(t, cluster.Poll(ctx, 15*time.Second, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
			n, err := metricValue(ctx, wh.MetricsURL, invalid)
			return err == nil && n >= 1, nil
		}), "replica %d refuses the reload: the alert's increase", i)
	}

	// A drain: replica 0 is restarted while the typo stands. It stays up,
	// not ready, with the reason; the balancer takes it out.
	drained := replicas[0]
	require.NoError(t, drained.StopWithin(10*time.Second))
	lb.Replaced(0)
	require.NoError(t, drained.StartUnready(ctx), "the restarted replica stays up")
	require.NoError(t, lb.WaitReady(ctx, 0, false, 10*time.Second))
	readyz := func() (int, string) {
		resp, err := probe.Get(drained.ReadyzURL)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// /readyz says just "not ready" while the module compiles, then why.
	var code int
	var body string
	require.NoError(t, cluster.Poll(ctx, 60*time.Second, 200*time.Millisecond, func(context.Context) (bool, error) {
		code, body = readyz()
		return body != "not ready\n", nil
	}), "the reason on /readyz (last: %d %q)", code, body)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "not ready: "+reason+"\n", body)
	n, err := metricValue(ctx, drained.MetricsURL, "yunikorn_userinfo_ready")
	require.NoError(t, err)
	assert.Zero(t, n, "yunikorn_userinfo_ready 0: YunikornUserinfoNotReady's expression")
	time.Sleep(2 * time.Second)
	exited, _ := drained.Process.Exited()
	require.False(t, exited, "the restarted replica did not exit")

	// Pods are still admitted, and stamped, by the other replica.
	want := e2e.identity[alice].annotation()
	for i := range 5 {
		name := fmt.Sprintf("during-typo-%d", i)
		require.NoError(t, createPod(ns, nil)(ctx, client(alice), name), "create %s", name)
		p, err := client(admin).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want, p.Annotations[annotationKey], "%s stamped", name)
	}
	log, err := os.ReadFile(drained.Process.LogFile)
	require.NoError(t, err)
	assert.Contains(t, string(log), "settings refused at start: serving not ready until the settings file holds settings the policy accepts")

	// Fixed: the restarted replica turns ready by itself.
	require.NoError(t, os.WriteFile(settingsFile, base, 0o600))
	require.NoError(t, lb.WaitReady(ctx, 0, true, 20*time.Second), "ready once the settings are fixed")
	code, _ = readyz()
	assert.Equal(t, http.StatusOK, code)
}

// settingsConfigMapWebhook is the chart's settings ConfigMap webhook
// (templates/webhookconfigurations.yaml, RELEASE-settings), calling url.
func settingsConfigMapWebhook(url, ns, name string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	path := url + "/settings"
	timeout := int32(10)
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-userinfo-e2e-settings-typo-settings"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "settings.validate.user-info.yunikorn.apache.org",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &ignore,
			MatchPolicy:             &equivalent,
			TimeoutSeconds:          &timeout,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &path, CABundle: e2e.cluster.PKI.CAPEM},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{ns}}}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "settings-configmap", Expression: "object.metadata.name == '" + name + "'"}},
		}},
	}
}
