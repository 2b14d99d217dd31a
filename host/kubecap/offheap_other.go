//go:build !unix

package kubecap

// mapChunk allocates on the Go heap where anonymous mappings are not
// available.
func mapChunk(size int) ([]byte, error) { return make([]byte, 0, size), nil }

const offHeap = false

func unmapChunk([]byte) {}
