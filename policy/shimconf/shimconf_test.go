package shimconf

import (
	"bytes"
	"compress/gzip"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cm is a ConfigMap for the tests; binary keys are given in order.
type cm struct {
	data   map[string]string
	binary [][2]string
}

func (c cm) Data(key string) (string, bool) {
	v, ok := c.data[key]
	return v, ok
}

func (c cm) EachBinary(f func(key string, value func() ([]byte, error)) bool) {
	for _, kv := range c.binary {
		v := kv[1]
		if !f(kv[0], func() ([]byte, error) { return []byte(v), nil }) {
			return
		}
	}
}

func gz(t *testing.T, text string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write([]byte(text))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.String()
}

// TestBinaryKey: the key the shim's Decompress files a binaryData key under.
func TestBinaryKey(t *testing.T) {
	for key, want := range map[string]struct {
		stripped string
		gz       bool
	}{
		"queues.yaml.gz":  {"queues.yaml", true},
		"queues.yaml.GZ":  {"queues.yaml", true},
		"queues.yaml.bz2": {"queues.yaml", false},
		"queues.yaml":     {"queues", false},
		"gz":              {"gz", true},
		"nodot":           {"nodot", false},
		"a..gz":           {"a.", true},
	} {
		stripped, gz := BinaryKey(key)
		assert.Equal(t, want.stripped, stripped, key)
		assert.Equal(t, want.gz, gz, key)
	}
}

// TestLookup: configs over defaults, binaryData over data, a .gz value
// inflated, another suffix empty, a value that does not inflate filed
// under the empty key, a value past the bound not read.
func TestLookup(t *testing.T) {
	defaults := cm{data: map[string]string{"a": "d-a", "b": "d-b", "c": "d-c"}}
	configs := cm{data: map[string]string{"a": "c-a", "e": "c-e"},
		binary: [][2]string{{"b.gz", gz(t, "c-b")}, {"c.raw", "ignored"}, {"e.gz", "not gzip"}}}
	maps := []ConfigMap{defaults, configs}
	for key, want := range map[string]Value{
		"a": {Text: "c-a", Set: true, Map: 1},
		"b": {Text: "c-b", Set: true, Map: 1, Binary: "b.gz"},
		"c": {Text: "", Set: true, Map: 1, Binary: "c.raw"},
		// e.gz does not inflate: it sets "", and e keeps its data.
		"e": {Text: "c-e", Set: true, Map: 1},
		"":  {Text: "", Set: true, Map: 1, Binary: "e.gz"},
		"f": {},
	} {
		got, err := Lookup(maps, key)
		require.NoError(t, err, key)
		assert.Equal(t, want, got, key)
	}
	got, err := Lookup([]ConfigMap{defaults, nil}, "a")
	require.NoError(t, err)
	assert.Equal(t, Value{Text: "d-a", Set: true}, got)

	bomb := gz(t, string(bytes.Repeat([]byte("#"), MaxInflated+1)))
	_, err = Inflate([]byte(bomb))
	assert.ErrorIs(t, err, ErrTooLarge)
	big := cm{binary: [][2]string{{"q.yaml.gz", bomb}}}
	_, err = Lookup([]ConfigMap{defaults, big}, "q.yaml")
	var tl *TooLargeError
	require.ErrorAs(t, err, &tl)
	assert.Equal(t, &TooLargeError{Map: 1, Key: "q.yaml.gz"}, tl)
	assert.True(t, errors.Is(err, ErrTooLarge))
	assert.EqualError(t, err, "binaryData q.yaml.gz inflates to more than 16 MiB")
	// Another key is read as if the large value were not there.
	got, err = Lookup([]ConfigMap{defaults, big}, "a")
	require.NoError(t, err)
	assert.Equal(t, Value{Text: "d-a", Set: true}, got)
}
