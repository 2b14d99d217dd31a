package workloads

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
	"github.com/yunikorn-userinfo/userinfo/policy/jsonx"
)

// Step is one step of an annotation path.
type Step struct {
	Key  string // the member to enter, when Wild is 0
	Wild byte   // '*': every member of a map; '[': every element of an array
}

// Path is where one kind keeps annotation maps that YuniKorn will read
// from its Pods, such as
// spec.workerGroupSpecs[*].template.metadata.annotations.
type Path struct {
	Text string
	// Wild are the steps up to and including the last wildcard; Keys are
	// the members after it, up to the object that holds "annotations".
	Wild []Step
	Keys []string
	// Must is how many of Keys must exist for there to be a template: the
	// policy may create a template's metadata and annotations, never the
	// template itself (an optional template that appears would change
	// what the operator does).
	Must int
}

// ParsePath reads a path like a.b[*].c.*.metadata.annotations. It returns
// a problem instead when the path is not one.
func ParsePath(text string) (Path, string) {
	ap := Path{Text: text}
	segs := strings.Split(text, ".")
	if len(segs) < 2 || segs[len(segs)-1] != "annotations" {
		return ap, "must name an annotations map: a dotted path ending in .annotations, like spec.template.metadata.annotations"
	}
	var steps []Step
	for _, seg := range segs[:len(segs)-1] {
		if seg == "*" {
			steps = append(steps, Step{Wild: '*'})
			continue
		}
		key := seg
		n := 0
		for strings.HasSuffix(key, "[*]") {
			key = strings.TrimSuffix(key, "[*]")
			n++
		}
		if key == "" || strings.ContainsAny(key, "[]*") {
			return ap, "segment " + jsontext.Quote(seg) + " is not a member name, *, or a name followed by [*]"
		}
		steps = append(steps, Step{Key: key})
		for ; n > 0; n-- {
			steps = append(steps, Step{Wild: '['})
		}
	}
	last := -1
	for i, st := range steps {
		if st.Wild != 0 {
			last = i
		}
	}
	ap.Wild = steps[:last+1]
	for _, st := range steps[last+1:] {
		ap.Keys = append(ap.Keys, st.Key)
	}
	ap.Must = len(ap.Keys)
	if ap.Must > 0 && ap.Keys[ap.Must-1] == "metadata" {
		ap.Must--
	}
	return ap, ""
}

// RecordPath is where every workload kind records its submitter besides
// its pod templates: the object's own annotations. An object whose
// templates are all optional (a RayJob that names an existing cluster, a
// TrainJob) would otherwise record no one, and what its operator creates
// for it could not be charged to its submitter (docs/BEHAVIOUR.md §3.3).
const RecordPath = "metadata.annotations"

// WithRecord adds RecordPath to a kind's paths, unless they name it.
func WithRecord(paths []Path) []Path {
	for _, ap := range paths {
		if ap.Text == RecordPath {
			return paths
		}
	}
	ap, _ := ParsePath(RecordPath)
	return append(paths, ap)
}

// Member reads the member key of the JSON object obj, comparing decoded
// keys, and reports whether obj holds key twice. jsonx.Member is one; the
// policy reads its payload through the payload's index.
type Member func(obj gjson.Result, key string) (v gjson.Result, dup bool)

// Walk calls visit with each object of obj (whose JSON path is field)
// that the path's wildcards lead to, from which Keys lead to the
// template's annotations: one per element or member a wildcard matches,
// in document order. field is its JSON path, or when elem is not 0 that
// of the array holding it, as element elem-1 (spelled out only for a
// message). A level that is absent or null leads nowhere; a level of the
// wrong type or a duplicated key is malformed (a *jsonx.InputError), and
// so is what visit returns.
func (ap *Path) Walk(member Member, obj gjson.Result, field string, visit func(holder gjson.Result, field string, elem int) error) error {
	var walk func(cur gjson.Result, curField string, elem, i int) error
	walk = func(cur gjson.Result, curField string, elem, i int) error {
		if i == len(ap.Wild) {
			return visit(cur, curField, elem)
		}
		st := ap.Wild[i]
		if st.Wild == '[' {
			if !cur.IsArray() {
				return jsonx.Malformed(curField, "must be an array, got "+jsontext.TypeName(cur))
			}
		} else if !jsonx.IsObject(cur) {
			return jsonx.Malformed(curField, "must be an object, got "+jsontext.TypeName(cur))
		}
		if st.Wild == 0 {
			next, dup := member(cur, st.Key)
			if dup {
				return jsonx.Malformed(jsonx.Join(curField, st.Key), "duplicate key")
			}
			if !jsonx.Present(next) {
				return nil
			}
			return walk(next, jsonx.Join(curField, st.Key), 0, i+1)
		}
		var err error
		n := 0
		var seen jsonx.KeySet
		cur.ForEach(func(k, v gjson.Result) bool {
			f, elem := curField, 0
			switch {
			case st.Wild == '*':
				if seen.Add(cur, k) {
					err = jsonx.Malformed(jsonx.Join(curField, jsontext.Str(k)), "duplicate key")
					return false
				}
				f = jsonx.Join(curField, jsontext.Str(k))
			case i+1 == len(ap.Wild):
				elem = n + 1
			default:
				f = jsonx.IndexField(curField, n)
			}
			n++
			if jsonx.Present(v) {
				err = walk(v, f, elem, i+1)
			}
			return err == nil
		})
		return err
	}
	return walk(obj, field, 0, 0)
}
