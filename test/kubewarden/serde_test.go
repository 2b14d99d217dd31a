package kubewarden

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestPayload: the validate payload is what policy-evaluator builds
// with json!({"request": request, "settings": settings}): the typed
// request's fields only, null optionals dropped, keys sorted at every
// level, the last of duplicate keys, numbers as serde_json writes them.
func TestRequestPayload(t *testing.T) {
	request := `{"uid":"u1","kind":{"kind":"Pod","version":"v1","group":"","extra":1},` +
		`"resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE",` +
		`"userInfo":{"username":"alice","groups":["dev"],"uid":null,"unknown":true},` +
		`"name":null,"oldObject":null,"unknownField":{"a":1},` +
		`"object":{"z":1,"a":{"y":1.50,"x":1e2,"w":-0,"v":18446744073709551616},"dup":1,"dup":"last","s":"<\u00e9\u2028\n\u0001>"}}`
	raw, err := parse([]byte(request), 1)
	require.NoError(t, err)
	req, err := typedRequest(raw)
	require.NoError(t, err)
	got := string(encodeJSON(map[string]any{"settings": map[string]any{}, "request": req}))
	want := `{"request":{"kind":{"group":"","kind":"Pod","version":"v1"},` +
		`"object":{"a":{"v":1.8446744073709552e19,"w":-0.0,"x":100.0,"y":1.5},"dup":"last","s":"<é` + "\u2028" + `\n\u0001>","z":1},` +
		`"operation":"CREATE","resource":{"group":"","resource":"pods","version":"v1"},` +
		`"uid":"u1","userInfo":{"groups":["dev"],"username":"alice"}},"settings":{}}`
	assert.Equal(t, want, got)
}

func TestRyu(t *testing.T) {
	for in, want := range map[float64]string{
		1: "1.0", 1.5: "1.5", 100: "100.0", 1e15: "1000000000000000.0", 1e16: "1e16", 1e-6: "1e-6",
		1.25e17: "1.25e17", 0.1: "0.1", 0.0001: "0.0001", 0.00001: "0.00001", 1.5e-7: "1.5e-7",
		-2.5: "-2.5", 123456.789: "123456.789",
	} {
		assert.Equal(t, want, ryu(in), "%v", in)
	}
}

// TestParse_refused: what serde_json refuses, policy-server refuses before
// any policy runs.
func TestParse_refused(t *testing.T) {
	for name, doc := range map[string]string{
		"lone high surrogate": `{"a":"\ud800"}`,
		"lone low surrogate":  `{"a":"\udc00x"}`,
		"high then not low":   `{"a":"\ud800\u0041"}`,
		"invalid UTF-8":       "{\"a\":\"\xff\"}",
		"128 levels":          strings.Repeat("[", 128) + strings.Repeat("]", 128),
		"number beyond f64":   `{"a":1e400}`,
		"trailing data":       `{"a":1} {}`,
	} {
		_, err := parse([]byte(doc), 0)
		assert.ErrorIs(t, err, errUnparseable, name)
	}
	_, err := parse([]byte(strings.Repeat("[", 127)+strings.Repeat("]", 127)), 0)
	assert.NoError(t, err, "127 levels parse")
	v, err := parse([]byte(`{"a":"\ud83d\ude00"}`), 0)
	require.NoError(t, err, "a surrogate pair is one character")
	assert.Equal(t, map[string]any{"a": "😀"}, v)
}

// TestDiff follows the json-patch crate's algorithm: keys in sorted order,
// adds and replaces before removes, arrays by index (removals at the
// shrinking end), no moves.
func TestDiff(t *testing.T) {
	for _, tc := range []struct{ left, right, want string }{
		{`{"a":1}`, `{"a":1}`, `[]`},
		{`{"b":1,"a":{"x":[1,2,3]}}`, `{"c":2,"a":{"x":[1,5]}}`,
			`[{"op":"replace","path":"/a/x/1","value":5},{"op":"remove","path":"/a/x/2"},{"op":"add","path":"/c","value":2},{"op":"remove","path":"/b"}]`},
		{`[1,2,3,4]`, `[1]`, `[{"op":"remove","path":"/1"},{"op":"remove","path":"/1"},{"op":"remove","path":"/1"}]`},
		{`{"m":{"a/b~c":1}}`, `{"m":{"a/b~c":2}}`, `[{"op":"replace","path":"/m/a~1b~0c","value":2}]`},
		{`{"a":1}`, `{"a":1.0}`, `[{"op":"replace","path":"/a","value":1.0}]`},
		{`{"a":null}`, `{"a":{"k":"v"}}`, `[{"op":"replace","path":"/a","value":{"k":"v"}}]`},
		{`{"a":[]}`, `{"a":[{"z":1,"y":2}]}`, `[{"op":"add","path":"/a/0","value":{"y":2,"z":1}}]`},
	} {
		l, err := parse([]byte(tc.left), 0)
		require.NoError(t, err)
		r, err := parse([]byte(tc.right), 0)
		require.NoError(t, err)
		got := encodePatch(diff(l, r))
		assert.JSONEq(t, tc.want, string(got), "%s -> %s", tc.left, tc.right)
		assert.Equal(t, tc.want, string(got), "%s -> %s", tc.left, tc.right)
		assert.True(t, json.Valid(got))
	}
}
