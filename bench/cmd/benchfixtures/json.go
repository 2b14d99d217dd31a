package main

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// member is one key and value of an object.
type member struct {
	key   string
	value any
}

// object is a JSON object whose members keep the order they were given in,
// so that the fixtures have the field order of the Kubernetes API server
// (the order of the fields in the Go types). Maps, which the API server
// writes with sorted keys, are plain Go maps.
type object []member

// obj builds an object from alternating keys and values. A nil value is
// left out, the way omitempty leaves out an unset field; a JSON null needs
// the value null.
func obj(kv ...any) object {
	if len(kv)%2 != 0 {
		panic(fmt.Sprintf("obj: odd number of arguments: %v", kv))
	}
	o := make(object, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			panic(fmt.Sprintf("obj: key %v is not a string", kv[i]))
		}
		if kv[i+1] == nil {
			continue
		}
		o = append(o, member{key, kv[i+1]})
	}
	return o
}

// null is a JSON null that obj keeps (a nil value would be left out).
var null = json.RawMessage("null")

// set returns a copy of o with key set to value: replaced in place if
// present, appended otherwise.
func (o object) set(key string, value any) object {
	out := make(object, len(o), len(o)+1)
	copy(out, o)
	for i := range out {
		if out[i].key == key {
			out[i].value = value
			return out
		}
	}
	return append(out, member{key, value})
}

// MarshalJSON implements json.Marshaler.
func (o object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		key, err := json.Marshal(m.key)
		if err != nil {
			return nil, fmt.Errorf("encode key %q: %w", m.key, err)
		}
		value, err := json.Marshal(m.value)
		if err != nil {
			return nil, fmt.Errorf("encode value of %q: %w", m.key, err)
		}
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(value)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// fields is a managedFields fieldsV1 tree. The API server writes it with
// sorted keys, as a map marshals.
type fields map[string]any

// leaf is a field without children, {} in fieldsV1.
func leaf() fields { return fields{} }

// node returns a fieldsV1 node that is itself set ("." key) and has the
// given children.
func node(children fields) fields {
	n := fields{".": leaf()}
	for k, v := range children {
		n[k] = v
	}
	return n
}

// leaves returns a tree of leaves named "f:<name>".
func leaves(names ...string) fields {
	f := fields{}
	for _, n := range names {
		f["f:"+n] = leaf()
	}
	return f
}

// merge adds the members of src to dst, merging subtrees.
func merge(dst, src fields) fields {
	for k, v := range src {
		if sub, ok := v.(fields); ok {
			if have, ok := dst[k].(fields); ok {
				dst[k] = merge(have, sub)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}
