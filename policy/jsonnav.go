package main

import (
	"github.com/tidwall/gjson"
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
	var found gjson.Result
	var dup bool
	obj.ForEach(func(k, v gjson.Result) bool {
		if k.Str != key {
			return true
		}
		if found.Exists() {
			dup = true
			return false
		}
		found = v
		return true
	})
	if dup {
		return gjson.Result{}, malformed(join(field, key), "duplicate key")
	}
	return found, nil
}

// present reports whether v holds a value; JSON null counts as absent, as it
// does for every optional field of a Kubernetes object.
func present(v gjson.Result) bool { return v.Exists() && v.Type != gjson.Null }

// isObject reports whether v is a JSON object.
func isObject(v gjson.Result) bool { return v.IsObject() }

// typeName describes the JSON type of v for error messages.
func typeName(v gjson.Result) string {
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
