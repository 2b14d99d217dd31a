package main

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal, escaped exactly as
// Go's encoding/json does with HTML escaping on (its default): `<`, `>` and
// `&` become \u003c, \u003e and \u0026; U+2028 and U+2029 are escaped;
// invalid UTF-8 becomes \ufffd; other non-ASCII is written raw.
//
// YuniKorn's admission controller writes the user.info value with
// encoding/json and its scheduler shim parses it, so the annotation bytes we
// write must be the ones encoding/json would produce. We cannot call
// encoding/json here: its reflection is slow and heavy under TinyGo.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if htmlSafe(b) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// htmlSafe reports whether an ASCII byte can be written unescaped.
func htmlSafe(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// quote returns s as a JSON string literal, for messages that name a value
// an attacker controls: control characters cannot leak into logs verbatim.
func quote(s string) string {
	return string(appendJSONString(nil, s))
}
