package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/metadata"
)

func TestAnnotate_roundTrip(t *testing.T) {
	t.Parallel()
	usage := "# yunikorn-user-info\n\nRecords <who> & why.\n"
	usagePath := writeFile(t, "README.md", usage)
	out := filepath.Join(t.TempDir(), "annotated.wasm")

	res := runPM(t, "annotate", guestPath, "-m", metadataPath, "-u", usagePath, "-o", out)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Empty(t, res.stdout)
	assert.Empty(t, res.stderr)

	// The section holds metadata.yml plus what annotate adds.
	data, err := os.ReadFile(metadataPath)
	require.NoError(t, err)
	want, err := metadata.Parse(data)
	require.NoError(t, err)
	want.ProtocolVersion = metadata.ProtocolV1
	want.Annotations[metadata.AnnotationUsage] = usage
	wantJSON, err := want.MarshalJSON()
	require.NoError(t, err)

	wasm, err := os.ReadFile(out)
	require.NoError(t, err)
	section, ok, err := metadata.ReadCustomSection(wasm, metadata.SectionName)
	require.NoError(t, err)
	require.True(t, ok, "the module is annotated")
	assert.Equal(t, string(wantJSON), string(section), "raw section, as written")

	// The annotated module still compiles and answers.
	eng, err := engine.New(t.Context(), wasm, engine.Options{MaxInstances: 1})
	require.NoError(t, err)
	defer eng.Close(t.Context())
	v, err := eng.ProtocolVersion(t.Context())
	require.NoError(t, err)
	assert.Equal(t, metadata.ProtocolV1, v)
}

// TestAnnotate_embeddedIsFixedPoint: annotating the CLI's embedded module
// with metadata.yml gives its own bytes back, as make annotated built it.
func TestAnnotate_embeddedIsFixedPoint(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "annotated.wasm")
	res := runPM(t, "annotate", embeddedPath, "-m", metadataPath, "-o", out)
	require.Equal(t, 0, res.code, res.stderr)
	want, err := os.ReadFile(embeddedPath)
	require.NoError(t, err)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.True(t, string(want) == string(got),
		"cmd/yunikorn-userinfo/policy.wasm does not carry metadata.yml: run make embed and commit it")
}

func TestAnnotate_deterministic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, second, again := filepath.Join(dir, "1.wasm"), filepath.Join(dir, "2.wasm"), filepath.Join(dir, "3.wasm")

	for _, out := range []string{first, second} {
		res := runPM(t, "annotate", guestPath, "-m", metadataPath, "-o", out)
		require.Equal(t, 0, res.code, res.stderr)
	}
	// Annotating an annotated module replaces the section.
	res := runPM(t, "annotate", "file://"+first, "-m", metadataPath, "-o", again)
	require.Equal(t, 0, res.code, res.stderr)

	a, err := os.ReadFile(first)
	require.NoError(t, err)
	b, err := os.ReadFile(second)
	require.NoError(t, err)
	c, err := os.ReadFile(again)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	assert.Equal(t, a, c)
	assert.Equal(t, 1, strings.Count(string(c), metadata.SectionName), "one section, not two")

	// In place: the output may be the input.
	res = runPM(t, "annotate", again, "-m", metadataPath, "-o", again)
	require.Equal(t, 0, res.code, res.stderr)
	c, err = os.ReadFile(again)
	require.NoError(t, err)
	assert.Equal(t, a, c)
}

func TestAnnotate_errors(t *testing.T) {
	t.Parallel()
	base, err := os.ReadFile(metadataPath)
	require.NoError(t, err)
	badSeverity := writeFile(t, "metadata.yml", strings.Replace(string(base), "severity: high", "severity: urgent", 1))
	rego := writeFile(t, "metadata.yml", strings.Replace(string(base), "executionMode: kubewarden-wapc", "executionMode: opa", 1))
	typo := writeFile(t, "metadata.yml", strings.Replace(string(base), "mutating: true", "mutate: true", 1))
	notWasm := writeFile(t, "policy.wasm", "\x00asm\x01\x00\x00\x00\x01")
	out := filepath.Join(t.TempDir(), "out.wasm")

	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "missing metadata", args: []string{"annotate", guestPath, "-o", out},
			want: `required flag(s) "metadata-path" not set`},
		{name: "missing output", args: []string{"annotate", guestPath, "-m", metadataPath},
			want: `required flag(s) "output-path" not set`},
		{name: "missing module", args: []string{"annotate", "-m", metadataPath, "-o", out},
			want: "accepts 1 arg(s), received 0"},
		{name: "unreadable metadata", args: []string{"annotate", guestPath, "-m", "testdata/missing.yml", "-o", out},
			want: "read metadata: open testdata/missing.yml: no such file or directory"},
		{name: "invalid metadata", args: []string{"annotate", guestPath, "-m", badSeverity, "-o", out},
			want: "invalid metadata " + badSeverity + ":\nannotations[io.kubewarden.policy.severity]: unsupported value \"urgent\" (want one of info, low, medium, high, critical)"},
		{name: "unknown field", args: []string{"annotate", guestPath, "-m", typo, "-o", out},
			want: "read metadata " + typo + `: parse metadata: error unmarshaling JSON: while decoding JSON: json: unknown field "mutate"`},
		{name: "not a waPC mode", args: []string{"annotate", guestPath, "-m", rego, "-o", out},
			want: "read metadata " + rego + `: executionMode "opa": only kubewarden-wapc modules can be annotated`},
		{name: "unreadable usage", args: []string{"annotate", guestPath, "-m", metadataPath, "-u", "testdata/missing.md", "-o", out},
			want: "read usage: open testdata/missing.md: no such file or directory"},
		{name: "unreadable module", args: []string{"annotate", "testdata/missing.wasm", "-m", metadataPath, "-o", out},
			want: "read module: open testdata/missing.wasm: no such file or directory"},
		{name: "broken module", args: []string{"annotate", notWasm, "-m", metadataPath, "-o", out},
			want: "load policy " + notWasm + ": compile module: ..."},
		{name: "unwritable output", args: []string{"annotate", guestPath, "-m", metadataPath, "-o", "testdata/missing/out.wasm"},
			want: "write annotated module: open testdata/missing/.out.wasm...."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := runPM(t, tc.args...)
			assert.Equal(t, 1, res.code)
			assert.Empty(t, res.stdout)
			if prefix, ok := strings.CutSuffix(tc.want, "..."); ok {
				assert.True(t, strings.HasPrefix(res.stderr, "Error: "+prefix), "stderr: %s", res.stderr)
			} else {
				assert.Equal(t, "Error: "+tc.want+"\n", res.stderr)
			}
			assert.NoFileExists(t, out, "nothing is written on error")
		})
	}
}
