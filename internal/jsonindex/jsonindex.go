// Package jsonindex validates a JSON document, bounds its nesting and
// records where each object and array ends, all in one pass; objects are
// then read member by member without scanning the values skipped. The
// policy (compiled by TinyGo, so no reflection, closures or goroutines on
// its path) and the host both read requests through it: before, each level
// read (the review, the request, the object, its metadata) scanned the
// values it skipped over again, and validation and the depth check were
// passes of their own (docs/PERFORMANCE.md).
package jsonindex

import (
	"math/bits"
	"unsafe"
)

// Index is what one pass over a JSON document learns: whether it is valid
// JSON (RFC 8259, as Go's encoding/json accepts it) nested at most a given
// depth, and where each of its objects and arrays ends. With the ends
// known, reading a member of an object skips its siblings' values in one
// step instead of scanning them.
type Index struct {
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

// Scan indexes s, a whole document (surrounding whitespace allowed). It
// reports false when s is not valid JSON or nests more than maxDepth
// levels; the caller then finds out which (with a depth scan that names where). The
// buffers are reused from call to call.
func (ix *Index) Scan(s string, maxDepth int) bool {
	ix.starts, ix.ends, ix.open = ix.starts[:0], ix.ends[:0], ix.open[:0]
	if len(s) > 1<<31-1 {
		return false
	}
	// Kubernetes objects hold an object or array every 23 to 30 bytes (the
	// benchmark fixtures): room for one every 20 means the buffers are
	// allocated once, not grown.
	if want := len(s)/20 + 16; cap(ix.starts) < want {
		ix.starts, ix.ends = make([]int32, 0, want), make([]int32, 0, want)
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
			i++
			if i < len(s) && s[i] <= ' ' {
				i = skipSpace(s, i)
			}
			if i < len(s) && s[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				i = ix.closeAt(i)
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
			if i < len(s) && s[i] <= ' ' {
				i = skipSpace(s, i)
			}
			if len(ix.open) == 0 {
				return i == len(s)
			}
			if i >= len(s) {
				return false
			}
			inObject := s[ix.starts[ix.open[len(ix.open)-1]]] == '{'
			switch s[i] {
			case ',':
				i++
				if i < len(s) && s[i] <= ' ' {
					i = skipSpace(s, i)
				}
				if inObject {
					if i = memberKey(s, i); i < 0 {
						return false
					}
				}
			case '}':
				if !inObject {
					return false
				}
				i = ix.closeAt(i)
				continue
			case ']':
				if inObject {
					return false
				}
				i = ix.closeAt(i)
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
func (ix *Index) push(i int) {
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

// closeAt records that the innermost open container ends with the bracket at
// i, and returns the offset after it.
func (ix *Index) closeAt(i int) int {
	n := len(ix.open) - 1
	ix.ends[ix.open[n]] = int32(i + 1)
	ix.open = ix.open[:n]
	return i + 1
}

// End returns the offset just past the object or array that starts at
// offset start, or -1 when no container starts there.
func (ix *Index) End(start int) int {
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

// skipSpace skips whitespace at i. Callers look at the first byte
// themselves before calling: JSON from the API server has no whitespace,
// and TinyGo, optimizing for size, does not inline the call.
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
	if i < len(s) && s[i] <= ' ' {
		i = skipSpace(s, i)
	}
	if i >= len(s) || s[i] != ':' {
		return -1
	}
	i++
	if i < len(s) && s[i] <= ' ' {
		i = skipSpace(s, i)
	}
	return i
}

// stringEnd returns the offset past the string literal that opens at i,
// checking its escapes, or -1.
func stringEnd(s string, i int) int {
	i++
	for {
		// Eight bytes at a time up to the next byte that needs a look
		// (most of a Kubernetes object is strings), then byte by byte.
		for i+8 <= len(s) {
			if m := special8(s, i); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(s) && stringSafe[s[i]] {
			i++
		}
		if i >= len(s) {
			return -1
		}
		switch s[i] {
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
			i++
		default: // a control character
			return -1
		}
	}
}

// special8 tests the eight bytes of s at i together, as one word: the
// result has the high bit set of each byte that is a quote, a backslash or
// a control character, and may have it set for bytes after such a byte
// too; it is 0 when there is none.
func special8(s string, i int) uint64 {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	b := s[i : i+8]
	w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	quote := w ^ ('"' * ones)
	backslash := w ^ ('\\' * ones)
	// A byte is zero (or below 0x20) where subtracting borrows into its
	// high bit while the byte's own high bit was clear; a borrow only
	// carries upwards, so the lowest byte flagged is a real one.
	return ((quote-ones)&^quote | (backslash-ones)&^backslash | (w-0x20*ones)&^w) & highs
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

// Members reads the members of a JSON object one at a time. It has no
// callback: TinyGo moves to the heap whatever a closure captures. With an
// index, nested values are skipped in one step; without one they are
// scanned. The object must be valid JSON.
type Members struct {
	s   string // the object's text
	i   int    // where the next member starts
	ix  *Index // the index of the document holding the object, or nil
	off int    // the object's offset in that document
}

// NewMembers iterates over obj, a JSON object. ix, if not nil, is the index
// of the document obj is a part of, at offset off.
func NewMembers(obj string, ix *Index, off int) Members {
	m := Members{s: obj, ix: ix, off: off}
	if len(obj) == 0 || obj[0] != '{' {
		m.i = len(obj)
		return m
	}
	m.i = 1
	if m.i < len(obj) && obj[m.i] <= ' ' {
		m.i = skipSpace(obj, m.i)
	}
	return m
}

// Next returns the next member's raw key token (quotes and escapes as
// written) and its raw value, and where the value starts in the object.
// ok is false at the end of the object.
func (m *Members) Next() (key, value string, at int, ok bool) {
	s, i := m.s, m.i
	if i >= len(s) || s[i] != '"' {
		return "", "", 0, false
	}
	k := i
	if i = stringEnd(s, i); i < 0 {
		return "", "", 0, false
	}
	key = s[k:i]
	if i < len(s) && s[i] <= ' ' {
		i = skipSpace(s, i)
	}
	i++ // past the colon
	if i < len(s) && s[i] <= ' ' {
		i = skipSpace(s, i)
	}
	if i >= len(s) {
		return "", "", 0, false
	}
	v := i
	switch s[i] {
	case '{', '[':
		// Through the index when it knows this container; scanned
		// otherwise (never for a part of the indexed document, but a
		// wrong guess must cost time, not members).
		if e := m.end(i); e >= 0 {
			i = e
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
		return "", "", 0, false
	}
	value = s[v:i]
	if i < len(s) && s[i] <= ' ' {
		i = skipSpace(s, i)
	}
	if i < len(s) && s[i] == ',' {
		i++
		if i < len(s) && s[i] <= ' ' {
			i = skipSpace(s, i)
		}
	}
	m.i = i
	return key, value, v, true
}

// end returns, from the index, the offset in the object past the
// container that starts at i, or -1 when the index does not know it.
func (m *Members) end(i int) int {
	if m.ix == nil {
		return -1
	}
	e := m.ix.End(m.off + i)
	if e < 0 || e-m.off > len(m.s) {
		return -1
	}
	return e - m.off
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

// Offset returns the offset of part in doc when part is a slice of doc's
// memory, or -1.
func Offset(doc, part string) int {
	if len(doc) == 0 || len(part) == 0 {
		return -1
	}
	base := uintptr(unsafe.Pointer(unsafe.StringData(doc)))
	p := uintptr(unsafe.Pointer(unsafe.StringData(part)))
	if p < base || p-base+uintptr(len(part)) > uintptr(len(doc)) {
		return -1
	}
	return int(p - base)
}
