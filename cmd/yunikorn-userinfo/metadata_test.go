package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/host/metadata"
)

const metadataPath = "../../metadata.yml"

// annotateGuest writes the test guest with md in its io.kubewarden.metadata
// section, as kwctl annotate (or make annotated) stores it.
func annotateGuest(t *testing.T, md *metadata.Metadata) string {
	t.Helper()
	require.NoError(t, md.Validate())
	guest, err := os.ReadFile(guestPath)
	require.NoError(t, err)
	section, err := md.MarshalJSON()
	require.NoError(t, err)
	annotated, err := metadata.SetCustomSection(guest, metadata.SectionName, section)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "annotated.wasm")
	require.NoError(t, os.WriteFile(out, annotated, 0o600))
	return out
}

func TestInspect_annotated(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(metadataPath)
	require.NoError(t, err)
	want, err := metadata.Parse(data)
	require.NoError(t, err)
	want.ProtocolVersion = metadata.ProtocolV1
	want.Annotations[metadata.AnnotationUsage] = "# yunikorn-user-info\n\nRecords <who> & why.\n"
	out := annotateGuest(t, want)

	res := runCLI(t, "", "inspect", out, "--output", "json")
	require.Equal(t, 0, res.code, res.stderr)
	wantJSON, err := want.MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, string(wantJSON)+"\n", res.stdout, "raw section, as written")

	res = runCLI(t, "", "inspect", out)
	require.Equal(t, 0, res.code, res.stderr)
	var got metadata.Metadata
	require.NoError(t, yaml.Unmarshal([]byte(res.stdout), &got), res.stdout)
	assert.Equal(t, want, &got, "the YAML view holds the same metadata")
	assert.Contains(t, res.stdout, "mutating: true\n")

	// The annotated module still runs.
	res = runCLI(t, "", "run", out, "-r", requestPath)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Equal(t, acceptedLine, res.stdout)
}

func TestInspect(t *testing.T) {
	t.Parallel()
	t.Run("not annotated", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "", "inspect", guestPath)
		assert.Equal(t, 1, res.code)
		assert.Empty(t, res.stdout)
		assert.Equal(t, "Error: inspect "+guestPath+": no io.kubewarden.metadata section: the module is not annotated\n", res.stderr)
	})
	t.Run("not wasm", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "policy.wasm", "\x00asm\x01\x00\x00\x00\x00\x09\x02ab")
		res := runCLI(t, "", "inspect", path)
		assert.Equal(t, 1, res.code)
		assert.Equal(t, "Error: inspect "+path+": malformed WebAssembly module: section 0 at offset 8 is truncated: declares 9 bytes, 3 left\n", res.stderr)
	})
	t.Run("bad output format", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "", "inspect", guestPath, "-o", "toml")
		assert.Equal(t, 1, res.code)
		assert.Equal(t, "Error: invalid --output \"toml\": want yaml or json\n", res.stderr)
	})
	t.Run("embedded policy is annotated with metadata.yml", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "", "inspect", "--output", "json")
		require.Equal(t, 0, res.code, res.stderr)
		var got metadata.Metadata
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
		assert.True(t, got.Mutating)
		assert.Equal(t, "yunikorn-user-info", got.Annotations["io.kubewarden.policy.title"])
	})
}
