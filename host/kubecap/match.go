package kubecap

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// matches reports whether an object (decoded JSON) is in namespace ("":
// any) and matches both selectors. Field selectors see every scalar
// field of the object by its dotted path (metadata.name, status.phase,
// spec.nodeName, ...), not only the few a given kind's API server
// indexes, and a field that is absent reads as "".
func matches(obj map[string]any, namespace string, l labels.Selector, f fields.Selector) bool {
	meta, _ := obj["metadata"].(map[string]any)
	if ns, _ := meta["namespace"].(string); namespace != "" && ns != namespace {
		return false
	}
	if !l.Empty() {
		set := labels.Set{}
		if m, ok := meta["labels"].(map[string]any); ok {
			for k, v := range m {
				if s, ok := v.(string); ok {
					set[k] = s
				}
			}
		}
		if !l.Matches(set) {
			return false
		}
	}
	if !f.Empty() {
		set := fields.Set{}
		flatten("", obj, set)
		if !f.Matches(set) {
			return false
		}
	}
	return true
}

// flatten collects the scalar fields of v (maps only, not arrays) by
// dotted path.
func flatten(prefix string, v any, out fields.Set) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, e, out)
		}
	case string:
		out[prefix] = x
	case bool:
		out[prefix] = strconv.FormatBool(x)
	case float64:
		out[prefix] = strconv.FormatFloat(x, 'f', -1, 64)
	case int64:
		out[prefix] = strconv.FormatInt(x, 10)
	case nil, []any:
	default:
		out[prefix] = fmt.Sprint(x)
	}
}
