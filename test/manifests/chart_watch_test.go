package manifests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"
)

// TestChart_watchOnly: the switch's watch step registers the validating
// twin alone, with serve in monitor mode, on install (whose registration
// gate then patches only the twin) and on upgrade; serve watches only that
// registration; watchOnly=false registers the mutating webhook again and
// enforces. Under Kubewarden, or without the twin, it is refused with a
// message saying what to do.
func TestChart_watchOnly(t *testing.T) {
	t.Parallel()
	values := func(s string) map[string]any {
		var v map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(s), &v))
		return v
	}
	type seen struct {
		mutating, validating []string
		args                 []string
		gate                 []string // the registration gate's containers
	}
	look := func(ms []manifest) seen {
		var s seen
		for _, m := range ms {
			switch o := m.obj.(type) {
			case *admissionregistrationv1.MutatingWebhookConfiguration:
				s.mutating = append(s.mutating, o.Name)
			case *admissionregistrationv1.ValidatingWebhookConfiguration:
				if !settingsWebhook(o) { // the settings ConfigMap's, in every mode with serve
					s.validating = append(s.validating, o.Name)
				}
			case *appsv1.Deployment:
				s.args = o.Spec.Template.Spec.Containers[0].Args
			case *batchv1.Job:
				for _, c := range o.Spec.Template.Spec.Containers {
					s.gate = append(s.gate, c.Name+" "+strings.Join(c.Args, " "))
				}
			}
		}
		return s
	}
	for _, install := range []bool{false, true} {
		render := mustRender
		if install {
			render = mustRenderInstall
		}
		watch := look(render(t, values("watchOnly: true\nmonitoring: {rules: {enabled: true}}"), "yunikorn-userinfo", webhookNamespace))
		assert.Empty(t, watch.mutating, "install %t", install)
		assert.Equal(t, []string{"yunikorn-userinfo-validate"}, watch.validating)
		assert.Contains(t, watch.args, "--monitor")
		assert.Contains(t, watch.args, "--watch-registration=validating/yunikorn-userinfo-validate")
		if install {
			require.Len(t, watch.gate, 1)
			assert.True(t, strings.HasPrefix(watch.gate[0], "enforce-validating patch validatingwebhookconfiguration yunikorn-userinfo-validate "), watch.gate[0])
		}

		enforce := look(render(t, values("watchOnly: false\nmonitoring: {rules: {enabled: true}}"), "yunikorn-userinfo", webhookNamespace))
		assert.Equal(t, []string{"yunikorn-userinfo"}, enforce.mutating)
		assert.Equal(t, []string{"yunikorn-userinfo-validate"}, enforce.validating)
		assert.NotContains(t, enforce.args, "--monitor")
		assert.Contains(t, enforce.args, "--watch-registration=mutating/yunikorn-userinfo,validating/yunikorn-userinfo-validate")
		if install {
			assert.Len(t, enforce.gate, 2)
		}
	}
	_, err := render(t, values("watchOnly: true\nmode: kubewarden"), "yunikorn-userinfo", kubewardenNS)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "watchOnly registers only the validating twin of the standalone webhook")
	_, err = render(t, values("watchOnly: true\nvalidatingTwin: false"), "yunikorn-userinfo", webhookNamespace)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "watchOnly watches through the validating twin: set validatingTwin: true")
}
