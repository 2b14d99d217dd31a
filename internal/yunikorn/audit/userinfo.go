package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// AnnotationKey is the annotation YuniKorn reads the submitting user from
// (docs/BEHAVIOUR.md §2).
const AnnotationKey = "yunikorn.apache.org/user.info"

// maxDepth is how deep a value may nest, as the policy allows: an object
// holding a list of groups needs two levels; the policy refuses beyond 16.
const maxDepth = 16

// Identity is a parsed user.info value.
type Identity struct {
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
}

// Equal reports whether two identities name the same user and the same
// groups in the same order (controllers copy the template's value as is).
func (i Identity) Equal(o Identity) bool {
	if i.User != o.User || len(i.Groups) != len(o.Groups) {
		return false
	}
	for k := range i.Groups {
		if i.Groups[k] != o.Groups[k] {
			return false
		}
	}
	return true
}

// ParseUserInfo reads a user.info value with the rules the policy applies
// to a value someone supplies (docs/BEHAVIOUR.md §4.1): valid UTF-8 JSON, at
// most 16 levels deep, an object with exactly the lower-case keys "user"
// (a non-empty string, required) and "groups" (an array of strings), each
// once. Go's decoder, which YuniKorn's shim uses, matches keys without
// regard to case and keeps the last duplicate, so a value that breaks
// these rules can name a different user to YuniKorn than it seems to.
// The error says what is wrong.
func ParseUserInfo(value string) (Identity, error) {
	var id Identity
	if !utf8.ValidString(value) {
		return id, fmt.Errorf("value is not valid UTF-8")
	}
	if !json.Valid([]byte(value)) {
		return id, fmt.Errorf("value is not valid JSON")
	}
	if d := depth(value); d > maxDepth {
		return id, fmt.Errorf("value nests %d levels deep, more than %d", d, maxDepth)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(value)))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return id, fmt.Errorf("value is not valid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return id, fmt.Errorf("value must be a JSON object like {\"user\":\"alice\",\"groups\":[\"dev\"]}, got %s", jsonType(tok))
	}
	var hasUser, hasGroups bool
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return id, fmt.Errorf("value is not valid JSON: %v", err)
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return id, fmt.Errorf("value is not valid JSON: %v", err)
		}
		switch key {
		case "user":
			if hasUser {
				return id, fmt.Errorf("duplicate key \"user\"")
			}
			hasUser = true
			var s string
			if err := json.Unmarshal(raw, &s); err != nil || rawType(raw) != "string" {
				return id, fmt.Errorf("\"user\" must be a string, got %s", rawType(raw))
			}
			if s == "" {
				return id, fmt.Errorf("\"user\" must not be empty")
			}
			id.User = s
		case "groups":
			if hasGroups {
				return id, fmt.Errorf("duplicate key \"groups\"")
			}
			hasGroups = true
			var items []json.RawMessage
			if err := json.Unmarshal(raw, &items); err != nil || rawType(raw) != "array" {
				return id, fmt.Errorf("\"groups\" must be an array of strings, got %s", rawType(raw))
			}
			for n, it := range items {
				var g string
				if err := json.Unmarshal(it, &g); err != nil || rawType(it) != "string" {
					return id, fmt.Errorf("\"groups\"[%d] must be a string, got %s", n, rawType(it))
				}
				id.Groups = append(id.Groups, g)
			}
		default:
			if strings.EqualFold(key, "user") || strings.EqualFold(key, "groups") {
				return id, fmt.Errorf("key %q must be written in lower case: YuniKorn would read it as %q", key, strings.ToLower(foldASCII(key)))
			}
			return id, fmt.Errorf("unknown key %q (only \"user\" and \"groups\" are allowed)", key)
		}
	}
	if !hasUser {
		return id, fmt.Errorf("key \"user\" is required")
	}
	return id, nil
}

// foldASCII names the key a case-folded spelling stands for.
func foldASCII(key string) string {
	if strings.EqualFold(key, "user") {
		return "user"
	}
	return "groups"
}

// depth is the deepest nesting of objects and arrays in a valid JSON text.
func depth(s string) int {
	d, most := 0, 0
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			most = max(most, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return most
}

func jsonType(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "array"
		}
		return "object"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "unknown"
}

func rawType(raw json.RawMessage) string {
	tok, err := json.NewDecoder(bytes.NewReader(raw)).Token()
	if err != nil && err != io.EOF {
		return "invalid JSON"
	}
	return jsonType(tok)
}
