package jsonindex

import (
	"encoding/json"
	"math/bits"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScan_acceptsWhatEncodingJSONAccepts(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, ` {"a" : [1, {"b":null}], "c":"\u00e9\"x"} `, `-0.5e+7`, `0`, `"\/\b\f\n\r\t"`, `true`, `[false,null]`,
		`01`, `1.`, `.5`, `-`, `1e`, `+1`, "\"\x01\"", `"\x"`, `"\u12g4"`, `[1,]`, `{"a":}`, `{"a" 1}`, `{,}`, `[1 2]`,
		`tru`, `nul`, `{"a":1}}`, `[`, `]`, ``, ` `, `{"a":1,}`, `"abc`, `{"a":"b"`, "\"\xff\"",
	} {
		var ix Index
		assert.Equal(t, json.Valid([]byte(s)), ix.Scan(s, 8), "%q", s)
	}
}

func TestScan_depth(t *testing.T) {
	var ix Index
	assert.True(t, ix.Scan(strings.Repeat("[", 3)+strings.Repeat("]", 3), 3))
	assert.False(t, ix.Scan(strings.Repeat("[", 4)+strings.Repeat("]", 4), 3))
	assert.False(t, ix.Scan(`{"a":{"b":{"c":{}}}}`, 3))
}

func TestMembers_skipsThroughTheIndex(t *testing.T) {
	doc := `{"meta": {"a": [1, {"x": "}"}], "b": "s\"t"}, "spec": [[], {}], "n": -1.5e3, "z": null}`
	var ix Index
	require.True(t, ix.Scan(doc, 10))
	assert.Equal(t, len(doc), ix.End(0))
	assert.Equal(t, -1, ix.End(1), "no container starts there")

	type member struct{ key, value string }
	want := []member{{`"meta"`, `{"a": [1, {"x": "}"}], "b": "s\"t"}`}, {`"spec"`, `[[], {}]`}, {`"n"`, `-1.5e3`}, {`"z"`, `null`}}
	for _, withIndex := range []bool{true, false} {
		var got []member
		it := NewMembers(doc, &ix, 0)
		if !withIndex {
			it = NewMembers(doc, nil, 0)
		}
		for {
			k, v, at, ok := it.Next()
			if !ok {
				break
			}
			assert.Equal(t, v, doc[at:at+len(v)])
			got = append(got, member{k, v})
		}
		assert.Equal(t, want, got, "with index: %v", withIndex)
	}

	inner := doc[strings.Index(doc, `{"a"`):]
	inner = inner[:strings.Index(inner, `"}, "spec"`)+3]
	it := NewMembers(inner, &ix, Offset(doc, inner))
	k, v, _, ok := it.Next()
	require.True(t, ok)
	assert.Equal(t, `"a"`, k)
	assert.Equal(t, `[1, {"x": "}"}]`, v)
	assert.Equal(t, -1, Offset(doc, "elsewhere"))
}

func TestSpecial8_everyByteAtEveryPlace(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			b := []byte("aaaaaaaa")
			b[pos] = byte(c)
			want := c >= 0x20 && c != '"' && c != '\\'
			m := special8(string(b), 0)
			if got := m == 0; got != want {
				t.Fatalf("special8(%q) = %x, want none: %v", b, m, want)
			}
			if m != 0 && bits.TrailingZeros64(m)>>3 != pos {
				t.Fatalf("special8(%q) = %x: first flagged byte is not %d", b, m, pos)
			}
		}
	}
	// Two special bytes, one lane borrowing from the next.
	assert.Equal(t, 0, bits.TrailingZeros64(special8("\x00\x01aaaaaa", 0))>>3)
	assert.Equal(t, 1, bits.TrailingZeros64(special8("a\"\\aaaaa", 0))>>3)
	assert.Zero(t, special8("\xff\x80\x7f !#[]", 0))
}

func TestMembers_anIndexThatDoesNotKnowTheObjectIsNotTrusted(t *testing.T) {
	doc := `{"a":{"b":[1]},"c":2}`
	var other Index
	require.True(t, other.Scan(`[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]`, 4))
	it := NewMembers(doc, &other, 0) // the index of another document
	var keys []string
	for {
		k, _, _, ok := it.Next()
		if !ok {
			break
		}
		keys = append(keys, k)
	}
	assert.Equal(t, []string{`"a"`, `"c"`}, keys)
}
