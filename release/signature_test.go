package release

import (
	"bytes"
	"context"
	"crypto"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/content"

	"github.com/yunikorn-userinfo/userinfo/release/internal/sign"
)

// keyPair is a cosign key pair written where the CLI can read it.
type keyPair struct {
	signer  signature.SignerVerifier
	pubFile string
	pubPEM  []byte
}

func newKeyPair(t *testing.T) keyPair {
	t.Helper()
	password := []byte("release test key")
	priv, pub, err := sign.GenerateKeyPair(password)
	require.NoError(t, err)
	sv, err := sign.LoadKey(priv, password)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "cosign.pub")
	require.NoError(t, os.WriteFile(file, pub, 0o600))
	return keyPair{signer: sv, pubFile: file, pubPEM: pub}
}

func digestRef(t *testing.T, immutable string) name.Digest {
	t.Helper()
	d, err := name.NewDigest(strings.TrimPrefix(immutable, "registry://"))
	require.NoError(t, err)
	return d
}

func signRef(t *testing.T, immutable string, k keyPair, annotations map[string]any) {
	t.Helper()
	require.NoError(t, sign.Sign(t.Context(), digestRef(t, immutable), k.signer, annotations, remoteOptions(t)...))
}

// TestSignatures signs pushed policies with cosign's libraries and checks
// that run and serve take only modules signed as their verification
// settings require, and refuse every other with a message that says why.
func TestSignatures(t *testing.T) {
	t.Parallel()
	c := newClient(t, pushUser, pushPassword, trustingSources(t))
	keyA, keyB := newKeyPair(t), newKeyPair(t)
	signed := c.push(t, "-", reg.Host+"/policies/signed:v1")
	signRef(t, signed, keyA, map[string]any{"env": "prod"})
	// A second artifact in the same repository, never signed: the
	// unannotated test guest pushed with --force.
	stdout, stderr, code := c.run(t, nil, "push", "--force", "-o", "json", "../host/webhook/testdata/hostile.wasm", reg.Host+"/policies/signed:unsigned")
	require.Equal(t, 0, code, stderr)
	unsigned := "registry://" + reg.Host + "/policies/signed@" + strings.Split(strings.Split(stdout, "@")[1], `"`)[0]

	request := "../testdata/requests/review-alice-pod.json"
	configFile := func(t *testing.T, body string) string {
		path := filepath.Join(t.TempDir(), "verification.yaml")
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		return path
	}
	keyYAML := func(k keyPair) string {
		return "|\n" + indentLines(string(k.pubPEM), "        ")
	}

	tests := []struct {
		name    string
		args    []string
		message string // empty: accepted
	}{
		{"signed by the key", []string{"-k", keyA.pubFile, "run", signed, "-r", request}, ""},
		{"by tag", []string{"-k", keyA.pubFile, "run", "registry://" + reg.Host + "/policies/signed:v1", "-r", request}, ""},
		{"with the annotation", []string{"-k", keyA.pubFile, "-a", "env=prod", "run", signed, "-r", request}, ""},
		{"another key", []string{"-k", keyB.pubFile, "run", signed, "-r", request},
			"no valid signature (of 1 found) satisfies --verification-key " + keyB.pubFile},
		{"both keys required", []string{"-k", keyA.pubFile, "-k", keyB.pubFile, "run", signed, "-r", request},
			"satisfies --verification-key " + keyB.pubFile},
		{"another annotation", []string{"-k", keyA.pubFile, "-a", "env=dev", "run", signed, "-r", request},
			"no valid signature (of 1 found) satisfies"},
		{"unsigned", []string{"-k", keyA.pubFile, "run", unsigned, "-r", request},
			"the module is not signed (no signature tag sha256-"},
		{"local file", []string{"-k", keyA.pubFile, "run", "../cmd/yunikorn-userinfo/policy.wasm", "-r", request},
			"only registry:// modules carry signatures"},
		{"embedded policy", []string{"-k", keyA.pubFile, "run", "-r", request},
			"signature verification applies to registry:// modules"},
		{"config: allOf", []string{"--verification-config-path", configFile(t, "apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: release team\n    key: "+keyYAML(keyA)), "run", signed, "-r", request}, ""},
		{"config: anyOf one of two", []string{"--verification-config-path", configFile(t, "apiVersion: v1\nanyOf:\n  signatures:\n    - kind: pubKey\n      key: "+keyYAML(keyB)+"    - kind: pubKey\n      key: "+keyYAML(keyA)), "run", signed, "-r", request}, ""},
		{"config: anyOf two of two", []string{"--verification-config-path", configFile(t, "apiVersion: v1\nanyOf:\n  minimumMatches: 2\n  signatures:\n    - kind: pubKey\n      key: "+keyYAML(keyB)+"    - kind: pubKey\n      key: "+keyYAML(keyA)), "run", signed, "-r", request},
			"anyOf needs 2 matching signatures, got 1; not satisfied: anyOf.signatures[0]"},
		{"config: keyless", []string{"--verification-config-path", configFile(t, "apiVersion: v1\nallOf:\n  - kind: githubAction\n    owner: yunikorn-userinfo\n"), "run", signed, "-r", request},
			"allOf[0].kind: githubAction (keyless) signatures are checked against Sigstore's public Fulcio and Rekor"},
		{"config: wrong version", []string{"--verification-config-path", configFile(t, "apiVersion: v2\nallOf: []\n"), "run", signed, "-r", request},
			`apiVersion: "v2" is not a supported version`},
		{"config: empty", []string{"--verification-config-path", configFile(t, "apiVersion: v1\n"), "run", signed, "-r", request},
			"neither allOf nor anyOf"},
		{"config: bad key", []string{"--verification-config-path", configFile(t, "apiVersion: v1\nallOf:\n  - kind: pubKey\n    key: not a key\n"), "run", signed, "-r", request},
			"allOf[0].key: not a PEM public key"},
		{"serve refuses to start", []string{"-k", keyB.pubFile, "serve", signed, "--self-signed", "--self-signed-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"},
			"no valid signature (of 1 found) satisfies --verification-key " + keyB.pubFile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := c.run(t, nil, tc.args...)
			if tc.message == "" {
				require.Equal(t, 0, code, stderr)
				assert.Contains(t, stdout, `"allowed":true`)
				return
			}
			assert.Equal(t, 1, code, "stdout: %s", stdout)
			assert.Contains(t, stderr, tc.message)
		})
	}

	t.Run("a signature moved from another manifest", func(t *testing.T) {
		// The attacker copies the valid signature manifest of the signed
		// policy under the signature tag of the unsigned one: the payload
		// names another digest, so it proves nothing.
		repo := repository(t, "policies/signed")
		src := "sha256-" + strings.TrimPrefix(digestRef(t, signed).DigestStr(), "sha256:") + ".sig"
		desc, rc, err := repo.FetchReference(t.Context(), src)
		require.NoError(t, err)
		raw, err := content.ReadAll(rc, desc)
		rc.Close()
		require.NoError(t, err)
		dst := "sha256-" + strings.TrimPrefix(digestRef(t, unsigned).DigestStr(), "sha256:") + ".sig"
		require.NoError(t, repo.PushReference(t.Context(), desc, bytes.NewReader(raw), dst))
		_, stderr, code := c.run(t, nil, "-k", keyA.pubFile, "run", unsigned, "-r", request)
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "holds no cosign signature of this manifest")
	})

	t.Run("cosign's verifier agrees", func(t *testing.T) {
		for _, tc := range []struct {
			key  keyPair
			okay bool
		}{{keyA, true}, {keyB, false}} {
			err := cosignVerify(t.Context(), t, digestRef(t, signed), tc.key)
			if tc.okay {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		}
	})
}

// TestSignatures_image signs the image index and checks the signature
// with cosign's own verification code.
func TestSignatures_image(t *testing.T) {
	t.Parallel()
	idx := imageLayout(t)
	ref, err := name.ParseReference(reg.Host + "/yunikorn-userinfo:signed")
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(ref, idx, remoteOptions(t)...))
	d, err := idx.Digest()
	require.NoError(t, err)
	digest := ref.Context().Digest(d.String())
	key, other := newKeyPair(t), newKeyPair(t)
	require.Error(t, cosignVerify(t.Context(), t, digest, key), "not signed yet")
	require.NoError(t, sign.Sign(t.Context(), digest, key.signer, nil, remoteOptions(t)...))
	assert.NoError(t, cosignVerify(t.Context(), t, digest, key))
	assert.Error(t, cosignVerify(t.Context(), t, digest, other))
}

// cosignVerify checks a key signature the way `cosign verify --key
// --insecure-ignore-tlog` does, with cosign's library.
func cosignVerify(ctx context.Context, t *testing.T, ref name.Digest, k keyPair) error {
	t.Helper()
	pub, err := k.signer.PublicKey()
	require.NoError(t, err)
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	require.NoError(t, err)
	sigs, _, err := cosign.VerifyImageSignatures(ctx, ref, &cosign.CheckOpts{
		SigVerifier:        verifier,
		IgnoreTlog:         true,
		IgnoreSCT:          true,
		ClaimVerifier:      cosign.SimpleClaimVerifier,
		RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(remoteOptions(t)...)},
	})
	if err == nil && len(sigs) == 0 {
		return fmt.Errorf("no signatures verified")
	}
	return err
}

func indentLines(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return b.String()
}
