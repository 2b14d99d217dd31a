package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/yunikorn-userinfo/userinfo/host/internal/leb128"
)

// wasmHeader is the preamble of every core WebAssembly module: the magic
// "\0asm" followed by binary format version 1 (little-endian u32). Component
// model binaries share the magic but carry another version, and are rejected.
var wasmHeader = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// customSectionID is the section id of custom sections, the only sections a
// module may carry more than once and in any position.
const customSectionID = 0

// ErrNotWasm is returned (wrapped) when the input does not start with the
// core WebAssembly header.
var ErrNotWasm = errors.New("not a WebAssembly module")

// ErrMalformedWasm is returned (wrapped) when the section structure of a
// module is truncated or inconsistent.
var ErrMalformedWasm = errors.New("malformed WebAssembly module")

// section is one section of a module, as spans of the original bytes.
type section struct {
	id byte
	// start is the offset of the id byte, end the offset just past the
	// payload: wasm[start:end] is the whole encoded section.
	start, end int
	// payloadStart is the offset of the first payload byte.
	payloadStart int
	// name is set for custom sections only, contentStart is then the offset
	// of the first byte after the name.
	name         string
	contentStart int
}

// ReadCustomSection returns the content of the first custom section called
// name, and whether there is one. Like Kubewarden's reader, a later section
// with the same name is ignored. The whole module's section structure is
// checked, so truncated or garbage input is an error even when the section
// was found before the damage. The returned bytes are a copy.
func ReadCustomSection(wasm []byte, name string) ([]byte, bool, error) {
	sections, err := parseSections(wasm)
	if err != nil {
		return nil, false, err
	}
	for _, s := range sections {
		if s.id == customSectionID && s.name == name {
			return bytes.Clone(wasm[s.contentStart:s.end]), true, nil
		}
	}
	return nil, false, nil
}

// SetCustomSection returns a copy of wasm in which every custom section called
// name is removed and one new custom section name with content is appended
// at the end of the module. All other sections keep their bytes and order,
// so the result is a deterministic function of the inputs.
func SetCustomSection(wasm []byte, name string, content []byte) ([]byte, error) {
	if !utf8.ValidString(name) {
		return nil, fmt.Errorf("custom section name %q is not valid UTF-8", name)
	}
	sections, err := parseSections(wasm)
	if err != nil {
		return nil, err
	}

	payloadLen := uint64(len(leb128.AppendU32(nil, uint32(len(name))))) + uint64(len(name)) + uint64(len(content))
	if payloadLen > maxU32 {
		return nil, fmt.Errorf("custom section %q is too large: %d bytes", name, payloadLen)
	}

	out := make([]byte, 0, len(wasm)+int(payloadLen)+6)
	out = append(out, wasmHeader...)
	for _, s := range sections {
		if s.id == customSectionID && s.name == name {
			continue
		}
		out = append(out, wasm[s.start:s.end]...)
	}
	out = append(out, customSectionID)
	out = append(out, leb128.AppendU32(nil, uint32(payloadLen))...)
	out = append(out, leb128.AppendU32(nil, uint32(len(name)))...)
	out = append(out, name...)
	out = append(out, content...)
	return out, nil
}

// parseSections checks the header and splits the module into sections. It
// checks only the framing (ids, sizes and custom section names), not the
// contents of the known sections: the compiler does that.
func parseSections(wasm []byte) ([]section, error) {
	if len(wasm) < len(wasmHeader) || !bytes.Equal(wasm[:4], wasmHeader[:4]) {
		return nil, fmt.Errorf("%w: missing \\0asm magic", ErrNotWasm)
	}
	if !bytes.Equal(wasm[4:8], wasmHeader[4:8]) {
		return nil, fmt.Errorf("%w: unsupported binary version % x (only core modules, version 1)", ErrNotWasm, wasm[4:8])
	}

	var sections []section
	off := len(wasmHeader)
	for off < len(wasm) {
		s := section{id: wasm[off], start: off}
		size, n, err := leb128.DecodeU32(wasm[off+1:])
		if err != nil {
			return nil, fmt.Errorf("%w: section %d at offset %d: size: %w", ErrMalformedWasm, s.id, off, err)
		}
		s.payloadStart = off + 1 + n
		s.end = s.payloadStart + int(size)
		if s.end > len(wasm) {
			return nil, fmt.Errorf("%w: section %d at offset %d is truncated: declares %d bytes, %d left",
				ErrMalformedWasm, s.id, off, size, len(wasm)-s.payloadStart)
		}
		if s.id == customSectionID {
			payload := wasm[s.payloadStart:s.end]
			nameLen, n, err := leb128.DecodeU32(payload)
			if err != nil {
				return nil, fmt.Errorf("%w: custom section at offset %d: name length: %w", ErrMalformedWasm, off, err)
			}
			if uint64(n)+uint64(nameLen) > uint64(len(payload)) {
				return nil, fmt.Errorf("%w: custom section at offset %d: name of %d bytes overruns the %d-byte section",
					ErrMalformedWasm, off, nameLen, len(payload))
			}
			name := payload[n : n+int(nameLen)]
			if !utf8.Valid(name) {
				return nil, fmt.Errorf("%w: custom section at offset %d: name is not valid UTF-8", ErrMalformedWasm, off)
			}
			s.name = string(name)
			s.contentStart = s.payloadStart + n + int(nameLen)
		}
		sections = append(sections, s)
		off = s.end
	}
	return sections, nil
}

const maxU32 = 1<<32 - 1
