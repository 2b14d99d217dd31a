package workloads

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
	"github.com/yunikorn-userinfo/userinfo/policy/jsonx"
	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// Set is what settings.workloads guards, for the host's tools: its kinds,
// and the kinds whose objects may be the controller owner of what their
// operators create (the kinds themselves plus the entries' extra owners,
// such as Pod for LeaderWorkerSet).
type Set struct {
	Kinds  []Kind
	Owners []KindRef
}

// ParseSettings reads settings.workloads from a settings object with
// Parse, operators unread; a Set without kinds when the settings have
// none. The settings are meant to have been accepted by the policy's
// validate_settings first (which checks the operators too).
func ParseSettings(settings []byte) (*Set, error) {
	if !gjson.ValidBytes(settings) {
		return nil, errors.New("settings: not valid JSON")
	}
	top := gjson.ParseBytes(settings)
	if !jsonx.IsObject(top) {
		return nil, errors.New("settings: must be a JSON object, got " + jsontext.TypeName(top))
	}
	v, dup := jsonx.Member(top, "workloads")
	if dup {
		return nil, errors.New("settings.workloads: duplicate key")
	}
	s := &Set{}
	if !v.Exists() {
		return s, nil
	}
	var problems []string
	entries := Parse(&problems, v, nil)
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	for _, e := range entries {
		s.Kinds = append(s.Kinds, e.Kinds...)
		for _, o := range e.Owners {
			if !s.IsOwner(o) {
				s.Owners = append(s.Owners, o)
			}
		}
	}
	return s, nil
}

// Kind returns the guarded kind k, or nil.
func (s *Set) Kind(k KindRef) *Kind {
	if s == nil {
		return nil
	}
	for i := range s.Kinds {
		if s.Kinds[i].KindRef == k {
			return &s.Kinds[i]
		}
	}
	return nil
}

// IsOwner reports whether objects of kind k may own what an operator of
// the settings creates.
func (s *Set) IsOwner(k KindRef) bool {
	if s == nil {
		return false
	}
	for _, o := range s.Owners {
		if o == k {
			return true
		}
	}
	return false
}

// Template is one pod template (or the object's own metadata) that a
// kind's path names in an object, as the host's tools read it.
type Template struct {
	// Field is where its annotations map is, like
	// spec.workerGroupSpecs[1].template.metadata.annotations.
	Field string
	// Holder is the pod template, for a path ending in
	// .metadata.annotations below some other key (its spec may name a
	// scheduler); it does not exist otherwise.
	Holder gjson.Result
	// Value is the annotation's value; Present says whether it is there.
	Value   string
	Present bool
}

// Templates finds the templates of obj (a JSON object) that the kind's
// paths name, each once, in the order of the paths and each path's walk
// (document order), as the policy finds them: a template must exist up to
// its metadata, which may be absent; null is absent; a level of the wrong
// type, a duplicated key or an annotation that is not a string is
// malformed (a *jsonx.InputError).
func (k *Kind) Templates(obj gjson.Result) ([]Template, error) {
	if !jsonx.IsObject(obj) {
		return nil, jsonx.Malformed("", "must be an object, got "+jsontext.TypeName(obj))
	}
	var out []Template
	seen := map[string]bool{}
	for i := range k.Paths {
		ap := &k.Paths[i]
		err := ap.Walk(jsonx.Member, obj, "", func(holder gjson.Result, field string, elem int) error {
			t, ok, err := ap.template(holder, field, elem)
			if err != nil || !ok || seen[t.Field] {
				return err
			}
			seen[t.Field] = true
			out = append(out, t)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// template follows Keys from holder (see Walk) to the annotations; ok is
// false when there is no template (a level up to Must absent or null).
func (ap *Path) template(holder gjson.Result, field string, elem int) (t Template, ok bool, err error) {
	if elem != 0 {
		field = jsonx.IndexField(field, elem-1)
	}
	if !jsonx.IsObject(holder) {
		return t, false, jsonx.Malformed(field, "must be an object, got "+jsontext.TypeName(holder))
	}
	cur, meta := holder, field
	for i, key := range ap.Keys {
		meta = jsonx.Join(meta, key)
		next, dup := jsonx.Member(cur, key)
		if dup {
			return t, false, jsonx.Malformed(meta, "duplicate key")
		}
		podTemplate := i == len(ap.Keys)-1 && key == "metadata" && len(ap.Keys) > 1
		if !jsonx.Present(next) {
			if i < ap.Must {
				return t, false, nil
			}
			// The metadata is absent: a template without the annotation.
			for _, rest := range ap.Keys[i+1:] {
				meta = jsonx.Join(meta, rest)
			}
			t.Field = jsonx.Join(meta, "annotations")
			if podTemplate {
				t.Holder = cur
			}
			return t, true, nil
		}
		if !jsonx.IsObject(next) {
			return t, false, jsonx.Malformed(meta, "must be an object, got "+jsontext.TypeName(next))
		}
		if podTemplate {
			t.Holder = cur
		}
		cur = next
	}
	t.Field = jsonx.Join(meta, "annotations")
	ann, dup := jsonx.Member(cur, "annotations")
	switch {
	case dup:
		return t, false, jsonx.Malformed(t.Field, "duplicate key")
	case !jsonx.Present(ann):
		return t, true, nil
	case !jsonx.IsObject(ann):
		return t, false, jsonx.Malformed(t.Field, "must be an object, got "+jsontext.TypeName(ann))
	}
	v, dup := jsonx.Member(ann, userinfo.AnnotationKey)
	switch {
	case dup:
		return t, false, jsonx.Malformed(jsonx.Join(t.Field, userinfo.AnnotationKey), "duplicate key")
	case !v.Exists():
		return t, true, nil
	case v.Type != gjson.String:
		return t, false, jsonx.Malformed(jsonx.Join(t.Field, userinfo.AnnotationKey), "must be a string, got "+jsontext.TypeName(v))
	}
	t.Value, t.Present = jsontext.Str(v), true
	return t, true, nil
}
