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
