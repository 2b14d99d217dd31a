package manifests

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestChart_monitor: the value monitor passes --monitor to serve in
// standalone mode, once, and only when set; in Kubewarden mode it sets
// the validating twin's mode to monitor while the mutating policy keeps
// kubewarden.policyMode, and refuses to render without the twin.
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
	// The mutating policy keeps protecting (a policy in monitor mode has
	// its patches dropped), the validating twin watches.
	assert.Equal(t, []string{"protect", "monitor"}, modes("mode: kubewarden\nmonitor: true"))
	assert.Equal(t, []string{"protect", "monitor"}, modes("mode: kubewarden\nmonitor: true\nkubewarden: {policyMode: protect}"))
	assert.Equal(t, []string{"monitor", "monitor"}, modes("mode: kubewarden\nkubewarden: {policyMode: monitor}"))
	var v map[string]any
	require.NoError(t, yaml.Unmarshal([]byte("mode: kubewarden\nmonitor: true\nvalidatingTwin: false"), &v))
	_, err := render(t, v, "yunikorn-userinfo", kubewardenNS)
	require.Error(t, err, "monitor without the twin would watch nothing")
	assert.Contains(t, err.Error(), "monitor: true in kubewarden mode watches through the validating twin")
}
