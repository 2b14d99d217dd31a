package release

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/yunikorn-userinfo/userinfo/host/fetch"
	"github.com/yunikorn-userinfo/userinfo/release/internal/bundle"
	"github.com/yunikorn-userinfo/userinfo/release/internal/sign"
)

// releaseOptions assembles from what make test-release built: the image
// layout, its binaries, and the embedded policy (which make check-embedded
// proves equal to a fresh TinyGo build).
func releaseOptions(t *testing.T, out string) bundle.Options {
	t.Helper()
	layoutDir := os.Getenv("YUNIKORN_IMAGE_LAYOUT")
	if layoutDir == "" {
		layoutDir = "../build/image"
	}
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		bins["linux/"+arch] = filepath.Join(filepath.Dir(layoutDir), "image-bin", arch, "yunikorn-userinfo")
	}
	return bundle.Options{
		Out: out, Version: "0.0.0-test", Revision: strings.Repeat("ab", 20), Source: "https://example.com/src", License: "Apache-2.0",
		Created: time.Unix(1_700_000_000, 0), Binaries: bins, Policy: "../cmd/yunikorn-userinfo/policy.wasm",
		ImageLayout: layoutDir, ModuleDir: "..",
	}
}

// TestRelease_assemble checks the release directory: every file summed in
// SHA256SUMS, every digest of release.json true, SBOMs that describe their
// subject (hash and modules), and the same bytes from a second assembly.
func TestRelease_assemble(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "release")
	rel, err := bundle.Assemble(t.Context(), releaseOptions(t, dir))
	require.NoError(t, err)

	sums := readSums(t, filepath.Join(dir, bundle.SumsFile))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, sums, len(entries)-1, "every file but SHA256SUMS is summed")
	for name, want := range sums {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		got := sha256.Sum256(data)
		assert.Equal(t, want, hex.EncodeToString(got[:]), name)
	}

	idx := imageLayout(t)
	d, err := idx.Digest()
	require.NoError(t, err)
	assert.Equal(t, d.String(), rel.Image.Index)
	manifest, err := os.ReadFile(filepath.Join(dir, rel.Policy.Manifest))
	require.NoError(t, err)
	assert.Equal(t, digest.FromBytes(manifest).String(), rel.Policy.ManifestDigest)

	checkSBOM := func(file, subjectFile string, want, notWant []string) {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		var bom cdx.BOM
		require.NoError(t, cdx.NewBOMDecoder(bytes.NewReader(raw), cdx.BOMFileFormatJSON).Decode(&bom))
		assert.Equal(t, cdx.SpecVersion1_6, bom.SpecVersion)
		require.NotNil(t, bom.Metadata)
		assert.Equal(t, "2023-11-14T22:13:20Z", bom.Metadata.Timestamp, "the commit's time")
		require.NotNil(t, bom.Metadata.Component.Hashes)
		assert.Equal(t, sums[subjectFile], (*bom.Metadata.Component.Hashes)[0].Value, "the SBOM names its subject by hash")
		names := map[string]string{}
		for _, c := range *bom.Components {
			names[c.Name] = c.Version
		}
		for _, w := range want {
			assert.Contains(t, names, w, file)
		}
		for _, n := range notWant {
			assert.NotContains(t, names, n, file)
		}
	}
	for _, b := range rel.Binaries {
		checkSBOM(b.SBOM, b.File, []string{"github.com/tetratelabs/wazero", "oras.land/oras-go/v2", "github.com/sigstore/sigstore"}, nil)
	}
	// The policy's SBOM lists what the Wasm module is built from, not the host's modules.
	checkSBOM(rel.Policy.SBOM, rel.Policy.File, []string{"github.com/kubewarden/policy-sdk-go", "github.com/tidwall/gjson"},
		[]string{"github.com/tetratelabs/wazero", "github.com/spf13/cobra"})

	again := filepath.Join(t.TempDir(), "release")
	_, err = bundle.Assemble(t.Context(), releaseOptions(t, again))
	require.NoError(t, err)
	first, err := os.ReadFile(filepath.Join(dir, bundle.SumsFile))
	require.NoError(t, err)
	second, err := os.ReadFile(filepath.Join(again, bundle.SumsFile))
	require.NoError(t, err)
	assert.Equal(t, string(first), string(second), "two assemblies of the same inputs are identical")
}

// policyPusher pushes policies to the test registry as the CLI's push
// does: its CA trusted, the test user's credentials.
func policyPusher(t *testing.T) *fetch.Fetcher {
	t.Helper()
	sources, err := fetch.ParseSources([]byte(trustingSources(t)))
	require.NoError(t, err)
	f, err := fetch.New(fetch.Options{
		StoreDir: t.TempDir(), Sources: sources,
		Credential: auth.StaticCredential(reg.Host, auth.Credential{Username: pushUser, Password: pushPassword}),
	})
	require.NoError(t, err)
	return f
}

// referrer returns the one referrer of artifactType that the manifest
// subjectDigest has in repoName, and its single layer.
func referrer(t *testing.T, repoName, subjectDigest, artifactType string) (ocispec.Manifest, []byte) {
	t.Helper()
	repo := repository(t, repoName)
	subject := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.Digest(subjectDigest), Size: 1}
	var found []ocispec.Descriptor
	require.NoError(t, repo.Referrers(t.Context(), subject, artifactType, func(r []ocispec.Descriptor) error {
		found = append(found, r...)
		return nil
	}))
	require.Len(t, found, 1, "one %s referrer of %s", artifactType, subjectDigest)
	rc, err := repo.Fetch(t.Context(), found[0])
	require.NoError(t, err)
	raw, err := content.ReadAll(rc, found[0])
	rc.Close()
	require.NoError(t, err)
	var man ocispec.Manifest
	require.NoError(t, json.Unmarshal(raw, &man))
	require.Len(t, man.Layers, 1)
	require.NotNil(t, man.Subject)
	assert.Equal(t, subject.Digest, man.Subject.Digest)
	lrc, err := repo.Fetch(t.Context(), man.Layers[0])
	require.NoError(t, err)
	doc, err := content.ReadAll(lrc, man.Layers[0])
	lrc.Close()
	require.NoError(t, err)
	return man, doc
}

// verifyBundle checks a sigstore bundle with sigstore-go: signed by k,
// over a statement whose subject is manifestDigest.
func verifyBundle(t *testing.T, doc []byte, k keyPair, manifestDigest string) error {
	t.Helper()
	var b sgbundle.Bundle
	if err := b.UnmarshalJSON(doc); err != nil {
		return err
	}
	pub, err := k.signer.PublicKey()
	require.NoError(t, err)
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	require.NoError(t, err)
	trusted := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return root.NewExpiringKey(v, time.Time{}, time.Time{}), nil
	})
	verifier, err := verify.NewVerifier(trusted, verify.WithCurrentTime())
	require.NoError(t, err)
	sum, err := hex.DecodeString(strings.TrimPrefix(manifestDigest, "sha256:"))
	require.NoError(t, err)
	_, err = verifier.Verify(&b, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum), verify.WithKey()))
	return err
}

func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, sc.Text())
		out[name] = sum
	}
	return out
}

// TestRelease_publish publishes a release to the registry with a key, then
// checks it as a user would: the policy runs with its signature verified,
// cosign verifies the image, and each SBOM is a referrer of the manifest
// it describes.
func TestRelease_publish(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "release")
	rel, err := bundle.Assemble(t.Context(), releaseOptions(t, dir))
	require.NoError(t, err)
	key := newKeyPair(t)
	out, err := bundle.Publish(t.Context(), bundle.PublishOptions{
		Dir: dir, Image: reg.Host + "/release/yunikorn-userinfo", Policy: reg.Host + "/release/policies/yunikorn-user-info",
		Key: key.signer, Remote: remoteOptions(t), Policies: policyPusher(t),
	})
	require.NoError(t, err)
	assert.Equal(t, reg.Host+"/release/yunikorn-userinfo@"+rel.Image.Index, out.Image)
	assert.Equal(t, "registry://"+reg.Host+"/release/policies/yunikorn-user-info@"+rel.Policy.ManifestDigest, out.Policy)

	c := newClient(t, pushUser, pushPassword, trustingSources(t))
	for _, ref := range []string{out.Policy, "registry://" + reg.Host + "/release/policies/yunikorn-user-info:v0.0.0-test"} {
		stdout, stderr, code := c.run(t, nil, "-k", key.pubFile, "run", ref, "-r", "../testdata/requests/review-alice-pod.json")
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, `"allowed":true`)
	}
	assert.NoError(t, cosignVerify(t.Context(), t, digestRef(t, "registry://"+out.Image), key))

	sbomOf := func(repoName, subject string) []byte {
		t.Helper()
		_, doc := referrer(t, repoName, subject, "application/vnd.cyclonedx+json")
		return doc
	}
	for platform, d := range rel.Image.Platforms {
		doc := sbomOf("release/yunikorn-userinfo", d)
		want, err := os.ReadFile(filepath.Join(dir, rel.Binaries[platform].SBOM))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(doc), platform)
	}
	doc := sbomOf("release/policies/yunikorn-user-info", rel.Policy.ManifestDigest)
	want, err := os.ReadFile(filepath.Join(dir, rel.Policy.SBOM))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(doc))

	// The sigstore bundles: one referrer each for the image index and the
	// policy, verified with sigstore-go against the key, and not against
	// another key or for another digest.
	other := newKeyPair(t)
	for _, s := range []struct {
		repo   string
		digest string
	}{{"release/yunikorn-userinfo", rel.Image.Index}, {"release/policies/yunikorn-user-info", rel.Policy.ManifestDigest}} {
		man, doc := referrer(t, s.repo, s.digest, sign.BundleMediaType)
		assert.Equal(t, "dsse-envelope", man.Layers[0].Annotations["dev.sigstore.bundle.content"])
		assert.NoError(t, verifyBundle(t, doc, key, s.digest), s.repo)
		assert.Error(t, verifyBundle(t, doc, other, s.digest), "another key")
		assert.Error(t, verifyBundle(t, doc, key, "sha256:"+strings.Repeat("0", 64)), "another digest")
	}
}
