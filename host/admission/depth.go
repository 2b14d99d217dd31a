package admission

import "fmt"

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
	depth, inString := 0, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
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
