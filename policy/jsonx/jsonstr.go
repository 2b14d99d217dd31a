package jsonx

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal, escaped exactly as
// Go's encoding/json does with HTML escaping on (its default): `<`, `>` and
// `&` become \u003c, \u003e and \u0026; U+2028 and U+2029 are escaped;
// invalid UTF-8 becomes \ufffd; other non-ASCII is written raw.
//
// YuniKorn's admission controller writes the user.info value with
// encoding/json and its scheduler shim parses it, so the annotation bytes we
// write must be the ones encoding/json would produce. We cannot call
// encoding/json here: its reflection is slow and heavy under TinyGo.
func AppendString(dst []byte, s string) []byte {
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

// StringLen is about the length of AppendString's output for s
// (exact for ASCII without control characters): a buffer of that size is
// allocated once instead of grown, for values as large as the request.
func StringLen(s string) int {
	n := len(s) + 2
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b == '"' || b == '\\':
			n++
		case b < 0x20 || b == '<' || b == '>' || b == '&':
			n += 5
		}
	}
	return n
}

// htmlSafe reports whether an ASCII byte can be written unescaped.
func htmlSafe(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// Quote returns s as a JSON string literal, for messages that name a value
// an attacker controls: control characters cannot leak into logs verbatim.
func Quote(s string) string {
	return string(AppendString(nil, s))
}

// Str returns the value of the JSON string v exactly as Go's encoding/json
// decodes it, and so as the API server and YuniKorn read it: every byte of
// invalid UTF-8 becomes U+FFFD, and so does a \u escape of a surrogate
// that is not followed by its pair (the escape after it is then decoded on
// its own). gjson differs on such input (it drops the character after a
// lone surrogate escape), and a policy that compares identities must not
// see a different string than the one that is stored. Plain strings, the
// usual case, are returned without copying.
func Str(v gjson.Result) string {
	raw := v.Raw
	if v.Type != gjson.String || len(raw) < 2 || raw[0] != '"' {
		return v.Str
	}
	body := raw[1 : len(raw)-1]
	if !utf8.ValidString(body) {
		return DecodeString(body)
	}
	esc := strings.IndexByte(body, '\\')
	if esc < 0 {
		return body
	}
	// gjson decoded the escapes already, as encoding/json does unless one
	// is a surrogate's (\uD800 to \uDFFF): only those are decoded again.
	for i := esc; i+5 < len(body); i++ {
		if body[i] == '\\' {
			if body[i+1] == 'u' && (body[i+2] == 'd' || body[i+2] == 'D') && !(body[i+3] >= '0' && body[i+3] <= '7') {
				return DecodeString(body)
			}
			i++ // the escaped character, which may be a backslash
		}
	}
	return v.Str
}

// DecodeString decodes the text between the quotes of a valid JSON
// string literal, as encoding/json does.
func DecodeString(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			switch e := s[i+1]; e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := hex4(s, i+2)
				if !ok {
					return string(append(b, s[i:]...)) // not valid JSON; cannot happen after validation
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r2, ok := hex4(s, i+2); ok && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							b = utf8.AppendRune(b, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
				continue
			default: // '"', '\\', '/'
				b = append(b, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
		}
	}
	return string(b)
}

// hex4 reads the four hex digits at s[i:i+4].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}
