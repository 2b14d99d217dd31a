package main

import (
	"regexp"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/appid"
	"github.com/yunikorn-userinfo/userinfo/policy/nsfilter"
)

// The scheduling jobs (docs/BEHAVIOUR.md §3.10): the other work YuniKorn's
// own admission controller does on a Pod CREATE (k8shim
// pkg/admission/admission_controller.go processPod, util.go
// updatePodLabel, namespace_cache.go, priority_class_cache.go). With the
// scheduling setting, a Pod created in a processed namespace gets
// spec.schedulerName; in a labelled one the application ID labels and the
// allow-preemption annotation, in any other the ignore-application
// annotation. The jobs never decide whether a Pod is admitted: they run
// once the identity rules and the checks have admitted it, and only change
// those members, as raw edits of the object's text.

// Keys and values YuniKorn's admission controller reads and writes
// (k8shim pkg/common/constants).
const (
	labelApp                  = nsfilter.LabelApp
	annotationAllowPreemption = "yunikorn.apache.org/allow-preemption"
	annotationIgnoreApp       = "yunikorn.apache.org/ignore-application"
	annotationEnableYuniKorn  = nsfilter.AnnotationEnableYuniKorn
	annotationGenerateAppID   = "yunikorn.apache.org/namespace.generateAppId"
)

// schedulingSettings is the scheduling setting. nil: the jobs are off.
type schedulingSettings struct {
	schedulerName string
	// Namespace lists (regular expressions, searched unanchored as
	// YuniKorn does): empty process and label lists match every namespace.
	process, bypass, label, noLabel []*regexp.Regexp
	uniqueAppIDs                    bool
	uniqueSet                       bool // generateUniqueAppIds was given
	// namespaceAnnotations honours the namespace's enableYuniKorn and
	// generateAppId annotations; preemption sets allow-preemption.
	namespaceAnnotations bool
	preemption           bool
}

const keyScheduling = "scheduling"

// schedulingKeys lists the keys of the scheduling object for the
// unknown-key message.
const schedulingKeys = "schedulerName, processNamespaces, bypassNamespaces, labelNamespaces, noLabelNamespaces, generateUniqueAppIds, namespaceAnnotations, preemption"

// defaultBypassNamespaces is YuniKorn's admissionController.filtering.bypassNamespaces.
const defaultBypassNamespaces = nsfilter.DefaultBypass

// parseScheduling reads scheduling: null (off) or an object whose keys
// default as YuniKorn's admission controller does.
func parseScheduling(errs *settingsError, warnings *[]string, v gjson.Result) *schedulingSettings {
	const path = "settings." + keyScheduling
	if v.Type == gjson.Null {
		return nil
	}
	if !isObject(v) {
		errs.problems = append(errs.problems, path+": must be an object with "+schedulingKeys+" (or null: off), got "+describe(v))
		return nil
	}
	sc := &schedulingSettings{schedulerName: "yunikorn", namespaceAnnotations: true, preemption: true,
		bypass: mustCompileAll([]string{defaultBypassNamespaces})}
	eachMember(errs, path, v, func(name, field string, f gjson.Result) {
		key := keyScheduling + "." + name
		var list *[]*regexp.Regexp
		switch name {
		case "schedulerName":
			switch s := str(f); {
			case f.Type != gjson.String:
				errs.problems = append(errs.problems, field+": must be a string, got "+describe(f))
			case strings.TrimSpace(s) == "" || strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\n/"):
				errs.problems = append(errs.problems, field+": must be a scheduler's name (not empty, no spaces or slashes), got "+quote(s))
			default:
				sc.schedulerName = s
			}
			return
		case "generateUniqueAppIds":
			sc.uniqueAppIDs, sc.uniqueSet = parseBool(errs, key, f, false), true
			return
		case "namespaceAnnotations":
			sc.namespaceAnnotations = parseBool(errs, key, f, true)
			return
		case "preemption":
			sc.preemption = parseBool(errs, key, f, true)
			return
		case "processNamespaces":
			list = &sc.process
		case "bypassNamespaces":
			list = &sc.bypass
		case "labelNamespaces":
			list = &sc.label
		case "noLabelNamespaces":
			list = &sc.noLabel
		default:
			errs.problems = append(errs.problems, path+": unknown key "+quote(name)+" (known keys: "+schedulingKeys+")")
			return
		}
		if l, ok := parseList(errs, key, f); ok {
			*list = compileAll(errs, warnings, key, l)
		}
	})
	return sc
}

// reconcileScheduling makes applicationOwnership and scheduling agree on
// generateUniqueAppIds: both describe how the IDs of Pods without one are
// made, which with scheduling on this policy does itself. One given sets
// the other (applicationOwnership's from scheduling's is
// appowners.FromSettings's rule); both given and different is an error.
//
// It also warns when the queue check or application ownership look at
// another scheduler's Pods than the one the jobs write.
func reconcileScheduling(errs *settingsError, s *Settings) {
	sc, ao := s.Scheduling, s.AppOwnership
	if sc == nil {
		return
	}
	for _, c := range []struct {
		key, mode, name string
	}{{keyQueueCheck, modeOf(s.QueueCheck), schedulerOf(s.QueueCheck)}, {keyAppOwnership, modeOfAO(ao), schedulerOfAO(ao)}} {
		if c.mode != "" && c.mode != queueCheckOff && c.name != sc.schedulerName {
			s.Warnings = append(s.Warnings, "settings."+c.key+".schedulerName is "+quote(c.name)+" and settings."+keyScheduling+
				".schedulerName "+quote(sc.schedulerName)+": the check passes over the Pods the scheduling jobs send to "+quote(sc.schedulerName))
		}
	}
	if ao == nil {
		return
	}
	switch {
	case sc.uniqueSet && ao.uniqueSet && sc.uniqueAppIDs != ao.unique:
		errs.problems = append(errs.problems, "settings."+keyScheduling+".generateUniqueAppIds and settings."+keyAppOwnership+
			".generateUniqueAppIds differ: both say how the IDs of Pods without one are made, which the scheduling jobs do; set one of them")
	case !sc.uniqueSet && ao.uniqueSet:
		sc.uniqueAppIDs = ao.unique
	}
}

func modeOf(q *queueCheckSettings) string {
	if q == nil {
		return ""
	}
	return q.mode
}

func schedulerOf(q *queueCheckSettings) string {
	if q == nil {
		return ""
	}
	return q.schedulerName
}

func modeOfAO(a *appOwnershipSettings) string {
	if a == nil {
		return ""
	}
	return a.mode
}

func schedulerOfAO(a *appOwnershipSettings) string {
	if a == nil {
		return ""
	}
	return a.opts.SchedulerName
}

// triState is a namespace annotation as YuniKorn's namespace cache reads
// it: absent (unset), "true", or any other value (false).
type triState = nsfilter.State

const (
	unset      = nsfilter.Unset
	stateFalse = nsfilter.False
	stateTrue  = nsfilter.True
)

// schedEdit sets one string member of the Pod: key in the object at path,
// to token (a JSON string).
type schedEdit struct {
	path  []string
	key   string
	token string
}

// setTo is the edit of key at path to value.
func setTo(path []string, key, value string) schedEdit {
	return schedEdit{path, key, string(appendJSONString(nil, value))}
}

// schedPlan is what the scheduling jobs change in one admitted Pod.
type schedPlan struct {
	src   *string // the Pod's text as received
	edits []schedEdit
	text  string // the Pod with the edits made, once built
	// warnings say which reads failed (and so which fallback was used).
	warnings []string
	note     string // for the decision's rule
}

var (
	specPath   = []string{"spec"}
	labelsPath = []string{"metadata", "labels"}
	annotsPath = []string{"metadata", "annotations"}
)

// planScheduling works out the scheduling jobs for a Pod CREATE whose
// metadata is cur: nil when the jobs are off or have nothing to do. It
// follows processPod's order: the scheduler's own Pods (label app:
// yunikorn) are left alone, then the namespace decides.
func planScheduling(s *Settings, r request, cur *podMeta) (*schedPlan, error) {
	sc := s.Scheduling
	if sc == nil {
		return nil, nil
	}
	label := func(key string) (string, error) {
		v, _, err := cur.stringMapEntry("labels", key)
		return str(v), err
	}
	annotation := func(key string) (string, error) {
		v, _, err := cur.stringMapEntry("annotations", key)
		return str(v), err
	}
	app, err := label(labelApp)
	if err != nil {
		return nil, err
	}
	if nsfilter.IsSchedulerPod(app) {
		return &schedPlan{note: "scheduling: the scheduler's own pod"}, nil
	}
	if r.namespace.Exists() && r.namespace.Type != gjson.String && r.namespace.Type != gjson.Null {
		return nil, malformed("request.namespace", "must be a string, got "+typeName(r.namespace))
	}
	ns := str(r.namespace)
	if ns == "" {
		ns = "default"
	}
	pod := cur.podObject()
	spec, err := member(pod, "", "spec")
	if err != nil {
		return nil, malformed("request.object.spec", "duplicate key")
	}
	if present(spec) && !isObject(spec) {
		return nil, malformed("request.object.spec", "must be an object, got "+typeName(spec))
	}
	specString := func(key string) (string, error) {
		if !isObject(spec) {
			return "", nil
		}
		v, err := member(spec, "", key)
		if err != nil {
			return "", malformed("request.object.spec."+key, "duplicate key")
		}
		if present(v) && v.Type != gjson.String {
			return "", malformed("request.object.spec."+key, "must be a string, got "+typeName(v))
		}
		return str(v), nil
	}
	schedulerName, err := specString("schedulerName")
	if err != nil {
		return nil, err
	}
	p := &schedPlan{src: cur.src}
	enable, generate := unset, unset
	if sc.namespaceAnnotations {
		enable, generate, err = namespaceFlags(ns)
		if err != nil {
			p.warnings = append(p.warnings, "scheduling: "+err.Error()+
				"; its annotations "+annotationEnableYuniKorn+" and "+annotationGenerateAppID+" were not read, the namespace lists decided")
		}
	}
	if !nsfilter.Processed(sc.process, sc.bypass, nsfilter.State(enable), ns) {
		p.note = "scheduling: namespace not processed"
		return p, nil
	}
	if schedulerName != sc.schedulerName {
		p.edits = append(p.edits, setTo(specPath, "schedulerName", sc.schedulerName))
	}
	labelled := generate == stateTrue
	if generate == unset {
		labelled = (len(sc.label) == 0 || matchAny(sc.label, ns)) && !matchAny(sc.noLabel, ns)
	}
	if !labelled {
		p.note = "scheduling: processed, not labelled"
		if v, err := annotation(annotationIgnoreApp); err != nil {
			return nil, err
		} else if v != "true" {
			p.edits = append(p.edits, setTo(annotsPath, annotationIgnoreApp, "true"))
		}
		return p, nil
	}
	p.note = "scheduling: processed, labelled"
	if err := p.planLabels(sc, ns, cur, label, annotation); err != nil {
		return nil, err
	}
	if !sc.preemption {
		return p, nil
	}
	current, err := annotation(annotationAllowPreemption)
	if err != nil {
		return nil, err
	}
	if current == "true" || current == "false" {
		return p, nil
	}
	pcName, err := specString("priorityClassName")
	if err != nil {
		return nil, err
	}
	allow, err := preemptSelfAllowed(pcName)
	if err != nil {
		p.warnings = append(p.warnings, "scheduling: "+err.Error()+"; "+annotationAllowPreemption+" was set to \"true\", as YuniKorn does for a PriorityClass it does not know")
	}
	value := "false"
	if allow {
		value = "true"
	}
	p.edits = append(p.edits, setTo(annotsPath, annotationAllowPreemption, value))
	return p, nil
}

// planLabels adds the application ID labels, as updatePodLabel does: a
// Pod that names no application (no canonical, legacy or Spark label, no
// app-id annotation) gets the generated ID in the canonical and the legacy
// label; a canonical ID is copied to the legacy label, and so is a
// canonical queue label to the legacy queue label. Empty values count as
// absent.
func (p *schedPlan) planLabels(sc *schedulingSettings, ns string, cur *podMeta,
	label, annotation func(string) (string, error)) error {
	var v [6]string
	for i, get := range [...]struct {
		f   func(string) (string, error)
		key string
	}{{label, appid.LabelCanonical}, {label, appid.LabelSpark}, {label, appid.Label}, {annotation, appid.Annotation},
		{label, labelQueueCanonical}, {label, labelQueue}} {
		s, err := get.f(get.key)
		if err != nil {
			return err
		}
		v[i] = s
	}
	canonical, spark, legacy, annotated, queue, legacyQueue := v[0], v[1], v[2], v[3], v[4], v[5]
	set := func(key, value, now string) {
		if value != now {
			p.edits = append(p.edits, setTo(labelsPath, key, value))
		}
	}
	switch {
	case canonical == "" && spark == "" && legacy == "" && annotated == "":
		uid, err := podUID(cur)
		if err != nil {
			return err
		}
		id := appid.Generate(ns, sc.uniqueAppIDs, uid)
		set(appid.LabelCanonical, id, canonical)
		set(appid.Label, id, legacy)
	case canonical != "":
		set(appid.Label, canonical, legacy)
	}
	if queue != "" {
		set(labelQueue, queue, legacyQueue)
	}
	return nil
}

// podUID is the Pod's metadata.uid as sent: empty on a CREATE from any
// ordinary client (the API server assigns the uid after admission).
func podUID(cur *podMeta) (string, error) {
	meta := cur.object(cur.meta)
	if !meta.Exists() {
		return "", nil
	}
	v, err := member(meta, "", "uid")
	if err != nil {
		return "", malformed(join(cur.metaField(), "uid"), "duplicate key")
	}
	if present(v) && v.Type != gjson.String {
		return "", malformed(join(cur.metaField(), "uid"), "must be a string, got "+typeName(v))
	}
	return str(v), nil
}

// namespaceFlags reads the namespace's enableYuniKorn and generateAppId
// annotations, as the admission controller's namespace cache holds them.
// A namespace that does not exist is unknown: both unset, as in that
// cache; one that cannot be read is unset too, with the error.
func namespaceFlags(ns string) (enable, generate triState, err error) {
	obj, found, err := getObject("v1", "Namespace", "", ns, false)
	if err != nil || !found {
		return unset, unset, err
	}
	annotations := gjson.Get(obj, "metadata.annotations")
	flag := func(key string) triState {
		v := annotations.Get(gjson.Escape(key))
		value := ""
		if v.Type == gjson.String {
			value = str(v)
		}
		return nsfilter.Flag(v.Exists(), value)
	}
	return flag(annotationEnableYuniKorn), flag(annotationGenerateAppID), nil
}

// preemptSelfAllowed is the PriorityClass cache's answer for name: false
// only when the class exists and its allow-preemption annotation is
// "false"; true for no class, a class that does not exist, and (with the
// error) one that cannot be read.
func preemptSelfAllowed(name string) (bool, error) {
	if name == "" {
		return true, nil
	}
	obj, found, err := getObject("scheduling.k8s.io/v1", "PriorityClass", "", name, false)
	if err != nil || !found {
		return true, err
	}
	v := gjson.Get(obj, "metadata.annotations").Get(gjson.Escape(annotationAllowPreemption))
	return !(v.Type == gjson.String && str(v) == "false"), nil
}

// build writes the Pod as the jobs leave it, with the user.info edit of
// the decision (mutation, for this Pod) made too, into p.text, the answer's
// mutated object. When the checks of §3.2 or §3.5 are on (check), it
// returns it located along cur's path for them; otherwise, and for a plan
// without edits (which builds nothing), cur.
func (p *schedPlan) build(cur *podMeta, mutation []edit, check bool) (*podMeta, error) {
	if p == nil || len(p.edits) == 0 {
		return cur, nil
	}
	edits := slices.Clip(p.edits)
	for _, m := range mutation {
		if m.meta != cur {
			// Not a Pod's own user.info edit (which cannot be): the
			// identity edits win, the jobs are left out.
			p.edits, p.warnings = nil, append(p.warnings, "scheduling: skipped: the identity edit is not of the Pod's metadata")
			return cur, nil
		}
		edits = append(edits, schedEdit{annotsPath, AnnotationKey, string(m.token)})
	}
	p.text = string(appendEdited(make([]byte, 0, len(*p.src)+256), *p.src, edits))
	if !check {
		return cur, nil
	}
	return locate(p.text, cur.field, cur.path)
}

// A textSplice replaces obj[start:end] with text.
type textSplice struct {
	start, end int
	text       []byte
}

// appendEdited appends obj, a JSON object, with the string members of
// edits set (each edit's value is a JSON string token), in one pass over
// obj's text: a member there has its value replaced; absent ones are
// added at the end of their object, in the edits' order; an absent (or
// null) map is created holding all of its edits. Every other byte is kept.
func appendEdited(out []byte, obj string, edits []schedEdit) []byte {
	root := gjson.Parse(obj)
	// The maps' parents (metadata) must exist for the edits of two maps to
	// be made independently; a Pod without metadata is edited one member
	// at a time.
	for _, e := range edits {
		cur := root
		for _, k := range e.path[:len(e.path)-1] {
			next, _ := member(cur, "", k) // duplicates were refused when the plan read the object
			if !isObject(next) {
				for _, e := range edits {
					obj = setStringMember(obj, e)
				}
				return append(out, obj...)
			}
			cur = next
		}
	}
	var splices []textSplice
	// Additions at the end of an object, by where its closing brace is.
	type addition struct {
		end  int
		text []byte
	}
	var adds []*addition
	addTo := func(o gjson.Result, member []byte) {
		end := o.Index + len(o.Raw) - 1
		for _, a := range adds {
			if a.end == end {
				a.text = append(append(a.text, ','), member...)
				return
			}
		}
		a := &addition{end: end}
		if !emptyObject(o.Raw) {
			a.text = append(a.text, ',')
		}
		a.text = append(a.text, member...)
		adds = append(adds, a)
	}
	// The edits map by map (or spec), in the order each first appears.
	var paths [][]string
	for _, e := range edits {
		if !slices.ContainsFunc(paths, func(p []string) bool { return slices.Equal(p, e.path) }) {
			paths = append(paths, e.path)
		}
	}
	for _, path := range paths {
		var group []schedEdit
		for _, e := range edits {
			if slices.Equal(e.path, path) {
				group = append(group, e)
			}
		}
		cur := root
		for _, k := range path[:len(path)-1] {
			cur, _ = member(cur, "", k)
		}
		last := path[len(path)-1]
		m, _ := member(cur, "", last)
		switch {
		case !isObject(m) && m.Exists():
			// null: replaced by the map, holding the group.
			splices = append(splices, textSplice{m.Index, m.Index + len(m.Raw), objectOf(group)})
		case !m.Exists():
			addTo(cur, memberText(last, objectOf(group)))
		default:
			for _, e := range group {
				if v, _ := member(m, "", e.key); v.Exists() {
					splices = append(splices, textSplice{v.Index, v.Index + len(v.Raw), []byte(e.token)})
				} else {
					addTo(m, memberText(e.key, []byte(e.token)))
				}
			}
		}
	}
	for _, a := range adds {
		splices = append(splices, textSplice{a.end, a.end, a.text})
	}
	slices.SortStableFunc(splices, func(a, b textSplice) int { return a.start - b.start })
	pos := 0
	for _, sp := range splices {
		out = append(out, obj[pos:sp.start]...)
		out = append(out, sp.text...)
		pos = sp.end
	}
	return append(out, obj[pos:]...)
}

// setStringMember returns obj, a JSON object, with the string member
// e.key of the object at e.path set to e.token: a member there has its
// value replaced, an absent one is added at the end of its object, and
// absent (or null) levels are created as nested objects; every other byte
// is kept.
func setStringMember(obj string, e schedEdit) string {
	keys := append(slices.Clip(e.path), e.key)
	cur := gjson.Parse(obj)
	for i, key := range keys {
		next, _ := member(cur, "", key)
		if next.Exists() && i < len(keys)-1 && isObject(next) {
			cur = next
			continue
		}
		value := nested(keys[i+1:], []byte(e.token))
		if next.Exists() {
			return obj[:next.Index] + string(value) + obj[next.Index+len(next.Raw):]
		}
		end := cur.Index + len(cur.Raw) - 1 // the closing brace
		sep := ""
		if !emptyObject(cur.Raw) {
			sep = ","
		}
		return obj[:end] + sep + string(memberText(key, value)) + obj[end:]
	}
	return obj
}

// memberText is "key":value.
func memberText(key string, value []byte) []byte {
	b := appendJSONString(make([]byte, 0, len(key)+len(value)+4), key)
	return append(append(b, ':'), value...)
}

// objectOf is an object holding the edits' members.
func objectOf(edits []schedEdit) []byte {
	b := []byte{'{'}
	for i, e := range edits {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, memberText(e.key, []byte(e.token))...)
	}
	return append(b, '}')
}

// nested is value inside objects keyed by keys, outermost first.
func nested(keys []string, value []byte) []byte {
	var b []byte
	for _, k := range keys {
		b = append(b, '{')
		b = appendJSONString(b, k)
		b = append(b, ':')
	}
	b = append(b, value...)
	for range keys {
		b = append(b, '}')
	}
	return b
}

// withScheduling adds an admitted Pod's scheduling plan to its decision:
// the edits (when there are any), the warnings of reads that failed, and
// what the jobs did, in the rule.
func withScheduling(d decision, p *schedPlan) decision {
	if len(p.edits) > 0 {
		d.sched = p
	}
	for _, w := range p.warnings {
		logWarning("scheduling: fallback", w)
	}
	d.warnings = append(d.warnings, p.warnings...)
	if p.note != "" {
		d.rule += "; " + p.note
	}
	return d
}
