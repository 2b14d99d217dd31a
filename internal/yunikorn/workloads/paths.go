package workloads

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// step is one step of a path: a member, or a wildcard.
type step struct {
	key  string
	wild byte // '*': every member of a map; '[': every element of an array
}

// Path is one annotation path of a kind, such as
// spec.workerGroupSpecs[*].template.metadata.annotations, with the rules
// of docs/BEHAVIOUR.md §3.3.
type Path struct {
	Text string
	// wild are the steps up to the last wildcard; keys the members after
	// it, up to the object holding "annotations".
	wild []step
	keys []string
	// must is how many of keys must exist for there to be a template: its
	// metadata (the last key, when it is "metadata") may be absent, the
	// template itself may not.
	must int
}

// ParsePath reads an annotation path; problem says why text is not one.
func ParsePath(text string) (p Path, problem string) {
	p.Text = text
	segs := strings.Split(text, ".")
	if len(segs) < 2 || segs[len(segs)-1] != "annotations" {
		return p, "must name an annotations map: a dotted path ending in .annotations, like spec.template.metadata.annotations"
	}
	var steps []step
	for _, seg := range segs[:len(segs)-1] {
		if seg == "*" {
			steps = append(steps, step{wild: '*'})
			continue
		}
		key, n := seg, 0
		for strings.HasSuffix(key, "[*]") {
			key = strings.TrimSuffix(key, "[*]")
			n++
		}
		if key == "" || strings.ContainsAny(key, "[]*") {
			return p, fmt.Sprintf("segment %q is not a member name, *, or a name followed by [*]", seg)
		}
		steps = append(steps, step{key: key})
		for ; n > 0; n-- {
			steps = append(steps, step{wild: '['})
		}
	}
	last := -1
	for i, st := range steps {
		if st.wild != 0 {
			last = i
		}
	}
	p.wild = steps[:last+1]
	for _, st := range steps[last+1:] {
		p.keys = append(p.keys, st.key)
	}
	p.must = len(p.keys)
	if p.must > 0 && p.keys[p.must-1] == "metadata" {
		p.must--
	}
	return p, ""
}

// Template is one pod template (or the object's own metadata) found at a
// path.
type Template struct {
	// Field is where its annotations map is, like
	// spec.workerGroupSpecs[1].template.metadata.annotations.
	Field string
	// Holder is the object that holds the metadata (for a path ending in
	// metadata.annotations, the pod template, whose spec may name a
	// scheduler); nil otherwise.
	Holder map[string]any
	// Value is the annotation's value; Present says whether it is there.
	Value   string
	Present bool
}

// MalformedError is an object whose shape does not fit a path: a level
// of the wrong type, as the policy refuses it (docs/BEHAVIOUR.md §4.10).
type MalformedError struct {
	Field, Problem string
}

func (e *MalformedError) Error() string { return e.Field + ": " + e.Problem }

// Templates finds the templates of obj (an object as JSON decodes it)
// that the kind's paths name, each once, in the order of the paths
// (members of a map in key order, elements of an array in theirs).
func (k *Kind) Templates(obj map[string]any) ([]Template, error) {
	var out []Template
	seen := map[string]bool{}
	for i := range k.Paths {
		var err error
		if out, err = k.Paths[i].locate(obj, seen, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (p *Path) locate(obj map[string]any, seen map[string]bool, out []Template) ([]Template, error) {
	var walk func(cur any, field string, i int) error
	walk = func(cur any, field string, i int) error {
		if i == len(p.wild) {
			t, ok, err := p.at(cur, field)
			if err != nil || !ok {
				return err
			}
			if !seen[t.Field] {
				seen[t.Field] = true
				out = append(out, t)
			}
			return nil
		}
		st := p.wild[i]
		if st.wild == '[' {
			arr, ok := cur.([]any)
			if !ok {
				return &MalformedError{field, "must be an array, got " + typeName(cur)}
			}
			for n, v := range arr {
				if v != nil {
					if err := walk(v, field+"["+strconv.Itoa(n)+"]", i+1); err != nil {
						return err
					}
				}
			}
			return nil
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return &MalformedError{field, "must be an object, got " + typeName(cur)}
		}
		if st.wild == 0 {
			next := m[st.key]
			if next == nil {
				return nil
			}
			return walk(next, join(field, st.key), i+1)
		}
		keys := make([]string, 0, len(m))
		for key := range m {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			if v := m[key]; v != nil {
				if err := walk(v, join(field, key), i+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := walk(obj, "", 0)
	return out, err
}

// at follows the keys below start; ok is false when the template is not
// there (a level up to must absent or null).
func (p *Path) at(start any, field string) (Template, bool, error) {
	cur, ok := start.(map[string]any)
	if !ok {
		return Template{}, false, &MalformedError{field, "must be an object, got " + typeName(start)}
	}
	var holder map[string]any
	for i, key := range p.keys {
		next := cur[key]
		if next == nil {
			if i < p.must {
				return Template{}, false, nil
			}
			// The metadata is absent: a template without the annotation.
			return Template{Field: join(join(field, strings.Join(p.keys, ".")), "annotations"), Holder: holderOf(p, cur, i)}, true, nil
		}
		m, ok := next.(map[string]any)
		if !ok {
			return Template{}, false, &MalformedError{join(field, strings.Join(p.keys[:i+1], ".")), "must be an object, got " + typeName(next)}
		}
		if i == len(p.keys)-1 {
			holder = holderOf(p, cur, i)
		}
		cur = m
	}
	t := Template{Field: join(join(field, strings.Join(p.keys, ".")), "annotations"), Holder: holder}
	ann, present := cur["annotations"]
	if !present || ann == nil {
		return t, true, nil
	}
	am, ok := ann.(map[string]any)
	if !ok {
		return Template{}, false, &MalformedError{t.Field, "must be an object, got " + typeName(ann)}
	}
	v, present := am[AnnotationKey]
	if !present {
		return t, true, nil
	}
	s, ok := v.(string)
	if !ok {
		return Template{}, false, &MalformedError{t.Field + "." + AnnotationKey, "must be a string, got " + typeName(v)}
	}
	t.Value, t.Present = s, true
	return t, true, nil
}

// holderOf is the pod template of a path ending in metadata.annotations:
// the object holding key i (the metadata); nil for other paths.
func holderOf(p *Path, cur map[string]any, i int) map[string]any {
	if i == len(p.keys)-1 && p.keys[i] == "metadata" && len(p.keys) > 1 {
		return cur
	}
	return nil
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	if key == "" {
		return field
	}
	return field + "." + key
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	default:
		return "number"
	}
}
