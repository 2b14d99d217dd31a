package main

import (
	"slices"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/workloads"
)

// kindRef identifies a Kubernetes kind; the version does not matter.
type kindRef struct{ group, kind string }

// metadataPath says, for each kind this policy guards without settings,
// where the metadata of the Pods it produces is (workloads.BuiltinMetadataPath).
func metadataPath(k kindRef) (path []string, guarded bool) {
	return workloads.BuiltinMetadataPath(k.group, k.kind)
}

// podMeta is the metadata object that carries the annotation, as found in
// one version of the object (request.object or request.oldObject).
//
// It holds where the objects on its path are, as offsets into the object's
// text, rather than gjson values: a workload can have ten thousand
// templates, and every gjson value is a pointer into the middle of the
// payload. TinyGo's collector finds the start of the allocation such a
// pointer points into by walking back from it block by block, so each
// collection cost the number of templates times the payload's size: the
// cost of an evaluation grew with the square of the request (RATIONALE.md).
// Offsets are plain integers, which the precise collector does not follow.
type podMeta struct {
	src *string // the whole object, as received, shared by its templates
	// field is the JSON path of the object, for messages, or of the array
	// holding it when elem is not 0: the object is then element elem-1.
	field string
	elem  int
	path  []string // path from the object to the metadata
	// found[i] is where the object at path[:i] is (found[0] is the root);
	// len(found)-1 levels exist. foundBuf holds found for the kinds'
	// paths, up to five levels deep.
	found    []span
	foundBuf [6]span
	meta     span // the metadata object, if every level exists
	// annotations is the annotations map, once annotation() has found it.
	annotations span
	// metaPath is metaField, once spelled out.
	metaPath string
}

// span is where an object of a podMeta's text is: text[at:end], at offset
// at in the text the gjson values were read from. end is 0 when there is
// none.
type span struct{ at, end int32 }

func spanOf(v gjson.Result) span { return span{int32(v.Index), int32(v.Index + len(v.Raw))} }

// object is the object at sp as a gjson value, as reading it gave it; it
// does not exist when sp is empty.
func (pm *podMeta) object(sp span) gjson.Result {
	if sp.end == 0 {
		return gjson.Result{}
	}
	return gjson.Result{Type: gjson.JSON, Raw: (*pm.src)[sp.at:sp.end], Index: int(sp.at)}
}

// locate walks raw along path. Levels that are absent or null are fine (a
// partial object); a level of the wrong type or a duplicated key is not.
func locate(raw string, field string, path []string) (*podMeta, error) {
	raw = trimSpace(raw) // gjson's top-level Raw runs to the end of its input
	return locateAt(&raw, gjson.Parse(raw), field, 0, path)
}

// locateAt is locate from start, an object inside *src (found by walking
// it, so its offsets are those of *src) whose JSON path is field, or when
// elem is not 0 element elem-1 of the array at field.
func locateAt(src *string, start gjson.Result, field string, elem int, path []string) (*podMeta, error) {
	if !isObject(start) {
		return nil, malformed(elementField(field, elem), "must be an object, got "+typeName(start))
	}
	pm := newPodMeta()
	pm.src, pm.field, pm.elem, pm.path = src, field, elem, path
	pm.found = append(pm.foundBuf[:0], spanOf(start))
	cur := start
	for i, key := range path {
		// The field's path is only spelled out for a message: building it
		// at every level of every request cost an allocation per level.
		next, err := member(cur, "", key)
		if err != nil {
			return nil, malformed(pathField(elementField(field, elem), path[:i+1]), "duplicate key")
		}
		if !present(next) {
			return pm, nil
		}
		if !isObject(next) {
			return nil, malformed(pathField(elementField(field, elem), path[:i+1]), "must be an object, got "+typeName(next))
		}
		pm.found = append(pm.found, spanOf(next))
		cur = next
	}
	pm.meta = spanOf(cur)
	return pm, nil
}

// elementField is field, or when elem is not 0 element elem-1 of the
// array at field.
func elementField(field string, elem int) string {
	if elem == 0 {
		return field
	}
	return indexField(field, elem-1)
}

// pathField is the JSON path of the keys path below field.
func pathField(field string, path []string) string {
	for _, k := range path {
		field = join(field, k)
	}
	return field
}

// metaField is the JSON path of the metadata, spelled out once.
func (pm *podMeta) metaField() string {
	if pm.metaPath == "" {
		pm.metaPath = pathField(elementField(pm.field, pm.elem), pm.path)
	}
	return pm.metaPath
}

// stringMapEntry reads key from the string map mapName (annotations or
// labels) of the metadata. ok is false when the map or the key is absent.
func (pm *podMeta) stringMapEntry(mapName, key string) (value gjson.Result, ok bool, err error) {
	meta := pm.object(pm.meta)
	if !meta.Exists() {
		return gjson.Result{}, false, nil
	}
	// Field paths are spelled out only for a message.
	m, err := member(meta, "", mapName)
	if err != nil {
		return gjson.Result{}, false, malformed(join(pm.metaField(), mapName), "duplicate key")
	}
	if !present(m) {
		return gjson.Result{}, false, nil
	}
	if !isObject(m) {
		return gjson.Result{}, false, malformed(join(pm.metaField(), mapName), "must be an object, got "+typeName(m))
	}
	if mapName == "annotations" {
		pm.annotations = spanOf(m)
	}
	v, err := member(m, "", key)
	if err != nil {
		return gjson.Result{}, false, malformed(join(join(pm.metaField(), mapName), key), "duplicate key")
	}
	if !v.Exists() {
		return gjson.Result{}, false, nil
	}
	if v.Type != gjson.String {
		return gjson.Result{}, false, malformed(join(join(pm.metaField(), mapName), key), "must be a string, got "+typeName(v))
	}
	return v, true, nil
}

// annotation returns the user.info annotation: its decoded value, and its
// raw JSON token (to restore it byte for byte).
func (pm *podMeta) annotation() (value, raw string, ok bool, err error) {
	v, ok, err := pm.stringMapEntry("annotations", AnnotationKey)
	return str(v), v.Raw, ok, err
}

// splice is one change to an object's text: raw[start:end] becomes the
// annotation set to token, written by appendText. It is written straight
// into the answer rather than built on its own: a workload's ten thousand
// templates made as many small allocations, which the collector then
// scanned.
type splice struct {
	start, end int
	meta       *podMeta
	token      []byte
	// from is the first level of meta's path (then annotations, then the
	// annotation) to write; insert says whether it is a new member (else
	// its value replaces the one there), comma whether one goes before it.
	from          int
	insert, comma bool
}

// appendWithAnnotation appends the object with the user.info annotation
// set to the JSON string token valueToken. Only that member is written: the
// bytes before and after it are copied unchanged, so unknown fields, false
// booleans, nulls, number spellings and key order all survive. Absent levels
// (or null ones) are created as nested objects.
func (pm *podMeta) appendWithAnnotation(out, valueToken []byte) []byte {
	sp := pm.splice(valueToken)
	raw := *pm.src
	out = append(out, raw[:sp.start]...)
	out = sp.appendText(out)
	return append(out, raw[sp.end:]...)
}

// level is the i-th key from the object to the annotation: the path to the
// metadata, then annotations, then the annotation's key.
func (pm *podMeta) level(i int) string {
	switch {
	case i < len(pm.path):
		return pm.path[i]
	case i == len(pm.path):
		return "annotations"
	}
	return AnnotationKey
}

// splice is the change that sets the annotation to valueToken.
func (pm *podMeta) splice(valueToken []byte) splice {
	// The deepest existing object, and the first level still to create
	// below it.
	depth := len(pm.found) - 1 // pm.path[:depth] exist
	parent := pm.object(pm.found[depth])
	if annotations := pm.object(pm.annotations); depth == len(pm.path) && isObject(annotations) {
		parent = annotations
		depth++
	}
	sp := splice{meta: pm, token: valueToken, from: depth}
	existing, _ := member(parent, "", pm.level(depth))
	if existing.Exists() {
		// An explicit null (or the old annotation value) is replaced in place.
		sp.start, sp.end = existing.Index, existing.Index+len(existing.Raw)
		return sp
	}
	end := parent.Index + len(parent.Raw) - 1 // the closing brace
	sp.start, sp.end, sp.insert, sp.comma = end, end, true, !emptyObject(parent.Raw)
	return sp
}

// appendText appends what the splice writes: the level from (as a new
// member, or the value of the one there), the levels below it nested in
// it, and the token innermost.
func (sp *splice) appendText(out []byte) []byte {
	pm := sp.meta
	if sp.insert {
		if sp.comma {
			out = append(out, ',')
		}
		out = appendJSONString(out, pm.level(sp.from))
		out = append(out, ':')
	}
	last := len(pm.path) + 1 // the annotation's key
	for i := sp.from + 1; i <= last; i++ {
		out = append(out, '{')
		out = appendJSONString(out, pm.level(i))
		out = append(out, ':')
	}
	out = append(out, sp.token...)
	for i := sp.from + 1; i <= last; i++ {
		out = append(out, '}')
	}
	return out
}

// textLen is about the length of what appendText writes (exact for the
// keys of Kubernetes objects and a value without control characters).
func (sp *splice) textLen() int {
	pm := sp.meta
	n := len(sp.token)
	if sp.insert {
		if sp.comma {
			n++
		}
		n += jsonStringLen(pm.level(sp.from)) + 1
	}
	for i := sp.from + 1; i <= len(pm.path)+1; i++ {
		n += jsonStringLen(pm.level(i)) + 3 // {"key":...}
	}
	return n
}

// emptyObject reports whether raw, a valid JSON object, has no member.
func emptyObject(raw string) bool {
	for i := 1; i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
		case '}':
			return true
		default:
			return false
		}
	}
	return false
}

// edit is part of a mutation: the annotation of meta set to token, the
// JSON string to write as its value.
type edit struct {
	meta  *podMeta
	token []byte
}

// appendMutated appends the object with every edit made. The edits are of
// one object (the same raw text) and at distinct places, none inside
// another: each sets the annotation of another pod template.
func appendMutated(out []byte, edits []edit) []byte {
	if len(edits) == 1 {
		return edits[0].meta.appendWithAnnotation(out, edits[0].token)
	}
	raw := *edits[0].meta.src
	splices := make([]splice, len(edits))
	for i, e := range edits {
		splices[i] = e.meta.splice(e.token)
	}
	// In document order. The edits come path by path, and two paths'
	// templates may interleave (an insertion sort was quadratic there);
	// slices.SortFunc needs no reflection.
	slices.SortFunc(splices, func(a, b splice) int { return a.start - b.start })
	// Room for the whole object at once: grown by appending, a large
	// object's answer was copied several times over, each copy a new
	// allocation as large as the request.
	need := len(raw)
	for i := range splices {
		need += splices[i].textLen() - (splices[i].end - splices[i].start)
	}
	out = slices.Grow(out, need)
	pos := 0
	for i := range splices {
		sp := &splices[i]
		out = append(out, raw[pos:sp.start]...)
		out = sp.appendText(out)
		pos = sp.end
	}
	return append(out, raw[pos:]...)
}

func trimSpace(b string) string {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
