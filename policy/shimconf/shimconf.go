// Package shimconf reads YuniKorn's two ConfigMaps as the k8shim v1.9
// flattens them (pkg/conf/schedulerconf.go, FlattenConfigMaps and
// Decompress): yunikorn-defaults first, yunikorn-configs over it; within
// one ConfigMap, binaryData over data; a binaryData key loses its last
// dot-separated part, and its value is gunzipped when that part is "gz"
// (any case), empty otherwise; a value that does not gunzip sets the empty
// key instead.
//
// The policy's configValidation and queueCheck (over the ConfigMaps as
// JSON) and the host's migrate and audit (over decoded ConfigMaps) both
// read through Lookup. It is written for the policy module too (TinyGo: no
// reflection, no goroutines).
package shimconf

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
)

// The names of the two ConfigMaps the k8shim reads, in its namespace, in
// the order it flattens them (k8shim pkg/common/constants).
const (
	DefaultsName = "yunikorn-defaults"
	ConfigsName  = "yunikorn-configs"
)

// MaxInflated bounds what one gzip-compressed binaryData value may
// inflate to: a ConfigMap holds at most 1 MiB, and a small one could
// otherwise expand to fill memory (the policy module's 64 MiB first).
// The shim has no bound.
const MaxInflated = 16 << 20

// ErrTooLarge is a value that inflates to more than MaxInflated.
var ErrTooLarge = errors.New("inflates to more than 16 MiB")

// TooLargeError is a compressed value that Lookup did not read because it
// inflates to more than MaxInflated: what the shim would read for the key
// is not known.
type TooLargeError struct {
	Map int    // the index of its ConfigMap in Lookup's maps
	Key string // its binaryData key
}

func (e *TooLargeError) Error() string { return "binaryData " + e.Key + " " + ErrTooLarge.Error() }

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// BinaryKey is the key the shim files a binaryData key under (the key
// without its last dot-separated part, the whole key when it has no dot),
// and whether its value is gunzipped.
func BinaryKey(k string) (key string, gz bool) {
	dot := strings.LastIndexByte(k, '.')
	key = k
	if dot >= 0 {
		key = k[:dot]
	}
	return key, strings.EqualFold(k[dot+1:], "gz")
}

// Inflate gunzips a binaryData value as the shim does (every member of a
// multi-member stream, checksums checked), up to MaxInflated: more is
// ErrTooLarge.
func Inflate(value []byte) (string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(value))
	if err != nil {
		return "", err
	}
	out, err := io.ReadAll(io.LimitReader(zr, MaxInflated+1))
	if err != nil {
		return "", err
	}
	if len(out) > MaxInflated {
		return "", ErrTooLarge
	}
	return string(out), nil
}

// ConfigMap is one ConfigMap as Lookup reads it.
type ConfigMap interface {
	// Data returns the value of key in data, and whether it is there.
	Data(key string) (string, bool)
	// EachBinary calls f with each key of binaryData, in order, and a
	// function that returns its value's bytes (or why they cannot be
	// decoded), until f returns false.
	EachBinary(f func(key string, value func() ([]byte, error)) bool)
}

// Value is what Lookup found for a key.
type Value struct {
	Text string
	Set  bool // some ConfigMap sets the key
	// Map is the index in Lookup's maps of the ConfigMap that sets it,
	// Binary the binaryData key it came from ("" when from data).
	Map    int
	Binary string
}

// Lookup returns the value of key in maps (nil entries are absent
// ConfigMaps; a later one wins) as the shim's flattening leaves it. The
// shim walks binaryData as a Go map, in no fixed order: of two binaryData
// keys of one ConfigMap that set key, the later in EachBinary's order wins
// here, and when either inflates past MaxInflated the value is not known:
// a *TooLargeError.
func Lookup(maps []ConfigMap, key string) (Value, error) {
	for i := len(maps) - 1; i >= 0; i-- {
		cm := maps[i]
		if cm == nil {
			continue
		}
		v := Value{Map: i}
		var tooLarge error
		cm.EachBinary(func(k string, value func() ([]byte, error)) bool {
			stripped, gz := BinaryKey(k)
			if stripped != key && key != "" {
				return true
			}
			if !gz {
				if stripped == key {
					v.Text, v.Set, v.Binary = "", true, k
				}
				return true
			}
			b, err := value()
			text := ""
			if err == nil {
				text, err = Inflate(b)
			}
			switch {
			case errors.Is(err, ErrTooLarge):
				if stripped == key {
					tooLarge = &TooLargeError{Map: i, Key: k}
					return false
				}
			case err != nil:
				// The shim files a value that does not inflate under
				// the empty key, empty.
				if key == "" {
					v.Text, v.Set, v.Binary = "", true, k
				}
			case stripped == key:
				v.Text, v.Set, v.Binary = text, true, k
			}
			return true
		})
		if tooLarge != nil {
			return Value{}, tooLarge
		}
		if v.Set {
			return v, nil
		}
		if text, ok := cm.Data(key); ok {
			return Value{Text: text, Set: true, Map: i}, nil
		}
	}
	return Value{}, nil
}
