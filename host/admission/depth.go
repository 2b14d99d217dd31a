package admission

import (
	"bytes"
	"fmt"
)

// CheckDepth returns an error if the JSON text data nests arrays and
// objects more than limit levels deep. It looks only at brackets outside
// strings, in one pass without allocating, and assumes nothing about the
// validity of the rest (the decoder checks that).
//
// Policies parse requests with recursive descent in a guest whose stack is
// small: a hostile request nested thousands of levels deep would make the
// guest trap, which fails closed but says nothing useful. Real Kubernetes
// objects nest a few dozen levels at most.
func CheckDepth(data []byte, limit int) error {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			// Skip to the closing quote: the next quote not escaped, found
			// with IndexByte, as most of a Kubernetes object is strings.
			end := stringEnd(data, i+1)
			if end < 0 {
				return nil // unterminated: the validator says so
			}
			i = end
		case '{', '[':
			depth++
			if depth > limit {
				return fmt.Errorf("JSON nests deeper than %d levels", limit)
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

// stringEnd returns the index of the quote that closes the string whose
// contents start at from, or -1 if there is none. A quote preceded by an
// odd number of backslashes is escaped.
func stringEnd(data []byte, from int) int {
	for from <= len(data) {
		q := bytes.IndexByte(data[from:], '"')
		if q < 0 {
			return -1
		}
		q += from
		backslashes := 0
		for j := q - 1; j >= from && data[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q
		}
		from = q + 1
	}
	return -1
}
