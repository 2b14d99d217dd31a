package manifests

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// servingCAPlaceholder is what deploy/webhook/registration's patches write
// into every caBundle, and what the install command replaces with the CA of
// the serving Secret. It is not base64, so the API server refuses a
// configuration that still holds it.
const servingCAPlaceholder = "SERVING-CA"

// kustomizeBuild builds a kustomization of the repository as `kubectl
// kustomize` does (kubectl embeds the same library).
func kustomizeBuild(t *testing.T, dir string) string {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, dir))
	require.NoError(t, err, "kustomize build %s", dir)
	out, err := res.AsYaml()
	require.NoError(t, err)
	return string(out)
}

// TestRegistration_lastStep: the plain manifests' install never registers a
// fail-closed configuration before its server and CA bundle exist.
// deploy/webhook (the server) holds no webhook configuration; the
// registration step's build is the committed configurations with the
// placeholder in every webhook's caBundle and nothing else changed, and
// the placeholder cannot be decoded, so an apply that skipped the
// replacement registers nothing.
func TestRegistration_lastStep(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"deploy/webhook", "deploy/webhook/cert-manager"} {
		out := kustomizeBuild(t, dir)
		assert.NotContains(t, out, "kind: MutatingWebhookConfiguration", "%s: the configurations are registered last, on their own", dir)
		assert.NotContains(t, out, "kind: ValidatingWebhookConfiguration", "%s: the configurations are registered last, on their own", dir)
	}

	_, err := base64.StdEncoding.DecodeString(servingCAPlaceholder)
	require.Error(t, err, "the placeholder must not decode, or the API server would accept it")

	out := kustomizeBuild(t, "deploy/webhook/registration")
	assert.Equal(t, 7, strings.Count(out, "caBundle: "+servingCAPlaceholder), "one placeholder per webhook")
	// What the install command's sed makes of it.
	ca := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\n"))
	ms, err := decodeManifests("registration build", []byte(strings.ReplaceAll(out, servingCAPlaceholder, ca)))
	require.NoError(t, err)
	require.Len(t, ms, 3)
	committedM := object[*admissionregistrationv1.MutatingWebhookConfiguration](t, webhookFile)
	committedV := object[*admissionregistrationv1.ValidatingWebhookConfiguration](t, validatingFile)
	committedS := object[*admissionregistrationv1.ValidatingWebhookConfiguration](t, settingsWebhookFile)
	for _, m := range ms {
		switch o := m.obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			want := committedM.DeepCopy()
			for i := range want.Webhooks {
				want.Webhooks[i].ClientConfig.CABundle = []byte("-----BEGIN CERTIFICATE-----\n")
			}
			assert.Equal(t, want, o, "the mutating configuration, with its CA bundle")
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			want := committedV.DeepCopy()
			if o.Name == committedS.Name {
				want = committedS.DeepCopy()
			}
			for i := range want.Webhooks {
				want.Webhooks[i].ClientConfig.CABundle = []byte("-----BEGIN CERTIFICATE-----\n")
			}
			assert.Equal(t, want, o, "the validating configuration %s, with its CA bundle", o.Name)
		default:
			t.Errorf("registration builds an unexpected %s", m.gvk)
		}
	}
}
