package main

import _ "embed"

// embeddedPolicy is the yunikorn-user-info policy module, annotated with its
// metadata, that commands use when no MODULE argument is given.
//
//go:embed policy.wasm
var embeddedPolicy []byte
