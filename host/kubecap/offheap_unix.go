//go:build unix

package kubecap

import (
	"fmt"
	"syscall"
)

// mapChunk maps size bytes of anonymous memory outside the Go heap: the
// collector neither scans nor counts them, so the bytes a watch cache
// keeps do not raise the heap size at which the next collection runs (by
// default twice what is live: the cache would cost its size again in
// headroom). They are given back by unmapChunk, when nothing refers to
// them: the store hands out copies only.
func mapChunk(size int) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("watch cache: map %d bytes: %w", size, err)
	}
	return b[:0], nil
}

const offHeap = true

func unmapChunk(b []byte) {
	_ = syscall.Munmap(b[:cap(b)])
}
