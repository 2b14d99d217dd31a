package kubewarden

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A value is a JSON document as serde_json::Value holds it without the
// preserve_order feature, which is how policy-evaluator builds its crates:
// objects are maps (duplicate keys collapsed, the last one wins) written
// back with their keys in byte order, and numbers are u64, i64 or f64.
//
//	nil, bool, string, number, []value, map[string]value
type value = any

// number is a JSON number in the form serde_json writes it back.
type number string

// serdeRecursionLimit is serde_json's default nesting limit: a document
// nested this deep fails to parse (its remaining-depth counter reaches 0).
const serdeRecursionLimit = 128

// errUnparseable marks input serde_json refuses; policy-server answers such
// a body with an HTTP error before any policy runs.
var errUnparseable = errors.New("serde_json refuses the document")

// parse reads a document the way serde_json::from_slice does into a Value.
// depth is the nesting level of data within the enclosing document (0 for
// a whole document), so the recursion limit counts from the request body.
func parse(data []byte, depth int) (value, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: invalid UTF-8", errUnparseable)
	}
	if err := checkText(data, depth); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", errUnparseable, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing characters", errUnparseable)
	}
	return normalise(v)
}

// checkText finds what encoding/json accepts but serde_json does not:
// nesting at the recursion limit, and escapes of lone UTF-16 surrogates
// (encoding/json turns them into U+FFFD).
func checkText(data []byte, depth int) error {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '"':
				inString = false
			case '\\':
				if i+6 <= len(data) && data[i+1] == 'u' {
					r, ok := hex4(data[i+2:])
					if ok && utf16.IsSurrogate(rune(r)) {
						// A high surrogate must be followed by an escaped low one.
						if r >= 0xdc00 || i+12 > len(data) || data[i+6] != '\\' || data[i+7] != 'u' {
							return fmt.Errorf("%w: lone surrogate in a string", errUnparseable)
						}
						lo, ok := hex4(data[i+8:])
						if !ok || lo < 0xdc00 || lo > 0xdfff {
							return fmt.Errorf("%w: lone surrogate in a string", errUnparseable)
						}
						i += 11
						continue
					}
					i += 5
					continue
				}
				i++
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth >= serdeRecursionLimit {
				return fmt.Errorf("%w: recursion limit exceeded", errUnparseable)
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}

func hex4(b []byte) (int, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return int(n), err == nil
}

func normalise(v any) (value, error) {
	switch x := v.(type) {
	case json.Number:
		n, err := serdeNumber(string(x))
		return n, err
	case []any:
		for i := range x {
			n, err := normalise(x[i])
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
		return x, nil
	case map[string]any:
		for k, e := range x {
			n, err := normalise(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
		return x, nil
	}
	return v, nil
}

// serdeNumber is the text serde_json writes for a number it read: integers
// that fit u64 (or i64 when negative) stay as they are, anything else is an
// f64 printed in the shortest form that reads back (Rust's ryu).
func serdeNumber(text string) (number, error) {
	if !strings.ContainsAny(text, ".eE") {
		if u, err := strconv.ParseUint(text, 10, 64); err == nil {
			return number(strconv.FormatUint(u, 10)), nil
		}
		// serde_json reads "-0" as the float -0.0.
		if i, err := strconv.ParseInt(text, 10, 64); err == nil && i != 0 {
			return number(strconv.FormatInt(i, 10)), nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return "", fmt.Errorf("%w: number out of range: %s", errUnparseable, text)
	}
	return number(ryu(f)), nil
}

// ryu formats a finite float as Rust's ryu crate does (serde_json's float
// output): the shortest digits, as an integer with ".0" up to 16 digits
// before the point, as a plain decimal down to 0.00001, otherwise in
// scientific notation without a "+" ("1e20", "1.5e-7").
func ryu(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	mant, expText, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	n := len(digits)
	k := exp + 1 // position of the decimal point after the first k digits
	switch {
	case n <= k && k <= 16:
		return sign + digits + strings.Repeat("0", k-n) + ".0"
	case 0 < k && k <= 16:
		return sign + digits[:k] + "." + digits[k:]
	case -5 < k && k <= 0:
		return sign + "0." + strings.Repeat("0", -k) + digits
	case n == 1:
		return sign + digits + "e" + strconv.Itoa(k-1)
	default:
		return sign + digits[:1] + "." + digits[1:] + "e" + strconv.Itoa(k-1)
	}
}

// encode writes v as serde_json::to_string does: compact, object keys in
// byte order, strings escaped only where JSON requires it.
func encode(buf *bytes.Buffer, v value) {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case number:
		buf.WriteString(string(x))
	case string:
		encodeString(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			encode(buf, e)
		}
		buf.WriteByte(']')
	case map[string]any:
		buf.WriteByte('{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				buf.WriteByte(',')
			}
			encodeString(buf, k)
			buf.WriteByte(':')
			encode(buf, x[k])
		}
		buf.WriteByte('}')
	default:
		panic(fmt.Sprintf("kubewarden: encode %T", v))
	}
}

func encodeJSON(v value) []byte {
	var buf bytes.Buffer
	encode(&buf, v)
	return buf.Bytes()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func encodeString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			buf.WriteString(`\"`)
		case c == '\\':
			buf.WriteString(`\\`)
		case c == '\b':
			buf.WriteString(`\b`)
		case c == '\f':
			buf.WriteString(`\f`)
		case c == '\n':
			buf.WriteString(`\n`)
		case c == '\r':
			buf.WriteString(`\r`)
		case c == '\t':
			buf.WriteString(`\t`)
		case c < 0x20:
			buf.WriteString(`\u00`)
			buf.WriteByte(hex[c>>4])
			buf.WriteByte(hex[c&0xf])
		default:
			buf.WriteByte(c)
		}
	}
	buf.WriteByte('"')
}

// equal is serde_json's Value equality (numbers by their kind and value,
// which their normalised text decides).
func equal(a, b value) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !equal(e, f) {
				return false
			}
		}
		return true
	}
	return a == b
}
