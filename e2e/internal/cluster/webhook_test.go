package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The shipped manifests, which the harness adapts.
var deployDir = filepath.Join("..", "..", "..", "deploy", "webhook")

func TestAdaptSettings(t *testing.T) {
	t.Parallel()
	cm, err := os.ReadFile(filepath.Join(deployDir, "configmap.yaml"))
	require.NoError(t, err)
	out, err := AdaptSettings(cm, []string{"^livy$"})
	require.NoError(t, err)

	var got map[string]any
	require.NoError(t, yaml.Unmarshal(out, &got))
	assert.Equal(t, []any{"^livy$"}, got["externalUsers"], "replaced")
	assert.Equal(t, false, got["bypassAuth"], "kept as shipped")
	assert.Equal(t, []any{"^system:serviceaccount:kube-system:[^:]+$", "^system:kube-controller-manager$"}, got["systemUsers"], "kept as shipped")
}

func TestAdaptSettings_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		manifest string
		want     string
	}{
		{name: "no settings key", manifest: "apiVersion: v1\nkind: ConfigMap\ndata: {other: x}\n", want: "no data key settings.yaml"},
		{name: "no externalUsers", manifest: "apiVersion: v1\nkind: ConfigMap\ndata: {settings.yaml: 'bypassAuth: false'}\n", want: "no externalUsers key"},
		{name: "unknown field", manifest: "apiVersion: v1\nkind: ConfigMap\ndatum: {}\n", want: "decode the settings configmap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := AdaptSettings([]byte(tc.manifest), nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Only the client configuration and the namespace selector change; the
// rules, match conditions and policies are what the shipped file says.
func TestAdaptWebhookConfiguration(t *testing.T) {
	t.Parallel()
	manifest, err := os.ReadFile(filepath.Join(deployDir, "registration", "mutatingwebhookconfiguration.yaml"))
	require.NoError(t, err)
	var shipped admissionregistrationv1.MutatingWebhookConfiguration
	require.NoError(t, yaml.Unmarshal(manifest, &shipped))

	ca := []byte("-----BEGIN CERTIFICATE-----\n...\n")
	got, err := AdaptWebhookConfiguration(manifest, "e2e", "https://127.0.0.1:1234", ca, map[string]string{"e2e/webhook": "main"})
	require.NoError(t, err)
	assert.Equal(t, "e2e", got.Name)
	require.Len(t, got.Webhooks, len(shipped.Webhooks))
	for i, wh := range got.Webhooks {
		orig := shipped.Webhooks[i]
		require.NotNil(t, wh.ClientConfig.URL, wh.Name)
		assert.Equal(t, "https://127.0.0.1:1234"+*orig.ClientConfig.Service.Path, *wh.ClientConfig.URL, wh.Name)
		assert.Equal(t, ca, wh.ClientConfig.CABundle, wh.Name)
		assert.Nil(t, wh.ClientConfig.Service, wh.Name)
		assert.Equal(t, map[string]string{"e2e/webhook": "main"}, wh.NamespaceSelector.MatchLabels, wh.Name)
		assert.Equal(t, orig.NamespaceSelector.MatchExpressions, wh.NamespaceSelector.MatchExpressions, "%s: shipped exclusions kept", wh.Name)

		wh.ClientConfig, orig.ClientConfig = admissionregistrationv1.WebhookClientConfig{}, admissionregistrationv1.WebhookClientConfig{}
		wh.NamespaceSelector, orig.NamespaceSelector = &metav1.LabelSelector{}, &metav1.LabelSelector{}
		assert.Equal(t, orig, wh, "%s: everything else as shipped", wh.Name)
	}
}
