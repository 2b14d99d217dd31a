package leb128

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestU32(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    uint32
		enc  []byte
	}{
		{name: "zero", v: 0, enc: []byte{0x00}},
		{name: "one byte", v: 127, enc: []byte{0x7f}},
		{name: "two bytes", v: 128, enc: []byte{0x80, 0x01}},
		{name: "spec example", v: 624485, enc: []byte{0xe5, 0x8e, 0x26}},
		{name: "max", v: 1<<32 - 1, enc: []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.enc, AppendU32(nil, tc.v))
			v, n, err := DecodeU32(append(tc.enc, 0xaa))
			require.NoError(t, err)
			assert.Equal(t, tc.v, v)
			assert.Equal(t, len(tc.enc), n)
		})
	}
}

func TestDecodeU32_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []byte
		err  string
	}{
		{name: "empty", in: nil, err: "unexpected end"},
		{name: "truncated", in: []byte{0x80}, err: "unexpected end"},
		{name: "overflow", in: []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, err: "overflows 32 bits"},
		{name: "continues past five bytes", in: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, err: "overflows 32 bits"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := DecodeU32(tc.in)
			assert.ErrorContains(t, err, tc.err)
		})
	}
	v, n, err := DecodeU32([]byte{0x83, 0x80, 0x80, 0x00}) // padded: valid wasm
	require.NoError(t, err)
	assert.Equal(t, uint32(3), v)
	assert.Equal(t, 4, n)
}

func TestAppendS64(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v   int64
		enc []byte
	}{
		{v: 0, enc: []byte{0x00}},
		{v: 1, enc: []byte{0x01}},
		{v: -1, enc: []byte{0x7f}},
		{v: 63, enc: []byte{0x3f}},
		{v: 64, enc: []byte{0xc0, 0x00}},
		{v: -64, enc: []byte{0x40}},
		{v: 65535, enc: []byte{0xff, 0xff, 0x03}},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.enc, AppendS64(nil, tc.v), "%d", tc.v)
	}
}
