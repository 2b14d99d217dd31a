package main

import (
	"sync"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/jsonindex"
	"github.com/yunikorn-userinfo/userinfo/policy/jsonx"
)

// indexed is the payload being evaluated and its index (one pass validates
// it, bounds its depth and records where each object and array ends).
// Members of objects inside it are read through the index; any other JSON
// (settings, capability answers) is scanned. The guest runs one call at a
// time; the mutex keeps concurrent native callers (tests) apart, and is
// held from the scan until the answer is written.
var indexed documentIndex

type documentIndex struct {
	sync.Mutex
	doc string
	ix  jsonindex.Index
	// metas are the podMetas of this evaluation (a workload kind has one
	// per template), kept from call to call instead of allocated anew;
	// past them, they come podMetaChunk at a time from chunk.
	metas  [8]podMeta
	nMetas int
	chunk  *[podMetaChunk]podMeta
	nChunk int
}

// podMetaChunk is how many podMetas are allocated together once the kept
// ones are used: one allocation per template made ten thousand small
// objects for the collector to find room for and sweep. A pointer to one
// costs the collector a walk back to its chunk's start, so chunks stay
// small.
const podMetaChunk = 32

// newPodMeta returns a zeroed podMeta: during an evaluation one of the
// kept ones or of the current chunk, outside of one (tests) a new one.
func newPodMeta() *podMeta {
	d := &indexed
	if d.doc == "" {
		return &podMeta{}
	}
	if d.nMetas < len(d.metas) {
		pm := &d.metas[d.nMetas]
		d.nMetas++
		*pm = podMeta{}
		return pm
	}
	if d.chunk == nil || d.nChunk == len(d.chunk) {
		d.chunk, d.nChunk = new([podMetaChunk]podMeta), 0
	}
	pm := &d.chunk[d.nChunk]
	d.nChunk++
	return pm
}

// index scans doc and, when it is valid and nested at most maxDepth
// levels, makes it the indexed document until release. It reports whether
// it did.
func (d *documentIndex) index(doc string, maxDepth int) bool {
	d.doc, d.nMetas, d.chunk = "", 0, nil
	if !d.ix.Scan(doc, maxDepth) {
		return false
	}
	d.doc = doc
	return true
}

// release forgets the document and unlocks: its buffer is reused for the
// next call, so no offset into it may be trusted once this call is over.
func (d *documentIndex) release() {
	d.doc, d.chunk = "", nil
	d.Unlock()
}

// memberIter reads the members of an object one at a time, as gjson
// values, through the payload's index when the object is a part of it.
type memberIter struct {
	m     jsonindex.Members
	index int // the object's Index, which the values' Index count from
}

func newMemberIter(obj gjson.Result) memberIter {
	var ix *jsonindex.Index
	off := jsonindex.Offset(indexed.doc, obj.Raw)
	if off >= 0 {
		ix = &indexed.ix
	}
	return memberIter{m: jsonindex.NewMembers(obj.Raw, ix, off), index: obj.Index}
}

// next returns the next member's raw key token and raw value, and where
// the value starts in the object. ok is false at the end of the object.
func (it *memberIter) next() (key, raw string, at int, ok bool) { return it.m.Next() }

// value is the member value raw found at at, as gjson's ForEach gives it.
// It is built only for the members a caller keeps: gjson decodes a string
// with escapes into a new one.
func (it *memberIter) value(raw string, at int) gjson.Result {
	v := gjson.Parse(raw)
	v.Index = it.index + at
	return v
}

// plainKey returns the key the raw key token rawKey spells (jsonx.Key).
func plainKey(rawKey string) string { return jsonx.Key(rawKey) }
