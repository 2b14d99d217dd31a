package main

import (
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/queues"
	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// Queue check modes (docs/BEHAVIOUR.md §3.2).
const (
	queueCheckOff     = "off"
	queueCheckWarn    = "warn"
	queueCheckEnforce = "enforce"
)

// queueCheckSettings say where YuniKorn's configuration is and what to do
// with a pod its placement rules or queue ACLs would reject.
type queueCheckSettings struct {
	mode          string
	namespace     string // of the yunikorn-configs and yunikorn-defaults ConfigMaps
	partition     string
	schedulerName string // only pods with this spec.schedulerName are checked
	policyGroup   string // the key read is <policyGroup>.yaml
}

var defaultQueueCheck = queueCheckSettings{mode: queueCheckOff, namespace: "yunikorn", partition: "default",
	schedulerName: "yunikorn", policyGroup: "queues"}

// parseMode reads a check's mode (enforce, warn or off) into dst.
func parseMode(errs *settingsError, path string, m gjson.Result, dst *string) {
	switch {
	case m.Type != gjson.String:
		errs.problems = append(errs.problems, path+": must be one of enforce, warn, off, got "+describe(m))
	case str(m) == queueCheckOff || str(m) == queueCheckWarn || str(m) == queueCheckEnforce:
		*dst = str(m)
	default:
		errs.problems = append(errs.problems, path+": must be one of enforce, warn, off, got "+quote(str(m)))
	}
}

// parseQueueCheck reads queueCheck: a mode string, or an object with mode
// (required) and the optional locations.
func parseQueueCheck(errs *settingsError, v gjson.Result) *queueCheckSettings {
	const key = "settings." + keyQueueCheck
	q := defaultQueueCheck
	mode := func(path string, m gjson.Result) { parseMode(errs, path, m, &q.mode) }
	if v.Type == gjson.String {
		mode(key, v)
		return &q
	}
	if !isObject(v) {
		errs.problems = append(errs.problems, key+": must be a mode (enforce, warn, off) or an object with mode, got "+describe(v))
		return nil
	}
	hasMode := false
	eachMember(errs, key, v, func(name, path string, f gjson.Result) {
		var dst *string
		switch name {
		case "mode":
			hasMode = true
			mode(path, f)
			return
		case "namespace":
			dst = &q.namespace
		case "partition":
			dst = &q.partition
		case "schedulerName":
			dst = &q.schedulerName
		case "policyGroup":
			dst = &q.policyGroup
		default:
			errs.problems = append(errs.problems, key+": unknown key "+quote(name)+" (known keys: mode, namespace, partition, schedulerName, policyGroup)")
			return
		}
		switch {
		case f.Type != gjson.String:
			errs.problems = append(errs.problems, path+": must be a string, got "+describe(f))
		case strings.TrimSpace(str(f)) == "":
			errs.problems = append(errs.problems, path+": must not be empty")
		default:
			*dst = str(f)
		}
	})
	if !hasMode {
		errs.problems = append(errs.problems, key+".mode: missing (enforce, warn or off)")
	}
	return &q
}

// The last configuration parsed, kept while the instance lives (under
// policy-server every evaluation has a fresh instance, so this only saves
// work in hosts that keep instances, as serve does).
// (The lock matters only natively, where tests evaluate in parallel.)
var (
	lastQueuesMu   sync.Mutex
	lastQueuesText string
	lastQueues     *queues.Config
	lastQueuesErr  error
)

func parseQueues(text string) (*queues.Config, error) {
	lastQueuesMu.Lock()
	defer lastQueuesMu.Unlock()
	if lastQueues != nil || lastQueuesErr != nil {
		if text == lastQueuesText {
			return lastQueues, lastQueuesErr
		}
	}
	lastQueuesText = strings.Clone(text)
	lastQueues, lastQueuesErr = queues.Parse([]byte(text))
	return lastQueues, lastQueuesErr
}

// Labels and annotations the YuniKorn shim reads from a pod.
const (
	labelQueueCanonical = "yunikorn.apache.org/queue"
	annotationQueue     = "yunikorn.apache.org/queue"
	labelQueue          = "queue"
	annotationParent    = "yunikorn.apache.org/parentqueue"
	defaultUser         = userinfo.DefaultUser
)

// checkQueue applies the queue check to a CREATE the identity rules
// accepted (docs/BEHAVIOUR.md §3.2): it returns d unchanged, with a
// warning, or as a refusal.
func checkQueue(d decision, r request, s *Settings, kind kindRef, cur *podMeta) decision {
	qc := s.QueueCheck
	if qc == nil || qc.mode == queueCheckOff || !d.accepted {
		return d
	}
	target := cur.podObject()
	if sched := target.Get("spec.schedulerName"); sched.Type != gjson.String || str(sched) != qc.schedulerName {
		return d
	}
	skip := func(why string) decision { return checkSkipped(d, "queue check", why) }
	cfg, err, loadErr := loadQueues(qc)
	if loadErr != nil {
		return skip(loadErr.Error())
	}
	if err != nil {
		var deep *queues.TooComplexError
		var unmodelled *queues.UncheckedError
		if errors.As(err, &deep) || errors.As(err, &unmodelled) {
			return skip("the YuniKorn queue configuration (" + qc.policyGroup + ".yaml) cannot be checked: " + err.Error())
		}
		return skip("the YuniKorn queue configuration (" + qc.policyGroup + ".yaml) is not one YuniKorn would load: " + err.Error())
	}
	part := cfg.Partition(qc.partition)
	if part == nil {
		return skip("the YuniKorn queue configuration has no partition " + quote(qc.partition))
	}
	ns := str(r.namespace)
	if ns == "" {
		ns = "default"
	}
	app := queues.App{Tags: map[string]string{"namespace": ns}}
	if part.NeedsTag("namespace.parentqueue") {
		parent, err := namespaceAnnotation(ns, annotationParent)
		if err != nil {
			return skip("namespace " + ns + " could not be read: " + err.Error())
		}
		if parent != "" {
			app.Tags["namespace.parentqueue"] = parent
		}
	}
	app.Queue = podQueue(cur)
	userName, groups := recordedIdentity(d, cur, s)
	u, known, err := part.Identity(userName, groups)
	what := "YuniKorn will reject this " + kind.kind + " of user " + userName + " with groups [" + strings.Join(groups, ",") + "]"
	if err != nil {
		return queueRefusal(d, qc, what+": "+err.Error())
	}
	if !known {
		return skip("user " + userName + " has no groups and partition " + part.Name + " resolves groups from the scheduler host's user database")
	}
	app.User = u
	pl := part.Place(app)
	if pl.Err == nil {
		d.rule += "; queue " + pl.Queue
		return d
	}
	requested := ""
	if app.Queue != "" {
		requested = quote(app.Queue)
	}
	return queueRefusal(d, qc, what+pl.Explain(requested))
}

func queueRefusal(d decision, qc *queueCheckSettings, msg string) decision {
	return checkFound(d, "queue check", qc.mode, "queue check: "+msg)
}

// checkFound is the outcome of a check (the queue check, application
// ownership) that found a problem with an admitted object: in warn mode
// the object is admitted with msg as a warning, in enforce mode refused
// with it.
func checkFound(d decision, check, mode, msg string) decision {
	if mode == queueCheckWarn {
		d.warnings = append(d.warnings, msg)
		d.rule += "; " + check + " warned"
		return d
	}
	r := reject(d.rule+"; "+check+" refused", codeForbidden, msg)
	r.user, r.claimed, r.hasClaim = d.user, d.claimed, d.hasClaim
	return r
}

// checkSkipped admits the object of a check that could not be made, with
// the warning "<check> skipped: <why>" and a warn-level log line: such a
// check never blocks.
func checkSkipped(d decision, check, why string) decision {
	logWarning(check+" skipped", why)
	d.warnings = append(d.warnings, check+" skipped: "+why)
	d.rule += "; " + check + " skipped"
	return d
}

// podObject is the Pod, or the pod template, whose metadata this is.
func (pm *podMeta) podObject() gjson.Result {
	if i := len(pm.path) - 1; i < len(pm.found) {
		return pm.object(pm.found[i])
	}
	return gjson.Result{}
}

// podQueue is the queue the shim reads from a pod: the canonical label,
// then the annotation, then the legacy label.
func podQueue(cur *podMeta) string {
	for _, src := range [...]struct{ m, k string }{{"labels", labelQueueCanonical}, {"annotations", annotationQueue}, {"labels", labelQueue}} {
		if v, ok, err := cur.stringMapEntry(src.m, src.k); err == nil && ok && str(v) != "" {
			return str(v)
		}
	}
	return ""
}

// recordedIdentity is the user and groups YuniKorn will read from the
// object as admitted: the user.info annotation (written by this decision,
// or kept), else the legacy label, else the shim's default user.
func recordedIdentity(d decision, cur *podMeta, s *Settings) (string, []string) {
	value, ok := admittedValue(d, cur)
	label := ""
	if l, ok, err := cur.stringMapEntry("labels", s.UserLabelKey); err == nil && ok {
		label = str(l)
	}
	return userOfRecord(value, ok, label)
}

// admittedValue is the user.info value the object carries as admitted
// (written by this decision, or kept); ok is false when it carries none.
func admittedValue(d decision, cur *podMeta) (value string, ok bool) {
	if d.mutation != nil {
		return gjson.Parse(string(d.mutation[0].token)).String(), true
	}
	if v, _, present, err := cur.annotation(); err == nil && present {
		return v, true
	}
	return "", false
}

// userOfRecord is the user and groups YuniKorn reads from a pod's
// user.info value and legacy user label (userinfo.OfRecord).
func userOfRecord(value string, hasValue bool, label string) (string, []string) {
	return userinfo.OfRecord(value, hasValue, label)
}

// loadQueuesYAML reads <policyGroup>.yaml as the shim assembles it:
// yunikorn-defaults, overridden key by key by yunikorn-configs, binaryData
// (a ".gz" key inflated) over data within each (flatConfig, shared with
// configValidation); absent or empty means YuniKorn's built-in default.
// (version is the maps' resourceVersions, as versionKey words them.)
func loadQueuesYAML(qc *queueCheckSettings) (text, version string, err error) {
	var flat flatConfig
	var found [2]bool
	var rv [2]string
	for i, name := range [...]string{configMapDefaults, configMapConfigs} {
		obj, ok, err := getObject("v1", "ConfigMap", qc.namespace, name, false)
		if err != nil {
			return "", "", err
		}
		if ok {
			flat.maps[i] = gjson.Parse(obj)
			found[i], rv[i] = true, flat.maps[i].Get("metadata.resourceVersion").String()
		}
	}
	version = versionKey(qc, found, rv)
	text, _, err = flat.get(qc.policyGroup + ".yaml")
	if err != nil {
		return "", "", err
	}
	if strings.TrimSpace(text) == "" {
		return queues.DefaultYAML, version, nil
	}
	if len(text) > maxCheckedText {
		return "", "", errString(qc.policyGroup + ".yaml is " + strconv.Itoa(len(text)) + " bytes, more than the " + strconv.Itoa(maxCheckedText>>10) + " KiB the queue check reads")
	}
	return text, version, nil
}

// namespaceAnnotation reads one annotation of a namespace.
func namespaceAnnotation(ns, key string) (string, error) {
	obj, found, err := getObject("v1", "Namespace", "", ns, false)
	if err != nil || !found {
		return "", err
	}
	return gjson.Get(obj, "metadata.annotations").Get(gjson.Escape(key)).String(), nil
}

// getObject asks the host's kubernetes/get_resource for one object; found
// is false when it does not exist. fresh asks the API server rather than
// the host's cache.
func getObject(apiVersion, kind, namespace, name string, fresh bool) (string, bool, error) {
	b := make([]byte, 0, 160)
	b = append(b, `{"api_version":`...)
	b = appendJSONString(b, apiVersion)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, kind)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, name)
	if namespace != "" {
		b = append(b, `,"namespace":`...)
		b = appendJSONString(b, namespace)
	}
	if fresh {
		b = append(b, `,"disable_cache":true}`...)
	} else {
		b = append(b, `,"disable_cache":false}`...)
	}
	out, err := callHost("kubewarden", "kubernetes", "get_resource", b)
	if err != nil {
		if strings.HasPrefix(err.Error(), "Cannot find ") {
			return "", false, nil
		}
		what := kind + " " + name
		if namespace != "" {
			what = kind + " " + namespace + "/" + name
		}
		return "", false, errString(what + " could not be read: " + err.Error())
	}
	if !gjson.ValidBytes(out) || !gjson.ParseBytes(out).IsObject() {
		return "", false, errString("the host's answer for " + kind + " " + name + " is not a JSON object")
	}
	return string(out), true, nil
}

type errString string

func (e errString) Error() string { return string(e) }
