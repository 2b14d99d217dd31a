package metadata

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
)

// Hand-encoded sections of a tiny valid module exporting `f: () -> ()`.
var (
	typeSection     = []byte{0x01, 0x04, 0x01, 0x60, 0x00, 0x00}
	functionSection = []byte{0x03, 0x02, 0x01, 0x00}
	exportSection   = []byte{0x07, 0x05, 0x01, 0x01, 'f', 0x00, 0x00}
	codeSection     = []byte{0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b}
)

// customSection encodes a custom section by hand, independently of leb128.AppendU32
// for the small sizes used here.
func customSection(t *testing.T, name, content string) []byte {
	t.Helper()
	payload := len(name) + 1 + len(content)
	require.Less(t, payload, 128, "test helper only does one-byte sizes")
	require.Less(t, len(name), 128)
	out := []byte{0x00, byte(payload), byte(len(name))}
	out = append(out, name...)
	return append(out, content...)
}

func module(sections ...[]byte) []byte {
	return slices.Concat(append([][]byte{wasmHeader}, sections...)...)
}

// wazeroCustomSections reads the custom sections back with wazero, an
// independent parser that also checks the rest of the module is intact.
func wazeroCustomSections(t *testing.T, wasm []byte) map[string][]string {
	t.Helper()
	ctx := t.Context()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCustomSections(true))
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, wasm)
	require.NoError(t, err, "wazero must accept the module")
	out := map[string][]string{}
	for _, s := range cm.CustomSections() {
		out[s.Name()] = append(out[s.Name()], string(s.Data()))
	}
	assert.Contains(t, cm.ExportedFunctions(), "f", "the module's code must survive")
	return out
}

func TestSetCustomSection_roundTrip(t *testing.T) {
	t.Parallel()
	base := module(typeSection, functionSection, exportSection,
		customSection(t, "producers", "tinygo"), codeSection)

	tests := []struct {
		name    string
		content []byte
	}{
		{name: "empty", content: nil},
		{name: "small", content: []byte(`{"mutating":true}`)},
		{name: "two-byte size", content: bytes.Repeat([]byte("x"), 300)},
		{name: "three-byte size", content: bytes.Repeat([]byte("y"), 20000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := SetCustomSection(base, SectionName, tc.content)
			require.NoError(t, err)

			got, ok, err := ReadCustomSection(out, SectionName)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, string(tc.content), string(got))

			if len(tc.content) > 0 {
				// wazero v1.12 fails on an empty custom section at the very
				// end of a module (it reads zero bytes and gets EOF), which
				// the spec allows; metadata is never empty in practice.
				assert.Equal(t, map[string][]string{
					"producers": {"tinygo"},
					SectionName: {string(tc.content)},
				}, wazeroCustomSections(t, out))
			}
			assert.True(t, bytes.HasPrefix(out, base), "existing sections are kept byte for byte")
		})
	}
}

func TestSetCustomSection_replacesNotDuplicates(t *testing.T) {
	t.Parallel()
	// Two stale copies, one in the middle of the module, as a tool that
	// inserted rather than appended might leave them.
	in := module(typeSection, customSection(t, SectionName, "old-1"), functionSection, exportSection,
		codeSection, customSection(t, "other", "n"), customSection(t, SectionName, "old-2"))

	out, err := SetCustomSection(in, SectionName, []byte("new"))
	require.NoError(t, err)

	assert.Equal(t, map[string][]string{
		"other":     {"n"},
		SectionName: {"new"},
	}, wazeroCustomSections(t, out))
	assert.Equal(t, module(typeSection, functionSection, exportSection, codeSection,
		customSection(t, "other", "n"), customSection(t, SectionName, "new")), out)

	again, err := SetCustomSection(out, SectionName, []byte("new"))
	require.NoError(t, err)
	assert.Equal(t, out, again, "setting the same content again is a no-op")
}

func TestReadCustomSection_firstWins(t *testing.T) {
	t.Parallel()
	in := module(customSection(t, SectionName, "first"), typeSection, customSection(t, SectionName, "second"))
	got, ok, err := ReadCustomSection(in, SectionName)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "first", string(got))
}

func TestReadCustomSection_absent(t *testing.T) {
	t.Parallel()
	got, ok, err := ReadCustomSection(module(typeSection, customSection(t, "other", "x")), SectionName)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Nil(t, got)
}

func TestCustomSection_badInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		wasm    []byte
		wantErr error
		msg     string
	}{
		{name: "empty", wasm: nil, wantErr: ErrNotWasm, msg: "missing \\0asm magic"},
		{name: "text", wasm: []byte("(module)\n"), wantErr: ErrNotWasm, msg: "missing \\0asm magic"},
		{name: "short header", wasm: wasmHeader[:6], wantErr: ErrNotWasm, msg: "missing \\0asm magic"},
		{name: "component", wasm: []byte{0x00, 'a', 's', 'm', 0x0d, 0x00, 0x01, 0x00}, wantErr: ErrNotWasm, msg: "unsupported binary version"},
		{name: "section without size", wasm: module([]byte{0x01}), wantErr: ErrMalformedWasm, msg: "unexpected end of input"},
		{name: "truncated payload", wasm: module(typeSection[:4]), wantErr: ErrMalformedWasm, msg: "declares 4 bytes, 2 left"},
		{name: "size overflows u32", wasm: module([]byte{0x01, 0xff, 0xff, 0xff, 0xff, 0x7f}), wantErr: ErrMalformedWasm, msg: "overflows 32 bits"},
		{name: "size longer than 5 bytes", wasm: module([]byte{0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}), wantErr: ErrMalformedWasm, msg: "overflows 32 bits"},
		{name: "custom name overruns section", wasm: module([]byte{0x00, 0x02, 0x05, 'a'}), wantErr: ErrMalformedWasm, msg: "name of 5 bytes overruns the 2-byte section"},
		{name: "custom name not utf8", wasm: module([]byte{0x00, 0x02, 0x01, 0xff}), wantErr: ErrMalformedWasm, msg: "not valid UTF-8"},
		{name: "empty custom section", wasm: module([]byte{0x00, 0x00}), wantErr: ErrMalformedWasm, msg: "name length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := ReadCustomSection(tc.wasm, SectionName)
			require.ErrorIs(t, err, tc.wantErr)
			assert.Contains(t, err.Error(), tc.msg)

			_, err = SetCustomSection(tc.wasm, SectionName, []byte("x"))
			require.ErrorIs(t, err, tc.wantErr)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

// Every cut inside a section must be reported, even when the wanted section
// comes before the damage.
func TestReadCustomSection_everyTruncation(t *testing.T) {
	t.Parallel()
	sections := [][]byte{customSection(t, SectionName, "meta"), typeSection, functionSection, exportSection, codeSection}
	whole := module(sections...)
	boundaries := map[int]bool{len(wasmHeader): true}
	off := len(wasmHeader)
	for _, s := range sections {
		off += len(s)
		boundaries[off] = true
	}
	for n := 0; n < len(whole); n++ {
		_, _, err := ReadCustomSection(whole[:n], SectionName)
		if boundaries[n] {
			assert.NoError(t, err, "cut at section boundary %d is valid framing", n)
			continue
		}
		assert.Error(t, err, "cut at %d", n)
	}
}

func TestSetCustomSection_badName(t *testing.T) {
	t.Parallel()
	_, err := SetCustomSection(module(), "bad\xff", nil)
	assert.ErrorContains(t, err, "not valid UTF-8")
}

func TestSetCustomSection_wazeroRejectsNothingElse(t *testing.T) {
	t.Parallel()
	// A name with multi-byte UTF-8 must be length-prefixed in bytes.
	name := "io.kubewarden.métadonnées"
	out, err := SetCustomSection(module(typeSection, functionSection, exportSection, codeSection), name, []byte(strings.Repeat("z", 130)))
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{name: {strings.Repeat("z", 130)}}, wazeroCustomSections(t, out))
}
