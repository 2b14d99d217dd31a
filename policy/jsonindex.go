package main

import (
	"sync"
	"unsafe"

	"github.com/tidwall/gjson"
)

// jsonIndex is what one pass over a JSON document learns: whether it is
// valid JSON (RFC 8259, as Go's encoding/json accepts it) nested at most a
// given depth, and where each of its objects and arrays ends. With the ends
// known, reading a member of an object skips its siblings' values in one
// step instead of scanning them: a Pod's spec is most of its bytes, and
// before the index every level the policy read (the payload, the request,
// the object, its metadata) scanned it again, in Wasm at several times the
// native cost per byte (docs/PERFORMANCE.md).
type jsonIndex struct {
	starts []int32 // offset of each '{' and '[', in document order
	ends   []int32 // ends[i]: offset just past the bracket closing starts[i]
	open   []int32 // while scanning: indexes into starts of the open containers
}

// whitespace and stringSafe are byte classes of the scan: JSON's four
// whitespace bytes, and the bytes a string may hold as they are (not a
// quote, a backslash or a control character).
var whitespace, stringSafe [256]bool

func init() {
	for _, c := range []byte(" \t\n\r") {
		whitespace[c] = true
	}
	for c := 0x20; c < 256; c++ {
		stringSafe[c] = c != '"' && c != '\\'
	}
}

// scan indexes s, a whole document (surrounding whitespace allowed). It
// reports false when s is not valid JSON or nests more than maxDepth
// levels; the caller then finds out which (tooDeep, which names where). The
// buffers are reused from call to call.
func (ix *jsonIndex) scan(s string, maxDepth int) bool {
	ix.starts, ix.ends, ix.open = ix.starts[:0], ix.ends[:0], ix.open[:0]
	if len(s) > 1<<31-1 {
		return false
	}
	i := skipSpace(s, 0)
	for {
		// A value starts at i.
		if i >= len(s) {
			return false
		}
		switch c := s[i]; c {
		case '{', '[':
			if len(ix.open) >= maxDepth {
				return false
			}
			ix.push(i)
			i = skipSpace(s, i+1)
			if i < len(s) && s[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				i = ix.close(i)
				goto next
			}
			if c == '{' {
				if i = memberKey(s, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			if i = stringEnd(s, i); i < 0 {
				return false
			}
		case 't':
			if i = literal(s, i, "true"); i < 0 {
				return false
			}
		case 'f':
			if i = literal(s, i, "false"); i < 0 {
				return false
			}
		case 'n':
			if i = literal(s, i, "null"); i < 0 {
				return false
			}
		default:
			if i = numberEnd(s, i); i < 0 {
				return false
			}
		}
	next:
		// A value ended at i: what follows is a comma, the close of its
		// container, or (at the top) the end of the document.
		for {
			i = skipSpace(s, i)
			if len(ix.open) == 0 {
				return i == len(s)
			}
			if i >= len(s) {
				return false
			}
			inObject := s[ix.starts[ix.open[len(ix.open)-1]]] == '{'
			switch s[i] {
			case ',':
				i = skipSpace(s, i+1)
				if inObject {
					if i = memberKey(s, i); i < 0 {
						return false
					}
				}
			case '}':
				if !inObject {
					return false
				}
				i = ix.close(i)
				continue
			case ']':
				if inObject {
					return false
				}
				i = ix.close(i)
				continue
			default:
				return false
			}
			break
		}
	}
}

// push records a container opening at i. The buffers grow by hand:
// TinyGo's append is a call into its runtime, and this is the scan's
// innermost step.
func (ix *jsonIndex) push(i int) {
	n, d := len(ix.starts), len(ix.open)
	if n == cap(ix.starts) {
		c := max(2*n, 64)
		ix.starts = append(make([]int32, 0, c), ix.starts...)
		ix.ends = append(make([]int32, 0, c), ix.ends...)
	}
	if d == cap(ix.open) {
		ix.open = append(make([]int32, 0, max(2*d, 16)), ix.open...)
	}
	ix.open = ix.open[:d+1]
	ix.open[d] = int32(n)
	ix.starts, ix.ends = ix.starts[:n+1], ix.ends[:n+1]
	ix.starts[n], ix.ends[n] = int32(i), 0
}

// close records that the innermost open container ends with the bracket at
// i, and returns the offset after it.
func (ix *jsonIndex) close(i int) int {
	n := len(ix.open) - 1
	ix.ends[ix.open[n]] = int32(i + 1)
	ix.open = ix.open[:n]
	return i + 1
}

// end returns the offset just past the object or array that starts at
// offset start, or -1 when no container starts there.
func (ix *jsonIndex) end(start int) int {
	lo, hi := 0, len(ix.starts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int(ix.starts[m]) < start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(ix.starts) && int(ix.starts[lo]) == start {
		return int(ix.ends[lo])
	}
	return -1
}

func skipSpace(s string, i int) int {
	for i < len(s) && whitespace[s[i]] {
		i++
	}
	return i
}

// memberKey reads an object member's key and its colon at i, and returns
// where the value starts, or -1.
func memberKey(s string, i int) int {
	if i >= len(s) || s[i] != '"' {
		return -1
	}
	if i = stringEnd(s, i); i < 0 {
		return -1
	}
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != ':' {
		return -1
	}
	return skipSpace(s, i+1)
}

// stringEnd returns the offset past the string literal that opens at i,
// checking its escapes, or -1.
func stringEnd(s string, i int) int {
	for i++; i < len(s); i++ {
		c := s[i]
		if stringSafe[c] {
			continue
		}
		switch c {
		case '"':
			return i + 1
		case '\\':
			i++
			if i >= len(s) {
				return -1
			}
			switch s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) {
					return -1
				}
				i += 4
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
	return -1
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func literal(s string, i int, word string) int {
	if len(s)-i < len(word) || s[i:i+len(word)] != word {
		return -1
	}
	return i + len(word)
}

// numberEnd returns the offset past the number at i, or -1: an optional
// minus, an integer part without leading zeros, an optional fraction and
// an optional exponent.
func numberEnd(s string, i int) int {
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i++; i < len(s) && isDigit(s[i]); i++ {
		}
	default:
		return -1
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return -1
		}
		for i++; i < len(s) && isDigit(s[i]); i++ {
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return -1
		}
		for i++; i < len(s) && isDigit(s[i]); i++ {
		}
	}
	return i
}

// indexed is the document being evaluated and its index. Members of
// objects inside it are read through the index; any other JSON (settings,
// capability answers) is read by gjson alone. The guest runs one call at a
// time; the mutex keeps concurrent native callers (tests) apart, and is
// held from the scan until the answer is written.
var indexed documentIndex

type documentIndex struct {
	sync.Mutex
	doc string
	ix  jsonIndex
}

// index scans doc and, when it is valid and nested at most maxDepth
// levels, makes it the indexed document until release. It reports whether
// it did.
func (d *documentIndex) index(doc string, maxDepth int) bool {
	d.doc = ""
	if !d.ix.scan(doc, maxDepth) {
		return false
	}
	d.doc = doc
	return true
}

// release forgets the document and unlocks: its buffer is reused for the
// next call, so no offset into it may be trusted once this call is over.
func (d *documentIndex) release() {
	d.doc = ""
	d.Unlock()
}

// indexedOffset returns the offset of raw in the indexed document, or -1
// when raw is not a part of it.
func indexedOffset(raw string) int {
	doc := indexed.doc
	if len(doc) == 0 || len(raw) == 0 {
		return -1
	}
	base := uintptr(unsafe.Pointer(unsafe.StringData(doc)))
	p := uintptr(unsafe.Pointer(unsafe.StringData(raw)))
	if p < base || p-base+uintptr(len(raw)) > uintptr(len(doc)) {
		return -1
	}
	return int(p - base)
}

// memberIter reads the members of an object one at a time, without a
// callback: TinyGo moves to the heap whatever a closure captures, and
// reading a member is on every request's path. Inside the indexed document
// a nested value is skipped through the index; elsewhere it is scanned.
// The object must be valid JSON (every caller's input was validated).
type memberIter struct {
	s     string // the object's text
	i     int    // where the next member starts
	off   int    // the object's offset in the indexed document, or -1
	index int    // the object's Index, which the values' Index count from
}

func newMemberIter(obj gjson.Result) memberIter {
	it := memberIter{s: obj.Raw, off: -1, index: obj.Index}
	if len(it.s) == 0 || it.s[0] != '{' {
		it.i = len(it.s)
		return it
	}
	it.off = indexedOffset(obj.Raw)
	it.i = skipSpace(it.s, 1)
	return it
}

// next returns the next member's raw key token and its value, which is
// what gjson's ForEach gives. ok is false at the end of the object.
func (it *memberIter) next() (key string, value gjson.Result, ok bool) {
	s, i := it.s, it.i
	if i >= len(s) || s[i] != '"' {
		return "", gjson.Result{}, false
	}
	k := i
	if i = stringEnd(s, i); i < 0 {
		return "", gjson.Result{}, false
	}
	key = s[k:i]
	i = skipSpace(s, i)
	i = skipSpace(s, i+1) // past the colon
	if i >= len(s) {
		return "", gjson.Result{}, false
	}
	v := i
	switch s[i] {
	case '{', '[':
		if it.off >= 0 {
			i = indexed.ix.end(it.off+i) - it.off
		} else {
			i = containerEnd(s, i)
		}
	case '"':
		i = stringEnd(s, i)
	default:
		for i < len(s) && s[i] != ',' && s[i] != '}' && !whitespace[s[i]] {
			i++
		}
	}
	if i <= v || i > len(s) {
		return "", gjson.Result{}, false
	}
	value = gjson.Parse(s[v:i])
	value.Index = it.index + v
	i = skipSpace(s, i)
	if i < len(s) && s[i] == ',' {
		i = skipSpace(s, i+1)
	}
	it.i = i
	return key, value, true
}

// containerEnd returns the offset past the object or array of valid JSON
// that opens at i, or -1.
func containerEnd(s string, i int) int {
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '"':
			if i = stringEnd(s, i); i < 0 {
				return -1
			}
			i--
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// keyIs reports whether the raw key token rawKey decodes to key.
func keyIs(rawKey, key string) bool {
	body := rawKey[1 : len(rawKey)-1]
	for i := 0; i < len(body); i++ {
		if body[i] == '\\' || body[i] >= 0x80 {
			return decodeJSONString(body) == key
		}
	}
	return body == key
}
