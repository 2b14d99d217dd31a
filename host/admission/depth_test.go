package admission

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckDepth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		limit int
		ok    bool
	}{
		{name: "flat", in: `{"a":1}`, limit: 1, ok: true},
		{name: "at the limit", in: `{"a":[{"b":[]}]}`, limit: 4, ok: true},
		{name: "over the limit", in: `{"a":[{"b":[[]]}]}`, limit: 4},
		{name: "brackets in strings do not count", in: `{"a":"[[[[{{{{"}`, limit: 1, ok: true},
		{name: "escaped quote keeps the string open", in: `{"a":"\"[[[["}`, limit: 1, ok: true},
		{name: "escaped backslash closes the string", in: `{"a":"\\"}`, limit: 1, ok: true},
		{name: "siblings do not add up", in: `[[],[],[],[]]`, limit: 2, ok: true},
		{name: "deep array", in: strings.Repeat("[", 600) + strings.Repeat("]", 600), limit: 512},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckDepth([]byte(tc.in), tc.limit)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, "JSON nests deeper than")
			}
		})
	}
}

// checkDepthByByte is the plain byte-by-byte scan that CheckDepth speeds
// up; the fuzz target holds them to the same answers.
func checkDepthByByte(data []byte, limit int) bool {
	depth, inString := 0, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > limit {
				return false
			}
		case '}', ']':
			depth--
		}
	}
	return true
}

func FuzzCheckDepth(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"c\"[[["}]}`, `"\\\\"[[`, `["\\"]`, `[[["\\\"[[["]]]`, `"unterminated [[[`, `{}`} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		limit = limit%8 + 1
		if limit < 1 {
			limit += 8
		}
		want := checkDepthByByte(data, limit)
		got := CheckDepth(data, limit) == nil
		if got != want {
			t.Fatalf("CheckDepth(%q, %d) ok=%v, byte-by-byte scan ok=%v", data, limit, got, want)
		}
	})
}
