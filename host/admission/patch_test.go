package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

func TestCreatePatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		original string
		mutated  string
		want     string
	}{
		{
			name:     "identical documents",
			original: `{"a":1,"b":[1,2,{"c":null}]}`,
			mutated:  `{"a":1,"b":[1,2,{"c":null}]}`,
			want:     `[]`,
		},
		{
			name:     "key order and spacing are not changes",
			original: `{"a":1,"b":{"x":true,"y":"s"}}`,
			mutated:  "{ \"b\" : { \"y\":\"s\", \"x\":true },\n\"a\":1 }",
			want:     `[]`,
		},
		{
			name:     "string escapes are not changes",
			original: `{"s":"caf\u00e9 \/"}`,
			mutated:  `{"s":"café /"}`,
			want:     `[]`,
		},
		{
			name:     "add a key to existing annotations",
			original: `{"metadata":{"name":"p","annotations":{"team":"a"}},"spec":{"containers":[]}}`,
			mutated:  `{"metadata":{"name":"p","annotations":{"team":"a","yunikorn.apache.org/user.info":"{\"user\":\"alice\"}"}},"spec":{"containers":[]}}`,
			want:     `[{"op":"add","path":"/metadata/annotations/yunikorn.apache.org~1user.info","value":"{\"user\":\"alice\"}"}]`,
		},
		{
			name:     "add a missing annotations map",
			original: `{"metadata":{"name":"p"}}`,
			mutated:  `{"metadata":{"name":"p","annotations":{"z":"1","yunikorn.apache.org/user.info":"{}"}}}`,
			want:     `[{"op":"add","path":"/metadata/annotations","value":{"z":"1","yunikorn.apache.org/user.info":"{}"}}]`,
		},
		{
			name:     "nested remove",
			original: `{"metadata":{"labels":{"a":"1","b":"2"}}}`,
			mutated:  `{"metadata":{"labels":{"a":"1"}}}`,
			want:     `[{"op":"remove","path":"/metadata/labels/b"}]`,
		},
		{
			name:     "nested replace",
			original: `{"spec":{"template":{"spec":{"replicas":1}}}}`,
			mutated:  `{"spec":{"template":{"spec":{"replicas":2}}}}`,
			want:     `[{"op":"replace","path":"/spec/template/spec/replicas","value":2}]`,
		},
		{
			name:     "operations in sorted key order",
			original: `{"m":1,"b":{"k":1},"y":2}`,
			mutated:  `{"z":3,"b":{"k":2},"a":0,"y":2}`,
			want: `[{"op":"add","path":"/a","value":0},{"op":"replace","path":"/b/k","value":2},` +
				`{"op":"remove","path":"/m"},{"op":"add","path":"/z","value":3}]`,
		},
		{
			name:     "null is a value",
			original: `{"a":null,"b":1}`,
			mutated:  `{"b":null,"c":null}`,
			want: `[{"op":"remove","path":"/a"},{"op":"replace","path":"/b","value":null},` +
				`{"op":"add","path":"/c","value":null}]`,
		},
		{
			name:     "array grows",
			original: `{"a":[1,2]}`,
			mutated:  `{"a":[1,2,{"x":3},[4]]}`,
			want:     `[{"op":"add","path":"/a/2","value":{"x":3}},{"op":"add","path":"/a/3","value":[4]}]`,
		},
		{
			name:     "array shrinks from the end",
			original: `{"a":[1,2,3,4]}`,
			mutated:  `{"a":[1]}`,
			want:     `[{"op":"remove","path":"/a/3"},{"op":"remove","path":"/a/2"},{"op":"remove","path":"/a/1"}]`,
		},
		{
			name:     "array shrinks and changes",
			original: `{"a":[1,2,3]}`,
			mutated:  `{"a":[0]}`,
			want:     `[{"op":"replace","path":"/a/0","value":0},{"op":"remove","path":"/a/2"},{"op":"remove","path":"/a/1"}]`,
		},
		{
			name:     "array elements diffed recursively",
			original: `{"containers":[{"name":"a","image":"x:1"},{"name":"b","image":"y:1"}]}`,
			mutated:  `{"containers":[{"name":"a","image":"x:1"},{"name":"b","image":"y:2","env":[]}]}`,
			want: `[{"op":"add","path":"/containers/1/env","value":[]},` +
				`{"op":"replace","path":"/containers/1/image","value":"y:2"}]`,
		},
		{
			name:     "empty containers filled",
			original: `{"a":[],"o":{}}`,
			mutated:  `{"a":[[]],"o":{"k":{}}}`,
			want:     `[{"op":"add","path":"/a/0","value":[]},{"op":"add","path":"/o/k","value":{}}]`,
		},
		{
			name:     "type changes",
			original: `{"a":{"x":1},"b":[1],"c":"1","d":true,"e":null,"f":1}`,
			mutated:  `{"a":[1],"b":{"0":1},"c":1,"d":"true","e":false,"f":null}`,
			want: `[{"op":"replace","path":"/a","value":[1]},{"op":"replace","path":"/b","value":{"0":1}},` +
				`{"op":"replace","path":"/c","value":1},{"op":"replace","path":"/d","value":"true"},` +
				`{"op":"replace","path":"/e","value":false},{"op":"replace","path":"/f","value":null}]`,
		},
		{
			name:     "keys with slash and tilde",
			original: `{"a/b":1,"c~d":1,"~1":1,"":{"/":1}}`,
			mutated:  `{"a/b":2,"c~d":2,"~1":2,"":{"/":2}}`,
			want: `[{"op":"replace","path":"//~1","value":2},{"op":"replace","path":"/a~1b","value":2},` +
				`{"op":"replace","path":"/c~0d","value":2},{"op":"replace","path":"/~01","value":2}]`,
		},
		{
			name:     "unicode keys and values",
			original: `{"ключ":"значение","emoji":"🙂"}`,
			mutated:  `{"ключ":"другое","emoji":"🙂","日本":"\u65e5"}`,
			want: `[{"op":"replace","path":"/ключ","value":"другое"},` +
				`{"op":"add","path":"/日本","value":"日"}]`,
		},
		{
			name:     "strings escaped only as JSON requires",
			original: `{"s":""}`,
			mutated:  `{"s":"<a href=\"x\">&amp;</a>\\\n\t\r\u0001\u2028"}`,
			want:     `[{"op":"replace","path":"/s","value":"<a href=\"x\">&amp;</a>\\\n\t\r\u0001\u2028"}]`,
		},
		{
			name:     "large integers unchanged",
			original: `{"big":12345678901234567890,"n":1}`,
			mutated:  `{"big":12345678901234567890,"n":2,"more":[98765432109876543210,1.50,1e400]}`,
			want: `[{"op":"add","path":"/more","value":[98765432109876543210,1.50,1e400]},` +
				`{"op":"replace","path":"/n","value":2}]`,
		},
		{
			name:     "large integers differing in the last digit",
			original: `{"big":12345678901234567890}`,
			mutated:  `{"big":12345678901234567891}`,
			want:     `[{"op":"replace","path":"/big","value":12345678901234567891}]`,
		},
		{
			name:     "numbers compared by text",
			original: `{"a":1,"b":1e2}`,
			mutated:  `{"a":1.0,"b":1e2}`,
			want:     `[{"op":"replace","path":"/a","value":1.0}]`,
		},
		{
			name:     "root scalars",
			original: `1`,
			mutated:  `"one"`,
			want:     `[{"op":"replace","path":"","value":"one"}]`,
		},
		{
			name:     "root arrays",
			original: `[1,[2,3]]`,
			mutated:  `[1,[2]]`,
			want:     `[{"op":"remove","path":"/1/1"}]`,
		},
		{
			name:     "root type change",
			original: `{"a":1}`,
			mutated:  `[{"a":1}]`,
			want:     `[{"op":"replace","path":"","value":[{"a":1}]}]`,
		},
		{
			name:     "identical scalars",
			original: ` true `,
			mutated:  `true`,
			want:     `[]`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := CreatePatch([]byte(tc.original), []byte(tc.mutated))
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
			if isContainer([]byte(tc.original)) && !hasEmptyKey(fixturecheck.DecodeJSON(t, []byte(tc.original))) {
				assertPatchApplies(t, []byte(tc.original), []byte(tc.mutated), got)
			}
		})
	}
}

func TestCreatePatch_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		original string
		mutated  string
		wantErr  string
	}{
		{name: "original invalid", original: `{"a":`, mutated: `{}`, wantErr: "decode original document: unexpected EOF"},
		{name: "mutated invalid", original: `{}`, mutated: `{"a" 1}`, wantErr: "decode mutated document: invalid character"},
		{name: "original empty", original: ``, mutated: `{}`, wantErr: "decode original document: unexpected EOF"},
		{name: "mutated empty", original: `{}`, mutated: " \n", wantErr: "decode mutated document: unexpected EOF"},
		{name: "trailing comma", original: `[1,]`, mutated: `[]`, wantErr: "decode original document: invalid character ']'"},
		{name: "leading zero", original: `{}`, mutated: `{"a":01}`, wantErr: "decode mutated document: invalid character '1'"},
		{name: "trailing data", original: `{} {}`, mutated: `{}`, wantErr: "decode original document: unexpected { after top-level value"},
		{name: "trailing garbage", original: `{}`, mutated: `{}x`, wantErr: "decode mutated document: invalid character 'x'"},
		{
			// Duplicates are looked for where the documents differ.
			name:     "duplicate key in original",
			original: `{"metadata":{"name":"a","name":"b"}}`,
			mutated:  `{"metadata":{"name":"c"}}`,
			wantErr:  `decode original document: at "/metadata": duplicate key "name"`,
		},
		{
			// The first occurrence is among the members both sides begin
			// with, which the differ passes in step.
			name:     "duplicate of a key both sides begin with",
			original: `{"metadata":{"name":"a","uid":"u","name":"b"}}`,
			mutated:  `{"metadata":{"name":"a","uid":"u","name":"c"}}`,
			wantErr:  `decode original document: at "/metadata": duplicate key "name"`,
		},
		{
			name:     "added duplicate of a key both sides begin with",
			original: `{"metadata":{"name":"a","uid":"u"}}`,
			mutated:  `{"metadata":{"name":"a","uid":"u","name":"c"}}`,
			wantErr:  `decode mutated document: at "/metadata": duplicate key "name"`,
		},
		{
			name:     "duplicate key in mutated array element",
			original: `{}`,
			mutated:  `{"a/b":[{"k":1,"k":1}]}`,
			wantErr:  `decode mutated document: at "/a~1b/0": duplicate key "k"`,
		},
		{
			name:     "too deep",
			original: strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2),
			mutated:  `[]`,
			wantErr:  "decode original document: at ",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := CreatePatch([]byte(tc.original), []byte(tc.mutated))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Nil(t, got)
		})
	}
}

// TestCreatePatch_property checks, for many random document pairs, that the
// patch applied by an independent RFC 6902 implementation turns original
// into mutated, and that equal documents give an empty patch.
func TestCreatePatch_property(t *testing.T) {
	t.Parallel()
	g := &docGen{r: rand.New(rand.NewPCG(20240601, 7))}
	for i := range 3000 {
		original := g.container(0)
		var mutated any
		if g.r.IntN(10) == 0 {
			mutated = g.container(0) // unrelated documents
		} else {
			mutated = g.mutate(original, 0)
		}
		a, b := g.encode(original), g.encode(mutated)

		patch, err := CreatePatch(a, b)
		require.NoError(t, err, "pair %d:\n%s\n%s", i, a, b)
		assertPatchApplies(t, a, b, patch)

		same, err := CreatePatch(a, a)
		require.NoError(t, err)
		assert.Equal(t, "[]", string(same), "pair %d: %s", i, a)
	}
}

// FuzzCreatePatch checks that any two valid JSON documents give a patch that
// an independent implementation applies to reach the mutated one, and that
// invalid documents are refused.
func FuzzCreatePatch(f *testing.F) {
	seeds := [][2]string{
		{`{"metadata":{"annotations":{"a":"b"}}}`, `{"metadata":{"annotations":{"a":"b","yunikorn.apache.org/user.info":"{}"}}}`},
		{`{"a":[1,2,3]}`, `{"a":[3,{"b":null}]}`},
		{`{"a/b":{"~":1}}`, `{"a/b":{"~":[1]},"":""}`},
		{`[12345678901234567890]`, `[12345678901234567890,1.0e-5]`},
		{`{"s":"\u00e9\ud83d\ude00"}`, `{"s":"é😀","t":"<&>"}`},
		{`1`, `{"a":1}`},
		{`{"a":1,"a":2}`, `{}`},
		{`{`, `{}`},
	}
	for _, s := range seeds {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, original, mutated []byte) {
		patch, err := CreatePatch(original, mutated)
		if !json.Valid(original) || !json.Valid(mutated) {
			require.Error(t, err, "invalid JSON must be refused")
			return
		}
		if err != nil {
			// Valid JSON is refused only for these reasons.
			msg := err.Error()
			require.True(t, strings.Contains(msg, "duplicate key") || strings.Contains(msg, "nesting deeper"), msg)
			return
		}
		require.True(t, json.Valid(patch), "patch is not JSON: %s", patch)

		if isContainer(original) && isContainer(mutated) {
			// See genKeys for why empty keys cannot be checked this way.
			if !hasEmptyKey(fixturecheck.DecodeJSON(t, original)) && !hasEmptyKey(fixturecheck.DecodeJSON(t, mutated)) {
				assertPatchApplies(t, original, mutated, patch)
			}
			return
		}
		// evanphx/json-patch only patches objects and arrays; for scalar
		// roots the patch must be empty or replace the root.
		var ops []struct {
			Op    string          `json:"op"`
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		}
		require.NoError(t, json.Unmarshal(patch, &ops))
		if len(ops) == 0 {
			assert.Equal(t, fixturecheck.DecodeJSON(t, original), fixturecheck.DecodeJSON(t, mutated))
			return
		}
		require.Len(t, ops, 1)
		assert.Equal(t, "replace", ops[0].Op)
		assert.Empty(t, ops[0].Path)
		assert.Equal(t, fixturecheck.DecodeJSON(t, mutated), fixturecheck.DecodeJSON(t, ops[0].Value))
	})
}

// assertPatchApplies applies patch to original with evanphx/json-patch and
// checks that the result means the same as mutated.
func assertPatchApplies(t *testing.T, original, mutated, patch []byte) {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	require.NoError(t, err, "decode patch %s", patch)
	// evanphx/json-patch tells an array document from an object by its
	// first byte, so leading whitespace would make it misread an array.
	got, err := p.Apply(bytes.TrimSpace(original))
	require.NoError(t, err, "apply patch %s\nto %s", patch, original)
	assert.Equal(t, fixturecheck.DecodeJSON(t, mutated), fixturecheck.DecodeJSON(t, got), "patch %s\noriginal %s", patch, original)
}

// isContainer reports whether the valid JSON document data is an object or
// an array.
func isContainer(data []byte) bool {
	data = bytes.TrimSpace(data)
	return len(data) > 0 && (data[0] == '{' || data[0] == '[')
}

// hasEmptyKey reports whether a decoded document has an object member named "".
func hasEmptyKey(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if k == "" || hasEmptyKey(child) {
				return true
			}
		}
	case []any:
		for _, child := range t {
			if hasEmptyKey(child) {
				return true
			}
		}
	}
	return false
}

// docGen generates random JSON documents from a seeded source.
type docGen struct {
	r *rand.Rand
}

// Keys and values are drawn from small pools so that random pairs share
// structure, and include the characters that need escaping. The empty key is
// left out: evanphx/json-patch resolves "" as the current document instead of
// a member named "" (RFC 6901 allows it), so it cannot judge such patches;
// TestCreatePatch covers empty keys with exact expectations.
var (
	genKeys = []string{"a", "b", "metadata", "annotations", "yunikorn.apache.org/user.info",
		"~", "~1", "a/b", "0", "-", "ключ", "😀", "with space", `q"uote`}
	genNumbers = []string{"0", "-1", "42", "3.14", "1e3", "-0.5E-2", "12345678901234567890",
		"98765432109876543210123", "1.0"}
	genStrings = []string{"", "x", "alice", "<&>", "line\nbreak", "tab\t", "é", "日本語", "🙂",
		`{"user":"alice","groups":["system:authenticated"]}`, "\u2028", "back\\slash"}
)

func (g *docGen) key() string { return genKeys[g.r.IntN(len(genKeys))] }

// container returns a random object (mostly) or array.
func (g *docGen) container(depth int) any {
	if g.r.IntN(8) == 0 {
		return g.array(depth)
	}
	return g.object(depth)
}

func (g *docGen) object(depth int) map[string]any {
	obj := map[string]any{}
	for range g.r.IntN(6) {
		obj[g.key()] = g.value(depth + 1)
	}
	return obj
}

func (g *docGen) array(depth int) []any {
	arr := make([]any, g.r.IntN(5))
	for i := range arr {
		arr[i] = g.value(depth + 1)
	}
	return arr
}

// value returns a random value; deeper levels favour scalars.
func (g *docGen) value(depth int) any {
	n := g.r.IntN(10)
	if depth < 4 && n < 2 {
		return g.object(depth)
	}
	if depth < 4 && n < 4 {
		return g.array(depth)
	}
	switch g.r.IntN(5) {
	case 0:
		return nil
	case 1:
		return g.r.IntN(2) == 0
	case 2:
		return json.Number(genNumbers[g.r.IntN(len(genNumbers))])
	default:
		return genStrings[g.r.IntN(len(genStrings))]
	}
}

// mutate returns a copy of v with random edits: values replaced, keys added
// and removed, arrays grown and shrunk, and subtrees edited recursively.
func (g *docGen) mutate(v any, depth int) any {
	if g.r.IntN(12) == 0 {
		if depth == 0 {
			// evanphx/json-patch only patches object and array documents.
			return g.container(depth)
		}
		return g.value(depth)
	}
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		// Sorted, so that the random draws do not depend on map order.
		for _, k := range slices.Sorted(maps.Keys(t)) {
			child := t[k]
			switch g.r.IntN(6) {
			case 0: // removed
			case 1, 2:
				out[k] = g.mutate(child, depth+1)
			default:
				out[k] = child
			}
		}
		for range g.r.IntN(3) {
			out[g.key()] = g.value(depth + 1)
		}
		return out
	case []any:
		out := make([]any, 0, len(t)+2)
		for _, child := range t {
			if g.r.IntN(3) == 0 {
				out = append(out, g.mutate(child, depth+1))
			} else {
				out = append(out, child)
			}
		}
		if len(out) > 0 && g.r.IntN(3) == 0 {
			out = out[:g.r.IntN(len(out))]
		}
		for range g.r.IntN(3) {
			out = append(out, g.value(depth+1))
		}
		return out
	default:
		return v
	}
}

// encode writes v as JSON, with random indentation so that layout differs
// between documents.
func (g *docGen) encode(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(g.r.IntN(2) == 0)
	if g.r.IntN(2) == 0 {
		enc.SetIndent("", strings.Repeat(" ", g.r.IntN(3)))
	}
	if err := enc.Encode(v); err != nil {
		panic("encode generated document: " + err.Error())
	}
	return buf.Bytes()
}

func TestDocGen_deterministic(t *testing.T) {
	t.Parallel()
	// The property test is only reproducible if generation is.
	gen := func() string {
		g := &docGen{r: rand.New(rand.NewPCG(1, 2))}
		var out []string
		for range 20 {
			out = append(out, string(g.encode(g.mutate(g.container(0), 0))))
		}
		return strconv.Quote(strings.Join(out, ""))
	}
	assert.Equal(t, gen(), gen())
}

// hugeAnnotations is a Pod with n annotations, the shape of the largest
// object a user can send through the API server, and the same Pod with one
// annotation added at the end, as the policy adds user.info.
func hugeAnnotations(n int) (original, mutated []byte) {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"v"`, i)
	}
	head := b.String()
	tail := `}},"spec":{"containers":[{"name":"c","image":"i"}]}}`
	return []byte(head + tail), []byte(head + `,"yunikorn.apache.org/user.info":"{}"` + tail)
}

func TestCreatePatch_hugeObjectIsLinear(t *testing.T) {
	t.Parallel()
	original, mutated := hugeAnnotations(200_000)
	patch, err := CreatePatch(original, mutated)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"op":"add","path":"/metadata/annotations/yunikorn.apache.org~1user.info","value":"{}"}]`, string(patch))
}

func TestDiffDocuments_stopsAtDeadline(t *testing.T) {
	t.Parallel()
	original, mutated := hugeAnnotations(50_000)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := diffDocuments(ctx, original, mutated)
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "create patch")
}

func TestCreatePatch_duplicateOutsideTheChange(t *testing.T) {
	t.Parallel()
	// The members that differ are in the middle; the duplicate of one of
	// them sits in the unchanged prefix, and still is refused: under
	// encoding/json's last-wins reading, removing the second "k" would not
	// give the mutated document's k=1.
	_, err := CreatePatch([]byte(`{"k":1,"x":2,"k":3}`), []byte(`{"k":1,"x":2}`))
	assert.ErrorContains(t, err, `duplicate key "k"`)
	_, err = CreatePatch([]byte(`{"k":1,"x":2}`), []byte(`{"k":1,"x":2,"k":3}`))
	assert.ErrorContains(t, err, `duplicate key "k"`)
}

// BenchmarkCreatePatch_hugeAnnotations: a Pod with 200,000 annotations
// (2.5 MB) gets one more.
func BenchmarkCreatePatch_hugeAnnotations(b *testing.B) {
	original, mutated := hugeAnnotations(200_000)
	b.SetBytes(int64(len(original)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CreatePatch(original, mutated); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCanonical: a value the differ copies as it is (canonical) is exactly
// what decoding and writing it again would give.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`"a"`, `{"yunikorn.apache.org/user.info":"{\"user\":\"alice\"}"}`, `{"a":{"b":[1,2,{"c":null}]}}`,
		`[true,false,-1.5e3]`, `"a\\b"`, `"\u00e9"`, `{"a":1,"a":2}`, `"<&>"`, `{"a" :1}`, `"\/"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) || !canonical(s) {
			return
		}
		n, err := parseAt([]byte(s), "")
		require.NoError(t, err, "%s", s)
		var buf bytes.Buffer
		writeNode(&buf, n)
		assert.Equal(t, s, buf.String())
	})
}
