package release

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/release/internal/bundle"
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
		// The binary links no registry client: pushing, pulling and signing
		// are kwctl's, oras's and cosign's jobs.
		checkSBOM(b.SBOM, b.File, []string{"github.com/tetratelabs/wazero", "github.com/spf13/cobra"},
			[]string{"oras.land/oras-go/v2", "github.com/sigstore/sigstore", "github.com/opencontainers/image-spec", "github.com/google/go-containerregistry"})
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
