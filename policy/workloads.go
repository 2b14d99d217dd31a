package main

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Workload kinds beyond the built-in ones: custom resources that operators
// turn into Pods (docs/BEHAVIOUR.md §3.3). Each names where the annotation
// maps of its pod templates are, as paths with wildcards.

// pathStep is one step of an annotation path.
type pathStep struct {
	key  string // the member to enter, when wild is 0
	wild byte   // '*': every member of a map; '[': every element of an array
}

// annotationPath is where one kind keeps annotation maps that YuniKorn
// will read from its Pods, such as
// spec.workerGroupSpecs[*].template.metadata.annotations.
type annotationPath struct {
	text string
	// wild are the steps up to and including the last wildcard; keys are
	// the members after it, up to the object that holds "annotations".
	wild []pathStep
	keys []string
	// must is how many of keys must exist for there to be a template: the
	// policy may create a template's metadata and annotations, never the
	// template itself (an optional template that appears would change
	// what the operator does).
	must int
}

// workloadKind is one kind with its annotation paths.
type workloadKind struct {
	kindRef
	paths []annotationPath
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

// preset is a named set of kinds that one operator serves, with the paths
// taken from the CRDs its Go module ships.
type preset struct {
	name  string
	kinds []presetKind
	// extraOwners are kinds besides the preset's own whose identity its
	// operator copies into what it creates.
	extraOwners []kindRef
}

type presetKind struct {
	group, version, kind string
	resource             string // the plural, for the webhook's rules and RBAC
	paths                []string
}

// presets, by the operator versions they were read from: KubeRay
// ray-operator v1.4.2, Spark operator v2.3.0, Kubeflow training-operator
// v1.9.3 and trainer v2.0.0, JobSet v0.8.2, LeaderWorkerSet v0.6.2.
var presets = []preset{
	{name: "kuberay", kinds: []presetKind{
		{"ray.io", "v1", "RayCluster", "rayclusters", []string{
			"spec.headGroupSpec.template.metadata.annotations",
			"spec.workerGroupSpecs[*].template.metadata.annotations"}},
		{"ray.io", "v1", "RayJob", "rayjobs", []string{
			"spec.rayClusterSpec.headGroupSpec.template.metadata.annotations",
			"spec.rayClusterSpec.workerGroupSpecs[*].template.metadata.annotations",
			"spec.submitterPodTemplate.metadata.annotations"}},
		{"ray.io", "v1", "RayService", "rayservices", []string{
			"spec.rayClusterConfig.headGroupSpec.template.metadata.annotations",
			"spec.rayClusterConfig.workerGroupSpecs[*].template.metadata.annotations"}},
	}},
	{name: "spark", kinds: []presetKind{
		{"sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkapplications", []string{
			"spec.driver.annotations", "spec.executor.annotations"}},
		{"sparkoperator.k8s.io", "v1beta2", "ScheduledSparkApplication", "scheduledsparkapplications", []string{
			"spec.template.driver.annotations", "spec.template.executor.annotations"}},
	}},
	{name: "kubeflow-training", kinds: []presetKind{
		{"kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", []string{"spec.pytorchReplicaSpecs.*.template.metadata.annotations"}},
		{"kubeflow.org", "v1", "TFJob", "tfjobs", []string{"spec.tfReplicaSpecs.*.template.metadata.annotations"}},
		{"kubeflow.org", "v1", "MPIJob", "mpijobs", []string{"spec.mpiReplicaSpecs.*.template.metadata.annotations"}},
		{"kubeflow.org", "v1", "XGBoostJob", "xgboostjobs", []string{"spec.xgbReplicaSpecs.*.template.metadata.annotations"}},
		{"kubeflow.org", "v1", "PaddleJob", "paddlejobs", []string{"spec.paddleReplicaSpecs.*.template.metadata.annotations"}},
		{"kubeflow.org", "v1", "JAXJob", "jaxjobs", []string{"spec.jaxReplicaSpecs.*.template.metadata.annotations"}},
	}},
	{name: "kubeflow-trainer", kinds: []presetKind{
		// A TrainJob has no pod template: its annotations go to the JobSet
		// the trainer creates, whose templates inherit the identity by the
		// owner proof.
		{"trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs", []string{"spec.annotations"}},
	}},
	{name: "jobset", kinds: []presetKind{
		{"jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", []string{"spec.replicatedJobs[*].template.spec.template.metadata.annotations"}},
	}},
	{name: "leaderworkerset", kinds: []presetKind{
		{"leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", []string{
			"spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations",
			"spec.leaderWorkerTemplate.workerTemplate.metadata.annotations"}},
	}, extraOwners: []kindRef{{"", "Pod"}}}, // a group's worker StatefulSet is owned by its leader Pod
}

// presetNames lists the presets for messages.
func presetNames() string {
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

// parseAnnotationPath reads a path like a.b[*].c.*.metadata.annotations.
// It returns a problem instead when the path is not one.
func parseAnnotationPath(text string) (annotationPath, string) {
	ap := annotationPath{text: text}
	segs := strings.Split(text, ".")
	if len(segs) < 2 || segs[len(segs)-1] != "annotations" {
		return ap, "must name an annotations map: a dotted path ending in .annotations, like spec.template.metadata.annotations"
	}
	var steps []pathStep
	for _, seg := range segs[:len(segs)-1] {
		if seg == "*" {
			steps = append(steps, pathStep{wild: '*'})
			continue
		}
		key := seg
		n := 0
		for strings.HasSuffix(key, "[*]") {
			key = strings.TrimSuffix(key, "[*]")
			n++
		}
		if key == "" || strings.ContainsAny(key, "[]*") {
			return ap, "segment " + quote(seg) + " is not a member name, *, or a name followed by [*]"
		}
		steps = append(steps, pathStep{key: key})
		for ; n > 0; n-- {
			steps = append(steps, pathStep{wild: '['})
		}
	}
	last := -1
	for i, st := range steps {
		if st.wild != 0 {
			last = i
		}
	}
	ap.wild = steps[:last+1]
	for _, st := range steps[last+1:] {
		ap.keys = append(ap.keys, st.key)
	}
	ap.must = len(ap.keys)
	if ap.must > 0 && ap.keys[ap.must-1] == "metadata" {
		ap.must--
	}
	return ap, ""
}

// locate finds the templates of obj (the text *src, with JSON path field)
// that ap names, appending them to out: one per element or member a
// wildcard matches. A template whose holder is absent or null is not
// there; a level of the wrong type is malformed.
func (ap *annotationPath) locate(src *string, obj gjson.Result, field string, out []*podMeta) ([]*podMeta, error) {
	// elem, when not 0, is 1 + the index of cur in the array curField: the
	// template's field is spelled out only for a message.
	var walk func(cur gjson.Result, curField string, elem, i int) error
	walk = func(cur gjson.Result, curField string, elem, i int) error {
		if i == len(ap.wild) {
			pm, err := locateAt(src, cur, curField, elem, ap.keys)
			if err != nil || len(pm.found)-1 < ap.must {
				return err
			}
			out = append(out, pm)
			return nil
		}
		st := ap.wild[i]
		if st.wild == '[' {
			if !cur.IsArray() {
				return malformed(curField, "must be an array, got "+typeName(cur))
			}
		} else if !isObject(cur) {
			return malformed(curField, "must be an object, got "+typeName(cur))
		}
		if st.wild == 0 {
			next, err := member(cur, curField, st.key)
			if err != nil || !present(next) {
				return err
			}
			return walk(next, join(curField, st.key), 0, i+1)
		}
		var err error
		n := 0
		var seen keySet
		cur.ForEach(func(k, v gjson.Result) bool {
			f, elem := curField, 0
			switch {
			case st.wild == '*':
				if seen.add(cur, k) {
					err = malformed(join(curField, str(k)), "duplicate key")
					return false
				}
				f = join(curField, str(k))
			case i+1 == len(ap.wild):
				elem = n + 1
			default:
				f = indexField(curField, n)
			}
			n++
			if present(v) {
				err = walk(v, f, elem, i+1)
			}
			return err == nil
		})
		return err
	}
	err := walk(obj, field, 0, 0)
	return out, err
}

// keySet is the set of the keys of one JSON object read so far, to find a
// duplicate. It holds where each key's token is in the object, never the
// key itself: a key read from the payload is a pointer into the middle of
// it, which TinyGo's collector pays for by the payload's size at every
// collection (see podMeta), and a map of them made a map of ten thousand
// templates quadratic. Its table is pointer-free, so the collector skips
// it.
type keySet struct {
	slots []keySlot // open addressing, a power of two long, at most half full
	n     int
}

// keySlot is one key: the hash of its decoded text (0: an empty slot),
// and where its token is in the object.
type keySlot struct {
	hash    uint64
	at, end int32
}

// add adds key k (as ForEach gives it) of object obj, and reports whether
// obj holds it already. Keys compare decoded, as member compares them.
func (ks *keySet) add(obj, k gjson.Result) (dup bool) {
	key := str(k)
	h := uint64(14695981039346656037) // FNV-1a
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	h |= 1
	if 2*(ks.n+1) > len(ks.slots) {
		old := ks.slots
		ks.slots = make([]keySlot, max(16, 2*len(old)))
		for _, sl := range old {
			if sl.hash != 0 {
				ks.slots[ks.free(sl.hash)] = sl
			}
		}
	}
	mask := uint64(len(ks.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := ks.slots[i]
		if sl.hash == 0 {
			at := k.Index - obj.Index
			ks.slots[i] = keySlot{hash: h, at: int32(at), end: int32(at + len(k.Raw))}
			ks.n++
			return false
		}
		if sl.hash == h && str(gjson.Parse(obj.Raw[sl.at:sl.end])) == key {
			return true
		}
	}
}

// free is the first empty slot for hash h.
func (ks *keySet) free(h uint64) uint64 {
	mask := uint64(len(ks.slots) - 1)
	i := h & mask
	for ks.slots[i].hash != 0 {
		i = (i + 1) & mask
	}
	return i
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
		if out, err = wk.paths[i].locate(&raw, root, field, out); err != nil {
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

// indexField is field[i], in one allocation.
func indexField(field string, i int) string {
	b := make([]byte, 0, len(field)+12)
	b = append(b, field...)
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, ']')
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// recordPath is where every workload kind records its submitter besides
// its pod templates: the object's own annotations. An object whose
// templates are all optional (a RayJob that names an existing cluster, a
// TrainJob) would otherwise record no one, and what its operator creates
// for it could not be charged to its submitter (docs/BEHAVIOUR.md §3.3).
const recordPath = "metadata.annotations"

// withRecord adds recordPath to a kind's paths, unless they name it.
func withRecord(paths []annotationPath) []annotationPath {
	for _, ap := range paths {
		if ap.text == recordPath {
			return paths
		}
	}
	ap, _ := parseAnnotationPath(recordPath)
	return append(paths, ap)
}

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
		return decideWorkloadUpdate(r, wk, locs)
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
// other.
func decideWorkloadUpdate(r request, wk *workloadKind, locs []*podMeta) (decision, error) {
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
			return d, nil
		}
	}
	return d, nil
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

// parseWorkloads reads settings.workloads: a list whose entries are a
// preset's name, or an object with a preset or a custom kind and the
// operators of its kinds.
func parseWorkloads(errs *settingsError, warnings *[]string, v gjson.Result) []workloadEntry {
	const key = "settings." + keyWorkloads
	if !v.IsArray() {
		errs.problems = append(errs.problems, key+": must be an array of presets ("+presetNames()+") or objects, got "+describe(v))
		return nil
	}
	var out []workloadEntry
	i := 0
	v.ForEach(func(_, e gjson.Result) bool {
		field := key + "[" + strconv.Itoa(i) + "]"
		i++
		if e.Type == gjson.String {
			if p := findPreset(str(e)); p != nil {
				out = append(out, presetEntry(p))
			} else {
				errs.problems = append(errs.problems, field+": unknown preset "+quote(str(e))+" (presets: "+presetNames()+")")
			}
			return true
		}
		if !isObject(e) {
			errs.problems = append(errs.problems, field+": must be a preset name or an object, got "+describe(e))
			return true
		}
		if w, ok := parseWorkloadObject(errs, warnings, field, e); ok {
			out = append(out, w)
		}
		return true
	})
	// A kind named twice would be guarded by whichever entry comes first.
	seen := map[kindRef]string{}
	for _, w := range out {
		for _, k := range w.kinds {
			if prev, dup := seen[k.kindRef]; dup {
				errs.problems = append(errs.problems, key+": kind "+kindName(k.kindRef)+" is named by both "+prev+" and "+w.name)
			}
			seen[k.kindRef] = w.name
		}
	}
	return out
}

func findPreset(name string) *preset {
	for i := range presets {
		if presets[i].name == name {
			return &presets[i]
		}
	}
	return nil
}

// presetEntry is the entry of a preset, without operators.
func presetEntry(p *preset) workloadEntry {
	w := workloadEntry{name: "preset " + p.name}
	for _, pk := range p.kinds {
		k := workloadKind{kindRef: kindRef{pk.group, pk.kind}}
		for _, text := range pk.paths {
			ap, _ := parseAnnotationPath(text)
			k.paths = append(k.paths, ap)
		}
		k.paths = withRecord(k.paths)
		w.kinds = append(w.kinds, k)
		w.owners = append(w.owners, k.kindRef)
	}
	w.owners = append(w.owners, p.extraOwners...)
	return w
}

// parseWorkloadObject reads {"preset": name, "operators": [...]} or
// {"group", "kind", "paths", "operators", "owners"}.
func parseWorkloadObject(errs *settingsError, warnings *[]string, field string, e gjson.Result) (workloadEntry, bool) {
	var w workloadEntry
	var group, kind string
	var paths []annotationPath
	var hasPreset, hasKind, hasGroup, hasPaths bool
	var extraOwners []kindRef
	n := len(errs.problems)
	eachMember(errs, field, e, func(name, path string, f gjson.Result) {
		switch name {
		case "preset":
			hasPreset = true
			if f.Type != gjson.String {
				errs.problems = append(errs.problems, path+": must be a string, got "+describe(f))
			} else if p := findPreset(str(f)); p == nil {
				errs.problems = append(errs.problems, path+": unknown preset "+quote(str(f))+" (presets: "+presetNames()+")")
			} else {
				// Keys come in any order: keep the operators already read.
				pe := presetEntry(p)
				w.name, w.kinds, w.owners = pe.name, pe.kinds, pe.owners
			}
		case "version", "resource":
			// For the manifests that route the kind to the policy (the
			// chart's webhook rules and RBAC); the rules need neither.
			if f.Type != gjson.String || str(f) == "" {
				errs.problems = append(errs.problems, path+": must be a non-empty string, got "+describe(f))
			}
		case "group", "kind":
			if f.Type != gjson.String {
				errs.problems = append(errs.problems, path+": must be a string, got "+describe(f))
				return
			}
			if name == "group" {
				group, hasGroup = str(f), true
			} else {
				kind, hasKind = str(f), true
			}
		case "paths":
			hasPaths = true
			eachElement(errs, path, f, "an array of annotation paths", func(pf string, p gjson.Result) {
				if p.Type != gjson.String {
					errs.problems = append(errs.problems, pf+": must be a string, got "+describe(p))
					return
				}
				ap, problem := parseAnnotationPath(str(p))
				if problem != "" {
					errs.problems = append(errs.problems, pf+": "+quote(str(p))+" "+problem)
					return
				}
				paths = append(paths, ap)
			})
		case "operators":
			if list, ok := parseListAt(errs, path, f); ok {
				w.operators = compileAll(errs, warnings, strings.TrimPrefix(path, "settings."), list)
			}
		case "owners":
			eachElement(errs, path, f, "an array of kinds (group/Kind, or Kind for the core group)", func(of string, o gjson.Result) {
				if o.Type != gjson.String || str(o) == "" || strings.Count(str(o), "/") > 1 {
					errs.problems = append(errs.problems, of+": must be a kind as group/Kind (Kind for the core group), got "+describe(o))
					return
				}
				g, k, found := strings.Cut(str(o), "/")
				if !found {
					g, k = "", g
				}
				extraOwners = append(extraOwners, kindRef{g, k})
			})
		default:
			errs.problems = append(errs.problems, field+": unknown key "+quote(name)+" (known keys: preset, group, version, kind, resource, paths, operators, owners)")
		}
	})
	switch {
	case hasPreset && (hasKind || hasGroup || hasPaths):
		errs.problems = append(errs.problems, field+": names a preset and a kind: give one or the other")
	case !hasPreset && (!hasKind || !hasPaths):
		errs.problems = append(errs.problems, field+": must name a preset, or a kind with its paths")
	case !hasPreset:
		if kind == "" || strings.ContainsAny(kind, "/ .") || strings.ContainsAny(group, "/ ") {
			errs.problems = append(errs.problems, field+": group "+quote(group)+" and kind "+quote(kind)+" must be an API group and a kind, like ray.io and RayCluster")
		} else if _, builtin := metadataPath(kindRef{group, kind}); builtin {
			errs.problems = append(errs.problems, field+": "+kindName(kindRef{group, kind})+" is guarded already")
		} else if len(paths) == 0 && len(errs.problems) == n {
			errs.problems = append(errs.problems, field+".paths: must name at least one annotation path")
		}
		w.name = kindName(kindRef{group, kind})
		w.kinds = []workloadKind{{kindRef: kindRef{group, kind}, paths: withRecord(paths)}}
		w.owners = []kindRef{{group, kind}}
	}
	w.owners = append(w.owners, extraOwners...)
	return w, len(errs.problems) == n
}

// eachElement calls f with each element of the settings array v at path
// (and the element's path), or reports that v must be what.
func eachElement(errs *settingsError, path string, v gjson.Result, what string, f func(path string, e gjson.Result)) {
	if !v.IsArray() {
		errs.problems = append(errs.problems, path+": must be "+what+", got "+describe(v))
		return
	}
	i := 0
	v.ForEach(func(_, e gjson.Result) bool {
		f(path+"["+strconv.Itoa(i)+"]", e)
		i++
		return true
	})
}

// parseListAt is parseList for a list below the top level.
func parseListAt(errs *settingsError, path string, v gjson.Result) ([]string, bool) {
	return parseList(errs, strings.TrimPrefix(path, "settings."), v)
}

// kindName is a kind as messages write it: Kind.group, or Kind.
func kindName(k kindRef) string {
	if k.group == "" {
		return k.kind
	}
	return k.kind + "." + k.group
}
