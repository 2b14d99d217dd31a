package kubecap

import (
	"math"
	"sync/atomic"
)

// arena packs byte strings (the kept JSON of cached objects) into chunks
// of arenaChunkSize, so that a hundred thousand objects are a few hundred
// allocations rather than a hundred thousand, each rounded up to a size
// class and scattered among the garbage of the sync. The chunks are
// mapped outside the Go heap (mapChunk), so their bytes are counted once
// in the process's memory, not again in the collector's headroom. Bytes
// released are reclaimed by moving the objects of mostly empty chunks
// into new ones once the waste outweighs half the bytes in use
// (objectStore.compact); a chunk with nothing left is unmapped at once.
// So no slice of a chunk may outlive the lock: objectStore hands out
// copies. Not safe for concurrent use: objectStore's lock guards it.
type arena struct {
	chunks  []*arenaChunk // by id; nil: free id
	freeIDs []uint32
	cur     *arenaChunk // appended to; nil: none yet
	curID   uint32
	used    int             // bytes of the objects held
	waste   int             // bytes released in chunks still held
	moving  map[uint32]bool // chunks being emptied by a compaction
	// compactions counts them, mapped the bytes mapped, released whether
	// close ran (for tests).
	compactions int
	mapped      int64
	released    atomic.Bool
}

type arenaChunk struct {
	buf    []byte
	live   int  // bytes of objects held in buf
	mapped bool // buf is outside the Go heap (mapChunk)
}

// arenaRef locates one byte string.
type arenaRef struct{ chunk, off, n uint32 }

const (
	// arenaChunkSize is the size of a shared chunk.
	arenaChunkSize = 256 << 10
	// arenaOwnChunk: a string longer than this gets a chunk of its own,
	// dropped with it.
	arenaOwnChunk = arenaChunkSize / 8
	// arenaMinWaste: below this much waste no compaction runs.
	arenaMinWaste = 1 << 20
	noChunk       = math.MaxUint32
)

// newChunk makes a chunk of size bytes: a shared chunk outside the Go
// heap where it can be (mapChunk), a string's own on the heap (a mapping
// per large string could run into the kernel's limit on mappings).
func (a *arena) newChunk(size int) (uint32, *arenaChunk) {
	c := &arenaChunk{}
	if size == arenaChunkSize && offHeap {
		if b, err := mapChunk(size); err == nil {
			c.buf, c.mapped = b, true
			a.mapped += int64(size)
			addOffHeap(int64(size))
		}
	}
	if c.buf == nil {
		c.buf = make([]byte, 0, size)
	}
	if n := len(a.freeIDs); n > 0 {
		id := a.freeIDs[n-1]
		a.freeIDs = a.freeIDs[:n-1]
		a.chunks[id] = c
		return id, c
	}
	a.chunks = append(a.chunks, c)
	return uint32(len(a.chunks) - 1), c
}

// put copies b into the arena.
func (a *arena) put(b []byte) arenaRef {
	a.used += len(b)
	return a.place(b)
}

func (a *arena) place(b []byte) arenaRef {
	n := len(b)
	if n == 0 {
		return arenaRef{chunk: noChunk}
	}
	if n > arenaOwnChunk {
		id, c := a.newChunk(n)
		c.buf = append(c.buf, b...)
		c.live = n
		return arenaRef{chunk: id, n: uint32(n)}
	}
	if a.cur == nil || len(a.cur.buf)+n > cap(a.cur.buf) {
		a.curID, a.cur = a.newChunk(arenaChunkSize)
	}
	off := len(a.cur.buf)
	a.cur.buf = append(a.cur.buf, b...)
	a.cur.live += n
	return arenaRef{chunk: a.curID, off: uint32(off), n: uint32(n)}
}

// bytes is the string r locates, valid until the next change to the
// arena; its capacity ends with it, so an append to it copies rather than
// writing into the arena.
func (a *arena) bytes(r arenaRef) []byte {
	if r.n == 0 {
		return []byte{}
	}
	end := r.off + r.n
	return a.chunks[r.chunk].buf[r.off:end:end]
}

// release gives back the bytes of r.
func (a *arena) release(r arenaRef) {
	if r.n == 0 {
		return
	}
	a.used -= int(r.n)
	c := a.chunks[r.chunk]
	c.live -= int(r.n)
	a.waste += int(r.n)
	if c.live == 0 && c != a.cur {
		a.drop(r.chunk)
	}
}

func (a *arena) drop(id uint32) {
	c := a.chunks[id]
	a.waste -= len(c.buf) - c.live
	a.chunks[id] = nil
	a.freeIDs = append(a.freeIDs, id)
	a.free(c)
}

func (a *arena) free(c *arenaChunk) {
	if c.mapped {
		unmapChunk(c.buf)
		a.mapped -= int64(cap(c.buf))
		addOffHeap(-int64(cap(c.buf)))
		c.mapped = false
	}
	c.buf = nil
}

// release gives back every chunk; the arena is empty after.
func (a *arena) close() {
	for _, c := range a.chunks {
		if c != nil {
			a.free(c)
		}
	}
	a.chunks, a.freeIDs, a.cur, a.curID, a.used, a.waste, a.moving = nil, nil, nil, 0, 0, 0, nil
	a.released.Store(true)
}

// wasteful reports whether a compaction is due.
func (a *arena) wasteful() bool { return a.waste > arenaMinWaste && a.waste > a.used/2 }

// startCompaction picks the chunks less than three quarters full to be
// emptied; move then relocates each string, and endCompaction drops them.
// A chunk kept wastes at most a quarter of itself, so after a compaction
// the waste is at most a third of the bytes in use, and at least a sixth
// of them must be released before the next one.
func (a *arena) startCompaction() {
	a.moving = map[uint32]bool{}
	for id, c := range a.chunks {
		if c != nil && c.live*4 < len(c.buf)*3 {
			a.moving[uint32(id)] = true
		}
	}
	a.cur = nil // moved strings go to new chunks
}

// move relocates r if its chunk is being emptied.
func (a *arena) move(r arenaRef) arenaRef {
	if r.n == 0 || !a.moving[r.chunk] {
		return r
	}
	return a.place(a.bytes(r))
}

func (a *arena) endCompaction() {
	for id := range a.moving {
		a.drop(id)
	}
	a.moving = nil
	a.compactions++
}
