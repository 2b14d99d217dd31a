package main

import (
	"github.com/tidwall/gjson"
)

// kindRef identifies a Kubernetes kind; the version does not matter.
type kindRef struct{ group, kind string }

// Where the metadata of the Pods a kind produces lives: the annotation is
// read and written there, never on the workload's own metadata (YuniKorn
// reads it from the Pod).
var (
	podMetadataPath      = []string{"metadata"}
	templateMetadataPath = []string{"spec", "template", "metadata"}
	cronJobMetadataPath  = []string{"spec", "jobTemplate", "spec", "template", "metadata"}
)

// metadataPath says, for each kind this policy guards, where that metadata
// is. A switch rather than a map: TinyGo hashes and compares struct map keys
// through reflection, about a hundred calls per lookup.
func metadataPath(k kindRef) (path []string, guarded bool) {
	switch k.group {
	case "":
		switch k.kind {
		case "Pod":
			return podMetadataPath, true
		case "ReplicationController":
			return templateMetadataPath, true
		}
	case "apps":
		switch k.kind {
		case "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet":
			return templateMetadataPath, true
		}
	case "batch":
		switch k.kind {
		case "Job":
			return templateMetadataPath, true
		case "CronJob":
			return cronJobMetadataPath, true
		}
	}
	return nil, false
}

// podMeta is the metadata object that carries the annotation, as found in
// one version of the object (request.object or request.oldObject).
type podMeta struct {
	raw   string         // the whole object, as received
	field string         // JSON path of the object, for messages
	path  []string       // path from the object to the metadata
	found []gjson.Result // found[i] is the object at path[:i] (found[0] is the root); len(found)-1 levels exist
	meta  gjson.Result   // the metadata object, if every level exists
	// annotations is the annotations map, once annotation() has found it.
	annotations gjson.Result
}

// locate walks raw along path. Levels that are absent or null are fine (a
// partial object); a level of the wrong type or a duplicated key is not.
func locate(raw string, field string, path []string) (*podMeta, error) {
	raw = trimSpace(raw) // gjson's top-level Raw runs to the end of its input
	root := gjson.Parse(raw)
	if !isObject(root) {
		return nil, malformed(field, "must be an object, got "+typeName(root))
	}
	pm := &podMeta{raw: raw, field: field, path: path, found: []gjson.Result{root}}
	cur, curField := root, field
	for _, key := range path {
		next, err := member(cur, curField, key)
		if err != nil {
			return nil, err
		}
		curField = join(curField, key)
		if !present(next) {
			return pm, nil
		}
		if !isObject(next) {
			return nil, malformed(curField, "must be an object, got "+typeName(next))
		}
		pm.found = append(pm.found, next)
		cur = next
	}
	pm.meta = cur
	return pm, nil
}

func (pm *podMeta) metaField() string {
	f := pm.field
	for _, k := range pm.path {
		f = join(f, k)
	}
	return f
}

// stringMapEntry reads key from the string map mapName (annotations or
// labels) of the metadata. ok is false when the map or the key is absent.
func (pm *podMeta) stringMapEntry(mapName, key string) (value gjson.Result, ok bool, err error) {
	if !pm.meta.Exists() {
		return gjson.Result{}, false, nil
	}
	mf := pm.metaField()
	m, err := member(pm.meta, mf, mapName)
	if err != nil || !present(m) {
		return gjson.Result{}, false, err
	}
	mf = join(mf, mapName)
	if !isObject(m) {
		return gjson.Result{}, false, malformed(mf, "must be an object, got "+typeName(m))
	}
	if mapName == "annotations" {
		pm.annotations = m
	}
	v, err := member(m, mf, key)
	if err != nil || !v.Exists() {
		return gjson.Result{}, false, err
	}
	if v.Type != gjson.String {
		return gjson.Result{}, false, malformed(join(mf, key), "must be a string, got "+typeName(v))
	}
	return v, true, nil
}

// annotation returns the user.info annotation: its decoded value, and its
// raw JSON token (to restore it byte for byte).
func (pm *podMeta) annotation() (value, raw string, ok bool, err error) {
	v, ok, err := pm.stringMapEntry("annotations", AnnotationKey)
	return str(v), v.Raw, ok, err
}

// appendWithAnnotation appends the object with the user.info annotation
// set to the JSON string token valueToken. Only that member is written: the
// bytes before and after it are copied unchanged, so unknown fields, false
// booleans, nulls, number spellings and key order all survive. Absent levels
// (or null ones) are created as nested objects.
func (pm *podMeta) appendWithAnnotation(out, valueToken []byte) []byte {
	// The deepest existing object, and the levels still to create below it.
	levels := append(append([]string(nil), pm.path...), "annotations", AnnotationKey)
	depth := len(pm.found) - 1 // pm.path[:depth] exist
	parent := pm.found[depth]
	if depth == len(pm.path) && isObject(pm.annotations) {
		parent = pm.annotations
		depth++
	}
	missing := levels[depth:]

	// missing[0] becomes a member of parent; the rest nest inside its
	// value, built from the innermost level out.
	val := valueToken
	for i := len(missing) - 1; i >= 1; i-- {
		wrapped := appendJSONString([]byte{'{'}, missing[i])
		wrapped = append(wrapped, ':')
		wrapped = append(wrapped, val...)
		val = append(wrapped, '}')
	}

	existing, _ := member(parent, "", missing[0])
	if existing.Exists() {
		// An explicit null (or the old annotation value) is replaced in place.
		out = append(out, pm.raw[:existing.Index]...)
		out = append(out, val...)
		return append(out, pm.raw[existing.Index+len(existing.Raw):]...)
	}
	end := parent.Index + len(parent.Raw) - 1 // the closing brace
	empty := true
	parent.ForEach(func(_, _ gjson.Result) bool { empty = false; return false })
	out = append(out, pm.raw[:end]...)
	if !empty {
		out = append(out, ',')
	}
	out = appendJSONString(out, missing[0])
	out = append(out, ':')
	out = append(out, val...)
	return append(out, pm.raw[end:]...)
}

// edit is a mutation: the object of meta with the annotation set to token,
// the JSON string to write as its value.
type edit struct {
	meta  *podMeta
	token []byte
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
