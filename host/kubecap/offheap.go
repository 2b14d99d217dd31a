package kubecap

import (
	"sync"
	"sync/atomic"
)

// offHeapBytes is the memory the watch caches hold outside the Go heap.
var offHeapBytes atomic.Int64

var (
	offHeapHookMu sync.Mutex
	offHeapHook   func(total int64)
)

// OffHeapBytes is the memory the watch caches of this process hold
// outside the Go heap (the kept JSON of their objects): memory the Go
// runtime's soft limit (GOMEMLIMIT) does not count.
func OffHeapBytes() int64 { return offHeapBytes.Load() }

// OnOffHeapChange sets f to be called with OffHeapBytes each time it
// changes (a chunk of 256 KiB mapped or unmapped), so that a soft memory
// limit can leave room for it. f must not block; nil removes it.
func OnOffHeapChange(f func(total int64)) {
	offHeapHookMu.Lock()
	defer offHeapHookMu.Unlock()
	offHeapHook = f
}

func addOffHeap(n int64) {
	total := offHeapBytes.Add(n)
	offHeapHookMu.Lock()
	f := offHeapHook
	offHeapHookMu.Unlock()
	if f != nil {
		f(total)
	}
}
