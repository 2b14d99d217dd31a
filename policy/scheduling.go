package main

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// The scheduling jobs (docs/BEHAVIOUR.md §3.9): the other work YuniKorn's
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
	labelApp                  = "app"
	yunikornPodLabelValue     = "yunikorn"
	annotationAllowPreemption = "yunikorn.apache.org/allow-preemption"
	annotationIgnoreApp       = "yunikorn.apache.org/ignore-application"
	annotationEnableYuniKorn  = "yunikorn.apache.org/namespace.enableYuniKorn"
	annotationGenerateAppID   = "yunikorn.apache.org/namespace.generateAppId"
	// The shim cuts the namespace to this many characters in a unique
	// generated ID, before the suffix.
	uniqueNamespaceLen = 26
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
const defaultBypassNamespaces = "^kube-system$"

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

// reconcileUniqueAppIDs makes applicationOwnership and scheduling agree on
// generateUniqueAppIds: both describe how the IDs of Pods without one are
// made, which with scheduling on this policy does itself. One given sets
// the other; both given and different is an error.
func reconcileUniqueAppIDs(errs *settingsError, s *Settings) {
	sc, ao := s.Scheduling, s.AppOwnership
	if sc == nil || ao == nil {
		return
	}
	switch {
	case sc.uniqueSet && ao.uniqueSet && sc.uniqueAppIDs != ao.uniqueAppIDs:
		errs.problems = append(errs.problems, "settings."+keyScheduling+".generateUniqueAppIds and settings."+keyAppOwnership+
			".generateUniqueAppIds differ: both say how the IDs of Pods without one are made, which the scheduling jobs do; set one of them")
	case sc.uniqueSet:
		ao.uniqueAppIDs = sc.uniqueAppIDs
	case ao.uniqueSet:
		sc.uniqueAppIDs = ao.uniqueAppIDs
	}
}

// triState is a namespace annotation as YuniKorn's namespace cache reads
// it: absent (unset), "true", or any other value (false).
type triState int8

const (
	unset triState = iota
	stateFalse
	stateTrue
)

// schedEdit sets one string member of the Pod: key in the object at path.
type schedEdit struct {
	path  []string
	key   string
	value string
}

// schedPlan is what the scheduling jobs change in one admitted Pod.
type schedPlan struct {
	src   *string // the Pod's text as received
	edits []schedEdit
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
	if app == yunikornPodLabelValue {
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
	process := enable == stateTrue
	if enable == unset {
		process = (len(sc.process) == 0 || matchAny(sc.process, ns)) && !matchAny(sc.bypass, ns)
	}
	if !process {
		p.note = "scheduling: namespace not processed"
		return p, nil
	}
	if schedulerName != sc.schedulerName {
		p.edits = append(p.edits, schedEdit{specPath, "schedulerName", sc.schedulerName})
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
			p.edits = append(p.edits, schedEdit{annotsPath, annotationIgnoreApp, "true"})
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
	p.edits = append(p.edits, schedEdit{annotsPath, annotationAllowPreemption, value})
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
	}{{label, labelAppIDCanonical}, {label, labelSparkAppID}, {label, labelAppID}, {annotation, annotationAppID},
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
			p.edits = append(p.edits, schedEdit{labelsPath, key, value})
		}
	}
	switch {
	case canonical == "" && spark == "" && legacy == "" && annotated == "":
		uid, err := podUID(cur)
		if err != nil {
			return err
		}
		id := generateAppID(ns, sc.uniqueAppIDs, uid)
		set(labelAppIDCanonical, id, canonical)
		set(labelAppID, id, legacy)
	case canonical != "":
		set(labelAppID, canonical, legacy)
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

// generateAppID is the shim's GenerateApplicationID: one application per
// namespace (yunikorn-<ns>-autogen), or with unique IDs <ns>-<uid>, and
// <ns>-uniqueautogen while there is no uid yet (the shim puts the uid in
// when it schedules the Pod), the namespace cut to 26 characters; the
// whole cut to 63 characters. The shim cuts with fmt's precision, which
// counts characters (an invalid byte counts as one); a namespace is ASCII.
func generateAppID(ns string, unique bool, uid string) string {
	var id string
	switch {
	case !unique:
		id = autogenPrefix + ns + autogenSuffix
	case uid == "":
		id = cutRunes(ns, uniqueNamespaceLen) + uniqueAutogenSuffix
	default:
		id = cutRunes(ns, uniqueNamespaceLen) + "-" + uid
	}
	return cutRunes(id, maxAppIDLen)
}

// cutRunes is s cut to n characters, as fmt's %.Ns.
func cutRunes(s string, n int) string {
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
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
		switch {
		case !v.Exists():
			return unset
		case v.Type == gjson.String && str(v) == "true":
			return stateTrue
		}
		return stateFalse
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

// effective is the Pod as the scheduling jobs leave it (without the
// user.info mutation), for the checks that read its scheduler and
// application: located again along cur's path.
func (p *schedPlan) effective(cur *podMeta) (*podMeta, error) {
	if p == nil || len(p.edits) == 0 {
		return cur, nil
	}
	text := p.apply(*p.src)
	return locate(text, cur.field, cur.path)
}

// apply returns obj with the plan's edits made.
func (p *schedPlan) apply(obj string) string {
	for _, e := range p.edits {
		obj = setStringMember(obj, e)
	}
	return obj
}

// setStringMember returns obj, a JSON object, with the string member
// e.key of the object at e.path set to e.value. Only that member is
// written: a member there has its value replaced, an absent one is added
// at the end of its object, and absent (or null) levels are created as
// nested objects; every other byte is kept.
func setStringMember(obj string, e schedEdit) string {
	keys := make([]string, 0, len(e.path)+1)
	keys = append(append(keys, e.path...), e.key)
	token := appendJSONString(nil, e.value)
	cur := gjson.Parse(obj)
	for i, key := range keys {
		next, _ := member(cur, "", key) // duplicates were refused when the plan read the object
		last := i == len(keys)-1
		if next.Exists() && !last && isObject(next) {
			cur = next
			continue
		}
		value := nested(keys[i+1:], token)
		if next.Exists() {
			// The member's value (or a null level) is replaced.
			return obj[:next.Index] + string(value) + obj[next.Index+len(next.Raw):]
		}
		end := cur.Index + len(cur.Raw) - 1 // the closing brace
		b := make([]byte, 0, len(obj)+len(key)+len(value)+4)
		b = append(b, obj[:end]...)
		if !emptyObject(cur.Raw) {
			b = append(b, ',')
		}
		b = appendJSONString(b, key)
		b = append(b, ':')
		b = append(b, value...)
		return string(append(b, obj[end:]...))
	}
	return obj
}

// nested is token inside objects keyed by keys, outermost first.
func nested(keys []string, token []byte) []byte {
	var b []byte
	for _, k := range keys {
		b = append(b, '{')
		b = appendJSONString(b, k)
		b = append(b, ':')
	}
	b = append(b, token...)
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
