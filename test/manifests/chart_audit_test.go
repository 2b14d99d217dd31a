package manifests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestChart_audit: the scheduled audit is off by default; on, a CronJob
// runs `audit --apply` in the chosen report API with the release's
// settings, as an account that may list what the audit reads, get the
// controllers it compares with, and write its own reports: the custom
// kinds of the settings and the queue check's reads only when asked for.
func TestChart_audit(t *testing.T) {
	t.Parallel()
	cronJobs := func(values string) []*batchv1.CronJob {
		var v map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(values), &v))
		var out []*batchv1.CronJob
		for _, m := range mustRender(t, v, "yunikorn-userinfo", webhookNamespace) {
			if c, ok := m.obj.(*batchv1.CronJob); ok {
				out = append(out, c)
			}
		}
		return out
	}
	assert.Empty(t, cronJobs(""), "off by default")

	on := renderRBAC(t, "audit: {enabled: true}", webhookNamespace)
	jobs := cronJobs("audit: {enabled: true}")
	require.Len(t, jobs, 1)
	job := jobs[0]
	assert.Equal(t, batchv1.ForbidConcurrent, job.Spec.ConcurrencyPolicy)
	pod := job.Spec.JobTemplate.Spec.Template.Spec
	assert.Equal(t, "yunikorn-userinfo-audit", pod.ServiceAccountName)
	require.Len(t, pod.Containers, 1)
	args := pod.Containers[0].Args
	assert.Equal(t, []string{"audit", "--kubeconfig=in-cluster", "--output=openreports", "--apply", "--quiet",
		"--queue-check=false", "--yunikorn-namespace=yunikorn"}, args[:7])
	require.True(t, strings.HasPrefix(args[7], "--settings-json="), args[7])
	var settings map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(args[7], "--settings-json=")), &settings), "the release's settings as JSON")
	assert.Contains(t, on.settings, "bypassAuth", "the same settings as the webhook's")

	role := on.roles["yunikorn-userinfo-audit"]
	require.NotNil(t, role)
	writes := func(group, ns, cluster string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{
			{APIGroups: []string{group}, Resources: []string{ns}, Verbs: []string{"create", "get", "update", "list", "delete"}},
			{APIGroups: []string{group}, Resources: []string{cluster}, Verbs: []string{"create", "get", "update", "delete"}},
		}
	}
	base := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "replicationcontrollers"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"replicationcontrollers"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: []string{"list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "statefulsets", "daemonsets"}, Verbs: []string{"get"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"list"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}},
	}
	assert.Equal(t, append(append([]rbacv1.PolicyRule{}, base...), writes("openreports.io", "reports", "clusterreports")...), role.Rules)
	assert.Empty(t, on.nsRoles, "no ConfigMap reads without the queue check")

	// The older report API, the queue check and a preset's custom kinds.
	full := renderRBAC(t, "audit: {enabled: true, output: policyreport, queueCheck: true, yunikornNamespace: yk}\nsettings: {workloads: [spark]}", webhookNamespace)
	rules := full.roles["yunikorn-userinfo-audit"].Rules
	assert.Contains(t, rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}})
	assert.Contains(t, rules, rbacv1.PolicyRule{APIGroups: []string{"sparkoperator.k8s.io"}, Resources: []string{"sparkapplications"}, Verbs: []string{"list", "get"}})
	assert.Equal(t, writes("wgpolicyk8s.io", "policyreports", "clusterpolicyreports"), rules[len(rules)-2:])
	var ykRole *rbacv1.Role
	for _, r := range full.nsRoles {
		if r.Name == "yunikorn-userinfo-audit" {
			ykRole = r
		}
	}
	require.NotNil(t, ykRole)
	assert.Equal(t, "yk", ykRole.Namespace)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
		ResourceNames: []string{"yunikorn-configs", "yunikorn-defaults"}, Verbs: []string{"get"}}}, ykRole.Rules)

	_, err := render(t, map[string]any{"audit": map[string]any{"enabled": true, "output": "json"}}, "yunikorn-userinfo", webhookNamespace)
	require.Error(t, err, "an output that writes no report")
}
