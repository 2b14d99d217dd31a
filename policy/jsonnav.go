package main

import (
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
)

// inputError is a request the policy cannot evaluate because it is
// malformed. Its message names the field, as a JSON path from the payload.
type inputError struct {
	field string
	what  string
}

func (e *inputError) Error() string { return e.field + ": " + e.what }

func malformed(field, what string) *inputError { return &inputError{field: field, what: what} }

// member returns the member of the JSON object obj called key, comparing
// decoded keys (so `"\u0075ser"` is "user", as every JSON decoder reads it).
// A key that occurs twice is an error: decoders disagree on which duplicate
// wins (gjson reads the first, Go's encoding/json the last), and an attacker
// would use exactly that disagreement to show us one value and store another.
// The result does not exist when the key is absent.
func member(obj gjson.Result, field, key string) (gjson.Result, error) {
	// Through members, though TinyGo puts its two one-element arrays on
	// the heap: a loop of member's own searched a map of 1,000 annotations
	// a quarter slower in the module (measured, cause not found).
	keys := [1]string{key}
	var out [1]gjson.Result
	err := members(obj, field, keys[:], out[:])
	return out[0], err
}

// members is member for several keys at once, in one pass over obj: every
// pass over a large object costs, and more so in Wasm, where the host's
// deadline check runs on every loop iteration. out[i] receives keys[i].
func members(obj gjson.Result, field string, keys []string, out []gjson.Result) error {
	it := newMemberIter(obj)
	for {
		k, raw, at, ok := it.next()
		if !ok {
			return nil
		}
		k = plainKey(k)
		for i, key := range keys {
			if k != key {
				continue
			}
			if out[i].Exists() {
				return malformed(join(field, keys[i]), "duplicate key")
			}
			out[i] = it.value(raw, at)
		}
	}
}

// present reports whether v holds a value; JSON null counts as absent, as it
// does for every optional field of a Kubernetes object.
func present(v gjson.Result) bool { return v.Exists() && v.Type != gjson.Null }

// isObject reports whether v is a JSON object.
func isObject(v gjson.Result) bool { return v.IsObject() }

// typeName describes the JSON type of v for error messages.
func typeName(v gjson.Result) string { return jsontext.TypeName(v) }

// join appends a key to a field path, bracketing keys that hold dots or
// slashes (annotation and label keys) so the path stays readable.
func join(field, key string) string {
	plain := true
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			plain = false
			break
		}
	}
	if plain && key != "" {
		if field == "" {
			return key
		}
		return field + "." + key
	}
	return field + "[" + quote(key) + "]"
}

// describe names v's type and, for a short value, shows it as written: what
// an operator needs to find the mistake in a settings file.
func describe(v gjson.Result) string {
	const limit = 64
	if v.Type == gjson.Null {
		return "null"
	}
	raw := v.Raw
	if len(raw) > limit {
		raw = raw[:limit] + "..."
	}
	return typeName(v) + " " + raw
}

// Nesting limits. gjson validates recursively, and the guest's stack is
// small (64 KiB): a request nested a thousand levels deep would make it
// trap, which fails closed but tells nobody why, and under Kubewarden
// nothing checks depth in front of the module. Real Kubernetes objects nest
// a few dozen levels; a user.info value nests two (userinfo.MaxDepth
// limits it).
const maxPayloadDepth = 512

// tooDeep is jsontext.TooDeep.
func tooDeep(s string, limit int) (where string, deep bool) { return jsontext.TooDeep(s, limit) }
