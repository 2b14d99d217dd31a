// Package metadata reads, validates and writes Kubewarden policy metadata:
// the metadata.yml file a policy author maintains, and the compact JSON copy
// of it that `kwctl annotate` stores in the `io.kubewarden.metadata` custom
// section of the policy's WebAssembly module.
//
// It also holds the two WebAssembly binary helpers this needs,
// [ReadCustomSection] and [SetCustomSection]. They are written by hand
// against the binary format (magic, version, then sections of id + LEB128
// size) so the host does not need a wasm rewriting library for one section.
//
// See https://docs.kubewarden.io/reference/policy-metadata and
// https://webassembly.github.io/spec/core/binary/modules.html#custom-section
package metadata
