//go:build !tinygo.wasm

package main

// main does nothing natively: the package is built natively for its tests,
// which call the operations directly.
func main() {}
