package kubewarden

import (
	"strconv"
	"strings"
)

// patchOp is one RFC 6902 operation as the json-patch crate serialises it.
type patchOp struct {
	op    string
	path  string
	value value // add and replace only
}

// diff computes the JSONPatch policy-evaluator sends to the API server,
// with the algorithm of the json-patch crate (4.x) it calls: objects key by
// key in the order of the map (sorted), arrays index by index with no
// search for moved elements, any other difference a replace.
func diff(left, right value) []patchOp {
	var ops []patchOp
	diffValue(left, right, "", &ops)
	return ops
}

func diffValue(left, right value, path string, ops *[]patchOp) {
	lo, lok := left.(map[string]any)
	ro, rok := right.(map[string]any)
	if lok && rok {
		for _, k := range sortedKeys(ro) {
			p := path + "/" + escapePointer(k)
			if lv, ok := lo[k]; ok {
				diffValue(lv, ro[k], p, ops)
			} else {
				*ops = append(*ops, patchOp{op: "add", path: p, value: ro[k]})
			}
		}
		for _, k := range sortedKeys(lo) {
			if _, ok := ro[k]; !ok {
				*ops = append(*ops, patchOp{op: "remove", path: path + "/" + escapePointer(k)})
			}
		}
		return
	}
	la, laok := left.([]any)
	ra, raok := right.([]any)
	if laok && raok {
		shift := 0
		for i := 0; i < max(len(la), len(ra)); i++ {
			p := path + "/" + strconv.Itoa(i-shift)
			switch {
			case i < len(la) && i < len(ra):
				diffValue(la[i], ra[i], p, ops)
			case i < len(la):
				// Every later element moved down by the removals before it.
				shift++
				*ops = append(*ops, patchOp{op: "remove", path: p})
			default:
				*ops = append(*ops, patchOp{op: "add", path: p, value: ra[i]})
			}
		}
		return
	}
	if !equal(left, right) {
		*ops = append(*ops, patchOp{op: "replace", path: path, value: right})
	}
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapePointer(s string) string { return pointerEscaper.Replace(s) }

// encodePatch serialises the operations as serde_json writes the crate's
// Patch: {"op","path"[,"value"]} in that order.
func encodePatch(ops []patchOp) []byte {
	m := make([]byte, 0, 128)
	m = append(m, '[')
	for i, o := range ops {
		if i > 0 {
			m = append(m, ',')
		}
		m = append(m, `{"op":`...)
		m = append(m, encodeJSON(o.op)...)
		m = append(m, `,"path":`...)
		m = append(m, encodeJSON(o.path)...)
		if o.op != "remove" {
			m = append(m, `,"value":`...)
			m = append(m, encodeJSON(o.value)...)
		}
		m = append(m, '}')
	}
	return append(m, ']')
}
