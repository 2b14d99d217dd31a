package jsonx

import (
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/jsonindex"
	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
)

// InputError is JSON that cannot be read as what it must be. Its message
// names the field, as a JSON path.
type InputError struct {
	Field string
	What  string
}

func (e *InputError) Error() string { return e.Field + ": " + e.What }

// Malformed is the error that field is not what it must be.
func Malformed(field, what string) *InputError { return &InputError{Field: field, What: what} }

// Present reports whether v holds a value; JSON null counts as absent, as
// it does for every optional field of a Kubernetes object.
func Present(v gjson.Result) bool { return v.Exists() && v.Type != gjson.Null }

// IsObject reports whether v is a JSON object.
func IsObject(v gjson.Result) bool { return v.IsObject() }

// Join appends a key to a field path, bracketing keys that hold dots or
// slashes (annotation and label keys) so the path stays readable.
func Join(field, key string) string {
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
	return field + "[" + jsontext.Quote(key) + "]"
}

// IndexField is field[i], in one allocation.
func IndexField(field string, i int) string {
	b := make([]byte, 0, len(field)+12)
	b = append(b, field...)
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, ']')
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Describe names v's type and, for a short value, shows it as written:
// what an operator needs to find the mistake in a settings file.
func Describe(v gjson.Result) string {
	const limit = 64
	if v.Type == gjson.Null {
		return "null"
	}
	raw := v.Raw
	if len(raw) > limit {
		raw = raw[:limit] + "..."
	}
	return jsontext.TypeName(v) + " " + raw
}

// Member returns the member of the JSON object obj called key, comparing
// decoded keys, and whether the key occurs more than once (decoders
// disagree on which duplicate wins). The result does not exist when the
// key is absent. It scans obj; the policy reads the members of its
// payload through the payload's index instead.
func Member(obj gjson.Result, key string) (v gjson.Result, dup bool) {
	m := jsonindex.NewMembers(obj.Raw, nil, 0)
	for {
		k, raw, at, ok := m.Next()
		if !ok {
			return v, false
		}
		if Key(k) != key {
			continue
		}
		if v.Exists() {
			return v, true
		}
		v = gjson.Parse(raw)
		v.Index = obj.Index + at
	}
}

// Key returns the key the raw key token rawKey spells, decoded as
// encoding/json decodes it; a key without escapes or non-ASCII bytes (all
// of Kubernetes' field names) is returned without copying.
func Key(rawKey string) string {
	body := rawKey[1 : len(rawKey)-1]
	for i := 0; i < len(body); i++ {
		if body[i] == '\\' || body[i] >= 0x80 {
			return jsontext.DecodeString(body)
		}
	}
	return body
}

// EachMember calls f with each member of the settings object v at path
// (and the member's path), reporting a key given twice in problems
// instead.
func EachMember(problems *[]string, path string, v gjson.Result, f func(name, path string, value gjson.Result)) {
	seen := map[string]bool{}
	v.ForEach(func(k, value gjson.Result) bool {
		name := jsontext.Str(k)
		if seen[name] {
			*problems = append(*problems, path+"."+name+": duplicate key")
			return true
		}
		seen[name] = true
		f(name, path+"."+name, value)
		return true
	})
}

// KeySet is the set of the keys of one JSON object read so far, to find a
// duplicate. It holds where each key's token is in the object, never the
// key itself: a key read from the payload is a pointer into the middle of
// it, which TinyGo's collector pays for by the payload's size at every
// collection, and a map of them made a map of ten thousand templates
// quadratic. Its table is pointer-free, so the collector skips it.
type KeySet struct {
	slots []keySlot // open addressing, a power of two long, at most half full
	n     int
}

// keySlot is one key: the hash of its decoded text (0: an empty slot),
// and where its token is in the object.
type keySlot struct {
	hash    uint64
	at, end int32
}

// Add adds key k (as ForEach gives it) of object obj, and reports whether
// obj holds it already. Keys compare decoded.
func (ks *KeySet) Add(obj, k gjson.Result) (dup bool) {
	key := jsontext.Str(k)
	h := uint64(14695981039346656037) // FNV-1a
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	h |= 1
	if 2*(ks.n+1) > len(ks.slots) {
		old := ks.slots
		ks.slots = make([]keySlot, max(16, 2*len(old)))
		for _, sl := range old {
			if sl.hash != 0 {
				ks.slots[ks.free(sl.hash)] = sl
			}
		}
	}
	mask := uint64(len(ks.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := ks.slots[i]
		if sl.hash == 0 {
			at := k.Index - obj.Index
			ks.slots[i] = keySlot{hash: h, at: int32(at), end: int32(at + len(k.Raw))}
			ks.n++
			return false
		}
		if sl.hash == h && jsontext.Str(gjson.Parse(obj.Raw[sl.at:sl.end])) == key {
			return true
		}
	}
}

// free is the first empty slot for hash h.
func (ks *KeySet) free(h uint64) uint64 {
	mask := uint64(len(ks.slots) - 1)
	i := h & mask
	for ks.slots[i].hash != 0 {
		i = (i + 1) & mask
	}
	return i
}
