package main

import (
	"regexp"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/workloads"
)

// Workload kinds beyond the built-in ones: custom resources that operators
// turn into Pods (docs/BEHAVIOUR.md §3.3). Each names where the annotation
// maps of its pod templates are, as paths with wildcards; the paths'
// grammar, the presets and the reading of settings.workloads are
// policy/workloads', which the host's tools share.

// workloadKind is one kind with its annotation paths.
type workloadKind struct {
	kindRef
	paths []workloads.Path
}

// workloadEntry is one entry of settings.workloads: a preset or a custom
// kind, and the operators that turn it into other objects.
type workloadEntry struct {
	name  string // for messages
	kinds []workloadKind
	// operators may supply the identity that an owner of one of owners
	// records (the owner proof, docs/BEHAVIOUR.md §3.4).
	operators []*regexp.Regexp
	owners    []kindRef
}

// locatePath finds the templates of obj (the text *src, with JSON path
// field) that ap names, appending them to out: one per element or member
// a wildcard matches. A template whose holder is absent or null is not
// there; a level of the wrong type is malformed.
func locatePath(ap *workloads.Path, src *string, obj gjson.Result, field string, out []*podMeta) ([]*podMeta, error) {
	err := ap.Walk(memberOf, obj, field, func(holder gjson.Result, f string, elem int) error {
		pm, err := locateAt(src, holder, f, elem, ap.Keys)
		if err != nil || len(pm.found)-1 < ap.Must {
			return err
		}
		out = append(out, pm)
		return nil
	})
	return out, err
}

// memberOf is member for workloads.Path.Walk: through the payload's index.
func memberOf(obj gjson.Result, key string) (gjson.Result, bool) {
	v, err := member(obj, "", key)
	return v, err != nil
}

// locateAll finds every template of a kind: the built-in kinds have one
// place, a workload kind those its paths name (in the order found, each
// once).
func locateAll(raw, field string, wk *workloadKind) ([]*podMeta, error) {
	raw = trimSpace(raw)
	root := gjson.Parse(raw)
	if !isObject(root) {
		return nil, malformed(field, "must be an object, got "+typeName(root))
	}
	var out []*podMeta
	for i := range wk.paths {
		var err error
		if out, err = locatePath(&wk.paths[i], &raw, root, field, out); err != nil {
			return nil, err
		}
	}
	if len(wk.paths) < 2 {
		return out, nil
	}
	return dedupe(out), nil
}

// dedupe drops the templates found twice (two paths may name one, such as
// spec.*.template... and spec.head.template...), keeping each where it was
// found first. A template is known by where the deepest object found on
// its path is in the document, and the levels still to create below it:
// sorting them finds the duplicates in n log n, where comparing the path
// of each with those of the earlier paths was quadratic. The keys are
// plain integers, which the collector does not follow.
func dedupe(out []*podMeta) []*podMeta {
	type place struct{ at, rest, i int32 }
	places := make([]place, len(out))
	for i, pm := range out {
		d := len(pm.found) - 1
		places[i] = place{pm.found[d].at, int32(len(pm.path) - d), int32(i)}
	}
	slices.SortFunc(places, func(a, b place) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		if a.rest != b.rest {
			return int(a.rest - b.rest)
		}
		return int(a.i - b.i)
	})
	drop := make([]bool, len(out))
	for a := 0; a < len(places); {
		b := a + 1
		for b < len(places) && places[b].at == places[a].at && places[b].rest == places[a].rest {
			b++
		}
		// Within a run (as many as there are paths, at most), the same
		// levels to create is the same template.
		for x := a + 1; x < b; x++ {
			for y := a; y < x; y++ {
				if !drop[places[y].i] && slices.Equal(missingLevels(out[places[x].i]), missingLevels(out[places[y].i])) {
					drop[places[x].i] = true
					break
				}
			}
		}
		a = b
	}
	kept := out[:0]
	for i, pm := range out {
		if !drop[i] {
			kept = append(kept, pm)
		}
	}
	return kept
}

// missingLevels are the levels of pm's path below the deepest object found.
func missingLevels(pm *podMeta) []string { return pm.path[len(pm.found)-1:] }

// workload returns the workload kind k, if settings name it.
func (s *Settings) workload(k kindRef) *workloadKind {
	for i := range s.Workloads {
		for j := range s.Workloads[i].kinds {
			if s.Workloads[i].kinds[j].kindRef == k {
				return &s.Workloads[i].kinds[j]
			}
		}
	}
	return nil
}

// templatesOf finds the templates of an object of kind k, whichever way k
// is guarded; guarded is false when it is not.
func (s *Settings) templatesOf(raw, field string, k kindRef) (locs []*podMeta, guarded bool, err error) {
	if path, ok := metadataPath(k); ok {
		pm, err := locate(raw, field, path)
		if err != nil {
			return nil, true, err
		}
		return []*podMeta{pm}, true, nil
	}
	wk := s.workload(k)
	if wk == nil {
		return nil, false, nil
	}
	locs, err = locateAll(raw, field, wk)
	return locs, true, err
}

// record is what the templates of one object record.
type record struct {
	value, token string // the value they all carry, and its JSON token
	ok           bool   // some template carries one
	disagree     string // names two templates that carry different values
	absent       []*podMeta
}

// recordedValue reads the identity that templates record: the value they
// all carry, and the templates that carry none.
func recordedValue(locs []*podMeta) (record, error) {
	var rec record
	first := ""
	for _, pm := range locs {
		v, tok, present, err := pm.annotation()
		if err != nil {
			return record{}, err
		}
		if !present {
			rec.absent = append(rec.absent, pm)
			continue
		}
		if rec.ok && v != rec.value {
			return record{disagree: "annotation " + AnnotationKey + " differs between " + first + " and " + pm.metaField() +
				".annotations: every pod template must record the same submitter"}, nil
		}
		if !rec.ok {
			rec.value, rec.token, rec.ok, first = v, tok, true, pm.metaField()+".annotations"
		}
	}
	return rec, nil
}

// decideWorkload applies the rules to a workload kind, template by template
// (docs/BEHAVIOUR.md §4.10).
func decideWorkload(r request, s *Settings, kind kindRef, wk *workloadKind, op string, id identity, obj string) (decision, error) {
	locs, err := locateAll(obj, "request.object", wk)
	if err != nil {
		return decision{}, err
	}
	if op == "UPDATE" {
		return decideWorkloadUpdate(r, s, id, wk, locs)
	}
	if len(locs) == 0 {
		return accept("create: no pod templates"), nil
	}
	rec, err := recordedValue(locs)
	if err != nil {
		return decision{}, err
	}
	if rec.disagree != "" {
		return reject("create: templates disagree", codeForbidden, rec.disagree), nil
	}
	if !rec.ok {
		return decideAbsent(s, r, kind, id, locs)
	}
	d, err := decidePresent(s, r, kind, id, rec.value)
	d.claim(rec.value)
	if err != nil || !d.accepted {
		return d, err
	}
	// The templates that carry nothing get the value the others carry: one
	// object, one submitter.
	for _, pm := range rec.absent {
		d.mutation = append(d.mutation, edit{meta: pm, token: []byte(rec.token)})
	}
	if d.mutation != nil {
		d.rule += ", copied to every template"
	}
	return d, nil
}

// decideWorkloadUpdate: the UPDATE rules for each template, matched with
// the template at the same place in oldObject. A template that is new (a
// worker group added) gets the value the object records, and may carry no
// other. An object that records no owner may gain one from an adopter
// (§4.13): every template then records the adopted value.
func decideWorkloadUpdate(r request, s *Settings, id identity, wk *workloadKind, locs []*podMeta) (decision, error) {
	oldRaw, err := objectField(r.oldObject, "oldObject")
	if err != nil {
		return decision{}, err
	}
	olds, err := locateAll(oldRaw, "request.oldObject", wk)
	if err != nil {
		return decision{}, err
	}
	rec, err := recordedValue(olds)
	if err != nil {
		return decision{}, err
	}
	recorded := rec.ok && rec.disagree == "" // templates that disagree record no one value
	if !rec.ok && rec.disagree == "" {
		if d, adopting, err := decideWorkloadAdopt(s, id, locs); adopting || err != nil {
			return d, err
		}
	}
	d := accept("update: unchanged")
	matches := matchPlaces(locs, olds)
	for i, cur := range locs {
		newValue, _, newPresent, err := cur.annotation()
		if err != nil {
			return decision{}, err
		}
		old := matches[i]
		if old == nil {
			switch {
			case !recorded && !newPresent:
			case !recorded || (newPresent && newValue != rec.value):
				d := reject("update: new template, other value", codeForbidden, msgChangeNotAllowed+": "+cur.metaField()+".annotations")
				d.claim(newValue)
				return d, nil
			case !newPresent:
				d.mutation = append(d.mutation, edit{meta: cur, token: []byte(rec.token)})
				d.rule = "update: new template, stamped"
			}
			continue
		}
		oldValue, oldToken, oldPresent, err := old.annotation()
		if err != nil {
			return decision{}, err
		}
		switch {
		case !oldPresent && !newPresent, oldPresent && newPresent && oldValue == newValue:
		case oldPresent && !newPresent:
			d.mutation = append(d.mutation, edit{meta: cur, token: []byte(oldToken)})
			if len(d.warnings) == 0 {
				d.warnings = []string{warnRestored}
			}
			d.rule = "update: removed, restore"
		default:
			d := reject("update: changed", codeForbidden, msgChangeNotAllowed+": "+cur.metaField()+".annotations")
			d.claim(newValue)
			return readoptRefusal(s, id, d), nil
		}
	}
	return d, nil
}

// decideWorkloadAdopt decides an UPDATE of a workload whose old object
// records no owner: adopting is false when the new one records none either.
// An adopter's value, valid and the same wherever it is written, is copied
// to every template that carries none, as at CREATE.
func decideWorkloadAdopt(s *Settings, id identity, locs []*podMeta) (d decision, adopting bool, err error) {
	rec, err := recordedValue(locs)
	switch {
	case err != nil:
		return decision{}, true, err
	case rec.disagree != "":
		return reject("update: adopted, templates disagree", codeForbidden, rec.disagree), true, nil
	case !rec.ok:
		return decision{}, false, nil
	}
	at := ""
	for _, pm := range locs {
		if _, _, present, _ := pm.annotation(); present {
			at = pm.metaField() + ".annotations"
			break
		}
	}
	d = decideAdopt(s, id, rec.value, at)
	if !d.accepted {
		return d, true, nil
	}
	for _, pm := range rec.absent {
		d.mutation = append(d.mutation, edit{meta: pm, token: []byte(rec.token)})
	}
	if d.mutation != nil {
		d.rule += ", copied to every template"
	}
	return d, true, nil
}

// matchPlaces pairs each template of the new object (locs) with the one at
// the same place in oldObject (olds), nil for a new one. Both are sorted by
// place and merged: a map keyed by each template's path spelled out cost
// several allocations per template on each side.
func matchPlaces(locs, olds []*podMeta) []*podMeta {
	const newRoot, oldRoot = "request.object", "request.oldObject"
	byPlace := func(pms []*podMeta, root string) []int32 {
		idx := make([]int32, len(pms))
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortFunc(idx, func(a, b int32) int { return comparePlace(pms[a], root, pms[b], root) })
		return idx
	}
	newIdx, oldIdx := byPlace(locs, newRoot), byPlace(olds, oldRoot)
	matches := make([]*podMeta, len(locs))
	j := 0
	for _, i := range newIdx {
		c := -1
		for j < len(oldIdx) {
			if c = comparePlace(olds[oldIdx[j]], oldRoot, locs[i], newRoot); c >= 0 {
				break
			}
			j++
		}
		if j < len(oldIdx) && c == 0 {
			matches[i] = olds[oldIdx[j]]
		}
	}
	return matches
}

// comparePlace orders templates by their place in their object (a below
// the JSON path ra, b below rb): the path of the object (or array) holding
// them, the element, then the path to the metadata. Two templates at the
// same place have the same metadata path, and templates found twice have
// been dropped (dedupe), so this is the order of those paths' identity.
func comparePlace(a *podMeta, ra string, b *podMeta, rb string) int {
	if c := strings.Compare(strings.TrimPrefix(a.field, ra), strings.TrimPrefix(b.field, rb)); c != 0 {
		return c
	}
	if a.elem != b.elem {
		return a.elem - b.elem
	}
	return slices.Compare(a.path, b.path)
}

// parseWorkloads reads settings.workloads (workloads.Parse), compiling
// each entry's operators as the other pattern lists.
func parseWorkloads(errs *settingsError, warnings *[]string, v gjson.Result) []workloadEntry {
	entries := workloads.Parse(&errs.problems, v, func(path string, f gjson.Result) []*regexp.Regexp {
		key := strings.TrimPrefix(path, "settings.")
		if list, ok := parseList(errs, key, f); ok {
			return compileAll(errs, warnings, key, list)
		}
		return nil
	})
	out := make([]workloadEntry, len(entries))
	for i, e := range entries {
		w := workloadEntry{name: e.Name, operators: e.Operators}
		for _, k := range e.Kinds {
			w.kinds = append(w.kinds, workloadKind{kindRef: kindRef{k.Group, k.Kind}, paths: k.Paths})
		}
		for _, o := range e.Owners {
			w.owners = append(w.owners, kindRef{o.Group, o.Kind})
		}
		out[i] = w
	}
	return out
}

// kindName is a kind as messages write it: Kind.group, or Kind.
func kindName(k kindRef) string { return workloads.KindRef{Group: k.group, Kind: k.kind}.String() }
