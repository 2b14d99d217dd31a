// Package leb128 encodes and decodes the LEB128 integers of the WebAssembly
// binary format, for the host's two readers and writers of modules
// (host/metadata's custom sections, host/engine's budget rewriter).
package leb128

import "errors"

// DecodeU32 reads an unsigned LEB128 u32 from the start of b, as the wasm
// spec defines it: at most five bytes, the unused high bits of the fifth
// zero. Non-minimal (padded) encodings are valid wasm and accepted. It
// returns the value and the number of bytes read.
func DecodeU32(b []byte) (uint32, int, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0, errors.New("unexpected end of input in LEB128 integer")
		}
		c := b[i]
		if i == 4 && c&0xf0 != 0 {
			return 0, 0, errors.New("LEB128 integer overflows 32 bits")
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	// Not reached: a fifth byte that continues fails the overflow check.
	return 0, 0, errors.New("LEB128 integer longer than 5 bytes")
}

// AppendU32 appends the minimal unsigned LEB128 encoding of v to b.
func AppendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendS64 appends the minimal signed LEB128 encoding of v to b.
func AppendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
