package manifests

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/test/manifests/internal/chartrender"
)

// prometheusRule is the part of the Prometheus Operator's PrometheusRule
// (monitoring.coreos.com/v1) the chart writes; decoded strictly, an
// unknown field fails. test/monitoring checks the rules themselves with
// Prometheus's parsers.
type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func monitoringValues(t *testing.T, values string) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(values), &v))
	return v
}

func alerts(ms []manifest) []string {
	var out []string
	for _, m := range ms {
		if r, ok := m.obj.(*prometheusRule); ok {
			for _, g := range r.Spec.Groups {
				for _, rule := range g.Rules {
					out = append(out, rule.Alert)
				}
			}
		}
	}
	return out
}

func serveArgs(t *testing.T, ms []manifest) []string {
	t.Helper()
	dep := only[*appsv1.Deployment](t, ms)
	return dep.Spec.Template.Spec.Containers[0].Args
}

// TestChart_monitoring: off by default (nothing rendered, serve unchanged);
// on, the PrometheusRule, the dashboard for Grafana's sidecar, and serve
// reading its own two webhook configurations with a ClusterRole limited to
// them.
func TestChart_monitoring(t *testing.T) {
	t.Parallel()
	off := mustRender(t, nil, "yunikorn-userinfo", "yunikorn-userinfo")
	assert.Empty(t, alerts(off))
	for _, m := range off {
		if cm, ok := m.obj.(*corev1.ConfigMap); ok {
			assert.NotContains(t, cm.Name, "dashboard")
		}
		if cr, ok := m.obj.(*rbacv1.ClusterRole); ok {
			assert.NotContains(t, cr.Name, "registration-reader")
		}
	}
	assert.False(t, slices.ContainsFunc(serveArgs(t, off), func(a string) bool { return strings.HasPrefix(a, "--watch-registration") }))

	on := mustRender(t, monitoringValues(t, `monitoring: {rules: {enabled: true, labels: {release: kps}}, dashboard: {enabled: true, namespace: grafana}}`),
		"ui", "yunikorn-userinfo")
	assert.ElementsMatch(t, []string{"YunikornUserinfoDown", "YunikornUserinfoNotReady", "YunikornUserinfoSettingsRefused",
		"YunikornUserinfoSettingsDiffer", "YunikornUserinfoRefusalRate",
		"YunikornUserinfoWouldRefuse", "YunikornUserinfoCertificateExpiry", "YunikornUserinfoCacheNotSynced",
		"YunikornUserinfoGuestTraps", "YunikornUserinfoRegisteredFailOpen", "YunikornUserinfoRegistrationUnknown"}, alerts(on))
	rule := only[*prometheusRule](t, on)
	assert.Equal(t, "kps", rule.Labels["release"])
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			assert.Contains(t, r.Expr, `namespace="yunikorn-userinfo",job="ui"`, r.Alert)
			assert.NotEmpty(t, r.Labels["severity"], r.Alert)
			assert.Contains(t, r.Annotations["description"], "docs/OPERATIONS.md", r.Alert)
		}
	}
	assert.Contains(t, serveArgs(t, on), "--watch-registration=mutating/ui,validating/ui-validate")
	dep := only[*appsv1.Deployment](t, on)
	require.NotNil(t, dep.Spec.Template.Spec.AutomountServiceAccountToken)
	assert.True(t, *dep.Spec.Template.Spec.AutomountServiceAccountToken, "serve needs its token to read the configurations")

	var reader *rbacv1.ClusterRole
	var dashboard *corev1.ConfigMap
	for _, m := range on {
		if cr, ok := m.obj.(*rbacv1.ClusterRole); ok && strings.HasSuffix(cr.Name, "-registration-reader") {
			reader = cr
		}
		if cm, ok := m.obj.(*corev1.ConfigMap); ok && strings.HasSuffix(cm.Name, "-dashboard") {
			dashboard = cm
		}
	}
	require.NotNil(t, reader)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, ResourceNames: []string{"ui"}, Verbs: []string{"get"}},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, ResourceNames: []string{"ui-validate"}, Verbs: []string{"get"}},
	}, reader.Rules, "get, by name, the release's two configurations only")
	require.NotNil(t, dashboard)
	assert.Equal(t, "grafana", dashboard.Namespace)
	assert.Equal(t, "1", dashboard.Labels["grafana_dashboard"])
	var dash map[string]any
	require.NoError(t, json.Unmarshal([]byte(dashboard.Data["yunikorn-userinfo.json"]), &dash))
	assert.Equal(t, "yunikorn-userinfo", dash["uid"])

	// failurePolicy Ignore by choice: no alert on it; no twin: one configuration.
	ignore := mustRender(t, monitoringValues(t, `{failurePolicy: Ignore, validatingTwin: false, monitoring: {rules: {enabled: true}}}`), "yunikorn-userinfo", "yunikorn-userinfo")
	assert.NotContains(t, alerts(ignore), "YunikornUserinfoRegisteredFailOpen")
	assert.Contains(t, serveArgs(t, ignore), "--watch-registration=mutating/yunikorn-userinfo")

	// Kubewarden mode has no serve: nothing of this.
	kw := mustRender(t, monitoringValues(t, `{mode: kubewarden, monitoring: {rules: {enabled: true}, dashboard: {enabled: true}}}`), "yunikorn-userinfo", "yunikorn-userinfo")
	assert.Empty(t, alerts(kw))
}

// TestChart_registrationGateFailsVisibly: the gate is a post-install hook
// Job, and Helm fails the release when a post-install hook fails; the Job
// ends (a bounded number of retries within a deadline) rather than
// retrying for ever, and a failed Job is kept for its logs. A release
// whose gate failed stays registered with Ignore, which
// YunikornUserinfoRegisteredFailOpen reports.
func TestChart_registrationGateFailsVisibly(t *testing.T) {
	t.Parallel()
	hooks, _ := hooksAndManifests(t, monitoringValues(t, `registrationGate: {timeoutSeconds: 100}`), chartrender.Options{})
	var job *batchv1.Job
	for _, h := range hooks {
		if h.Kind != "Job" {
			continue
		}
		assert.Contains(t, h.Events, releasev1.HookPostInstall, "a failed post-install hook fails helm install")
		assert.NotContains(t, h.DeletePolicies, releasev1.HookFailed, "a failed Job is kept for its logs")
		ms, err := decodeManifests("gate", []byte(h.Manifest))
		require.NoError(t, err)
		job = ms[0].obj.(*batchv1.Job)
	}
	require.NotNil(t, job)
	require.NotNil(t, job.Spec.BackoffLimit)
	assert.LessOrEqual(t, *job.Spec.BackoffLimit, int32(3), "a few retries, then failed")
	require.NotNil(t, job.Spec.ActiveDeadlineSeconds, "the Job ends failed, not pending for ever")
	assert.Equal(t, int64(100+120), *job.Spec.ActiveDeadlineSeconds, "timeoutSeconds for the waits, plus room for the patches")
	assert.Equal(t, corev1.RestartPolicyNever, job.Spec.Template.Spec.RestartPolicy)
}
