package jsontext

import "github.com/tidwall/gjson"

// TypeName describes the JSON type of v for error messages.
func TypeName(v gjson.Result) string {
	switch v.Type {
	case gjson.Null:
		return "null"
	case gjson.False, gjson.True:
		return "boolean"
	case gjson.Number:
		return "number"
	case gjson.String:
		return "string"
	}
	if v.IsArray() {
		return "array"
	}
	return "object"
}

// TooDeep reports whether the JSON text s nests arrays and objects more
// than limit levels deep, and if so where: the keys on the way, as a path
// ("request.object.spec", "[]" for an array level), up to four levels. It
// scans once, without recursion or allocation, and assumes nothing about
// the validity of s, which is checked afterwards.
func TooDeep(s string, limit int) (where string, deep bool) {
	const named = 4
	var keys [named + 1]string
	var arrays [named + 1]bool
	depth, expectKey := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if expectKey && depth >= 1 && depth <= named {
				keys[depth] = s[i+1 : min(j, len(s))]
			}
			expectKey = false
			i = j
		case '{', '[':
			depth++
			if depth > limit {
				return depthPath(keys[1:], arrays[1:], min(depth-1, named), depth-1 > named), true
			}
			if depth <= named {
				keys[depth], arrays[depth] = "", c == '['
			}
			expectKey = c == '{'
		case '}', ']':
			if depth > 0 { // unbalanced input is the validator's to reject
				depth--
			}
			expectKey = false
		case ',':
			expectKey = depth >= 1 && depth <= named && !arrays[depth]
		}
	}
	return "", false
}

// depthPath joins the first n levels of a path TooDeep found.
func depthPath(keys []string, arrays []bool, n int, more bool) string {
	var b []byte
	for d := range n {
		if arrays[d] {
			b = append(b, "[]"...)
			continue
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, keys[d]...)
	}
	if more {
		b = append(b, "..."...)
	}
	return string(b)
}

// Depth is how deep the JSON text s nests arrays and objects, scanned as
// TooDeep scans (no recursion, any input).
func Depth(s string) int {
	depth, most := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
			most = max(most, depth)
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return most
}
