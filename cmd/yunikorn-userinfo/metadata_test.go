package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/host/metadata"
)

const metadataPath = "../../metadata.yml"

func TestAnnotate_inspectRoundTrip(t *testing.T) {
	t.Parallel()
	usage := "# yunikorn-user-info\n\nRecords <who> & why.\n"
	usagePath := writeFile(t, "README.md", usage)
	out := filepath.Join(t.TempDir(), "annotated.wasm")

	res := runCLI(t, "", "annotate", guestPath, "-m", metadataPath, "-u", usagePath, "-o", out)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Empty(t, res.stdout)

	// The section holds metadata.yml plus what annotate adds.
	data, err := os.ReadFile(metadataPath)
	require.NoError(t, err)
	want, err := metadata.Parse(data)
	require.NoError(t, err)
	want.ProtocolVersion = metadata.ProtocolV1
	want.Annotations[metadata.AnnotationUsage] = usage

	res = runCLI(t, "", "inspect", out, "--output", "json")
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

func TestAnnotate_deterministic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, second, again := filepath.Join(dir, "1.wasm"), filepath.Join(dir, "2.wasm"), filepath.Join(dir, "3.wasm")

	for _, out := range []string{first, second} {
		res := runCLI(t, "", "annotate", guestPath, "-m", metadataPath, "-o", out)
		require.Equal(t, 0, res.code, res.stderr)
	}
	// Annotating an annotated module replaces the section.
	res := runCLI(t, "", "annotate", first, "-m", metadataPath, "-o", again)
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
	res = runCLI(t, "", "annotate", again, "-m", metadataPath, "-o", again)
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
		{name: "invalid metadata", args: []string{"annotate", guestPath, "-m", badSeverity, "-o", out},
			want: "invalid metadata " + badSeverity + ":\nannotations[io.kubewarden.policy.severity]: unsupported value \"urgent\" (want one of info, low, medium, high, critical)"},
		{name: "unknown field", args: []string{"annotate", guestPath, "-m", typo, "-o", out},
			want: "read metadata " + typo + `: parse metadata: error unmarshaling JSON: while decoding JSON: json: unknown field "mutate"`},
		{name: "not a waPC mode", args: []string{"annotate", guestPath, "-m", rego, "-o", out},
			want: "read metadata " + rego + `: executionMode "opa": only kubewarden-wapc modules can be annotated by this host`},
		{name: "unreadable usage", args: []string{"annotate", guestPath, "-m", metadataPath, "-u", "testdata/missing.md", "-o", out},
			want: "read usage: open testdata/missing.md: no such file or directory"},
		{name: "broken module", args: []string{"annotate", notWasm, "-m", metadataPath, "-o", out},
			want: "load policy " + notWasm + ": compile module: ..."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := runCLI(t, "", tc.args...)
			assert.Equal(t, 1, res.code)
			if prefix, ok := strings.CutSuffix(tc.want, "..."); ok {
				assert.True(t, strings.HasPrefix(res.stderr, "Error: "+prefix), "stderr: %s", res.stderr)
			} else {
				assert.Equal(t, "Error: "+tc.want+"\n", res.stderr)
			}
			assert.NoFileExists(t, out, "nothing is written on error")
		})
	}
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
