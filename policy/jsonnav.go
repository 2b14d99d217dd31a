package main

import (
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
)

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

// Nesting limits. gjson validates recursively, and the guest's stack is
// small (64 KiB): a request nested a thousand levels deep would make it
// trap, which fails closed but tells nobody why, and under Kubewarden
// nothing checks depth in front of the module. Real Kubernetes objects nest
// a few dozen levels; a user.info value nests two (userinfo.MaxDepth
// limits it).
const maxPayloadDepth = 512

// tooDeep is jsontext.TooDeep.
func tooDeep(s string, limit int) (where string, deep bool) { return jsontext.TooDeep(s, limit) }
