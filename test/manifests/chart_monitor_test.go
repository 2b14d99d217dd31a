package manifests

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChart_monitor: the value monitor passes --monitor to serve in
// standalone mode, once, and only when set; in Kubewarden mode it sets
// both ClusterAdmissionPolicies' mode to monitor, over
// kubewarden.policyMode, which still applies when it is off.
func TestChart_monitor(t *testing.T) {
	t.Parallel()
	args := func(values string) []string {
		r := renderRBAC(t, values, webhookNamespace)
		require.NotNil(t, r.deploy)
		require.Len(t, r.deploy.Spec.Template.Spec.Containers, 1)
		return r.deploy.Spec.Template.Spec.Containers[0].Args
	}
	assert.NotContains(t, args(""), "--monitor", "enforcing by default")
	assert.NotContains(t, args("monitor: false"), "--monitor")
	on := args("monitor: true")
	assert.Equal(t, 1, len(slices.DeleteFunc(slices.Clone(on), func(a string) bool { return a != "--monitor" })))
	assert.Equal(t, "serve", on[0])

	modes := func(values string) []string {
		r := renderRBAC(t, values, kubewardenNS)
		require.NotEmpty(t, r.policies)
		var out []string
		for _, p := range r.policies {
			out = append(out, string(p.Spec.Mode))
		}
		return out
	}
	assert.Equal(t, []string{"protect", "protect"}, modes("mode: kubewarden"))
	assert.Equal(t, []string{"monitor", "monitor"}, modes("mode: kubewarden\nmonitor: true"))
	assert.Equal(t, []string{"monitor", "monitor"}, modes("mode: kubewarden\nmonitor: true\nkubewarden: {policyMode: protect}"))
	assert.Equal(t, []string{"monitor", "monitor"}, modes("mode: kubewarden\nkubewarden: {policyMode: monitor}"))
	assert.Equal(t, []string{"monitor"}, modes("mode: kubewarden\nmonitor: true\nvalidatingTwin: false"))
}
