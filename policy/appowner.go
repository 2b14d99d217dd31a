package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/appid"
	"github.com/yunikorn-userinfo/userinfo/policy/appowners"
)

// Application ownership (docs/BEHAVIOUR.md §3.5): YuniKorn adds a Pod to
// the application its application ID names, whoever created the Pod and
// whatever its namespace (the shim keys applications by ID alone), and the
// application keeps the user of its first Pod. So a Pod labelled with
// someone else's application ID runs in their application, queue and
// quota, and so does a Pod without an ID in a namespace where another
// user's Pods already share the ID the shim generates for it. With
// applicationOwnership on, a Pod that would join an application whose
// Pods belong to another user is refused (enforce) or admitted with a
// warning (warn), whenever the shim would add it: on CREATE, when its last
// scheduling gate goes, and on an UPDATE that changes its application.

// appOwnershipSettings say what to do, and for which scheduler's Pods.
type appOwnershipSettings struct {
	mode string // off, warn, enforce (the queue check's modes)
	// opts are the model's parameters as appowners.FromSettings reads them
	// from the whole settings (scheduling.generateUniqueAppIds and
	// userLabelKey included): the host's index of application owners is
	// built from the same reading, so the check finds it.
	opts appowners.Options
	// uniqueSet: generateUniqueAppIds was given here, as unique
	// (reconcileScheduling compares it with scheduling's).
	uniqueSet, unique bool
}

// parseAppOwnership checks applicationOwnership: a mode, or {mode,
// schedulerName, generateUniqueAppIds, completingTimeout}. opts are the
// parameters appowners.FromSettings read from the settings.
func parseAppOwnership(errs *settingsError, v gjson.Result, opts appowners.Options) *appOwnershipSettings {
	const key = "settings." + keyAppOwnership
	a := &appOwnershipSettings{mode: queueCheckOff, opts: opts}
	mode := func(path string, m gjson.Result) { parseMode(errs, path, m, &a.mode) }
	if v.Type == gjson.String {
		mode(key, v)
		return a
	}
	if !isObject(v) {
		errs.problems = append(errs.problems, key+": must be a mode (enforce, warn, off) or an object with mode, schedulerName, generateUniqueAppIds and completingTimeout, got "+describe(v))
		return nil
	}
	hasMode := false
	eachMember(errs, key, v, func(name, path string, f gjson.Result) {
		switch name {
		case "mode":
			hasMode = true
			mode(path, f)
		case "schedulerName":
			if f.Type != gjson.String || strings.TrimSpace(str(f)) == "" {
				errs.problems = append(errs.problems, path+": must be a non-empty string, got "+describe(f))
			}
		case "generateUniqueAppIds":
			a.unique, a.uniqueSet = parseBool(errs, keyAppOwnership+"."+name, f, false), true
		case "completingTimeout":
			parseCompletingTimeout(errs, path, f)
		default:
			errs.problems = append(errs.problems, key+": unknown key "+quote(name)+" (known keys: mode, schedulerName, generateUniqueAppIds, completingTimeout)")
		}
	})
	if !hasMode {
		errs.problems = append(errs.problems, key+".mode: missing")
	}
	return a
}

// parseCompletingTimeout checks a non-negative duration such as "30s".
func parseCompletingTimeout(errs *settingsError, path string, f gjson.Result) {
	if f.Type == gjson.String {
		if d, err := time.ParseDuration(str(f)); err == nil && d >= 0 {
			return
		}
	}
	errs.problems = append(errs.problems, path+": must be a duration of zero or more such as 30s or 1m, got "+describe(f))
}

// podAppID is the application ID a Pod names (its metadata's labels and
// annotations), in the shim's order (appid.FromPod): "" when it names none.
func podAppID(labels, annotations gjson.Result) string {
	return appid.FromPod(appIDLookup(labels), appIDLookup(annotations))
}

// appIDLookup reads the string map m (labels or annotations) for appid.
func appIDLookup(m gjson.Result) appid.Lookup {
	return func(key string) string {
		v := m.Get(gjson.Escape(key))
		if v.Type != gjson.String {
			return ""
		}
		return str(v)
	}
}

// appIDOf is the application the shim puts a Pod of namespace ns in, by
// its metadata: the ID it names, else the one the shim generates. "" when
// the Pod gets an application of its own (the -uniqueautogen suffix, or
// generateUniqueAppIds), which no other Pod can join.
func (a *appOwnershipSettings) appIDOf(ns string, meta gjson.Result) (id string, generated bool) {
	return appid.Of(ns, appIDLookup(meta.Get("labels")), appIDLookup(meta.Get("annotations")), a.opts.UniqueAppIDs)
}

// resolvedAppID is the application the shim gives a Pod of namespace ns
// with uid and metadata meta (appid.Resolve): "" when it needs a uid the
// Pod has not got yet, and no other Pod can be in it.
func (a *appOwnershipSettings) resolvedAppID(ns, uid string, meta gjson.Result) string {
	return appid.Resolve(ns, uid, appIDLookup(meta.Get("labels")), appIDLookup(meta.Get("annotations")), a.opts.UniqueAppIDs)
}

// attached reports whether the shim has made the Pod p a task of its
// application: a Pod of the scheduler that has no scheduling gate (the
// shim adds a gated Pod to no application until its gates are removed, and
// gates cannot be added back) and has not finished (the shim completes a
// finished Pod's task).
func (a *appOwnershipSettings) attached(p gjson.Result) bool {
	if sched := p.Get("spec.schedulerName"); sched.Type != gjson.String || str(sched) != a.opts.SchedulerName {
		return false
	}
	return joined(p)
}

// joined reports whether a Pod of the scheduler is a task the shim counts:
// it has no scheduling gate and has not finished.
func joined(p gjson.Result) bool {
	if g := p.Get("spec.schedulingGates"); g.IsArray() && len(g.Array()) > 0 {
		return false
	}
	return !terminated(p)
}

// checkAppOwnership applies applicationOwnership to an admitted Pod CREATE
// or UPDATE (old is nil on CREATE). The shim reads a Pod's application on
// every event of it, and adds it as a task of that application unless it
// is gated or finished (k8shim v1.9 Context.UpdatePod): so the Pod joins
// an application on a CREATE, on the UPDATE that removes its last gate,
// and on any UPDATE that changes its application ID, bound or not.
func checkAppOwnership(d decision, r request, s *Settings, kind kindRef, cur, old *podMeta) decision {
	ao := s.AppOwnership
	if ao == nil || ao.mode == queueCheckOff || !d.accepted || kind != (kindRef{"", "Pod"}) {
		return d
	}
	pod := cur.podObject()
	if !ao.attached(pod) {
		return d // joins nothing now
	}
	ns := ""
	if r.namespace.Type == gjson.String {
		ns = str(r.namespace)
	}
	uid := str(pod.Get("metadata.uid"))
	var before gjson.Result
	if old != nil {
		before = old.podObject()
		if uid == "" {
			uid = str(before.Get("metadata.uid"))
		}
	}
	appID := ao.resolvedAppID(ns, uid, pod.Get("metadata"))
	if appID == "" {
		return d // an application of its own
	}
	if appID == appid.TooLongMarker {
		return checkTooLong(d, ao, pod, old != nil && joined(before), before)
	}
	oldID := ""
	if old != nil && joined(before) { // spec.schedulerName is immutable
		if oldID = ao.resolvedAppID(ns, uid, before.Get("metadata")); oldID == appID {
			return d // already its task
		}
	}
	// Only user.info proves who joins, as only it proves who owns
	// (podUser): a Pod with just the legacy label joins as the default user.
	value, ok := admittedValue(d, cur)
	user, _ := userOfRecord(value, ok, "")
	name := str(pod.Get("metadata.name"))
	self := ns + "/" + name
	found, missed, err := appOwned(ao, appID, user, ns, name, s)
	// answered is the check's answer, with a warning when the host missed
	// its index: whatever the answer, the check listed every Pod.
	answered := func(r decision) decision {
		if missed {
			r.warnings = append(r.warnings, indexMissedWarning(ao.opts))
		}
		return r
	}
	if err != nil {
		return answered(checkSkipped(d, "application ownership check", "the Pods of application "+appID+" could not be listed: "+err.Error()))
	}
	if !found && oldID != "" {
		// The shim adds it to the new application and keeps its task in
		// the old one, which it completes no more: the old application
		// would stay the Pod's user's for good, with no Pod left to show it.
		return answered(checkFound(d, "application ownership", ao.mode, "pod "+self+" is already a task of YuniKorn application "+oldID+
			": the scheduler would add it to application "+appID+" as well and keep it in "+oldID+
			" for as long as it runs, so its application cannot change; create a new pod instead"))
	}
	if !found {
		return answered(d)
	}
	msg := "application " + appID + " is owned by another user: a pod of user " + user + " may not join it"
	if appID == appid.Generated(ns) && podAppID(pod.Get("metadata.labels"), pod.Get("metadata.annotations")) == "" {
		msg = "pods without an application ID in namespace " + ns + " join YuniKorn's generated application " + appID +
			", which is owned by another user: a pod of user " + user +
			" may not join it; label it with an application ID of its own (applicationId), or run YuniKorn with admissionController.filtering.generateUniqueAppId"
	}
	return answered(checkFound(d, "application ownership", ao.mode, msg+ownerHint))
}

// indexMissedWarning is the warning on every answer whose ownership check
// asked this project's host for an index of application owners that it
// does not keep (settings changed since it started): the Pods were listed
// instead, which costs what the cluster holds and misses deleted Pods.
func indexMissedWarning(o appowners.Options) string {
	return "application ownership: this host keeps no index of application owners for these settings (" + o.IndexName() +
		"), so every Pod of scheduler " + o.SchedulerName + " was listed, which grows with the cluster and cannot see deleted Pods; " +
		"restart the webhook with the settings in force"
}

// checkTooLong applies applicationOwnership to a Pod whose application ID
// is longer than this policy reads (appid.TooLong): the watch cache keeps
// such IDs as one marker, so who owns the application cannot be known,
// and the Pod is refused (enforce) or warned about (warn). YuniKorn itself
// would accept the ID. An UPDATE that leaves a task's ID as it was is
// admitted: the Pod is already in its application, and refusing would
// leave it stuck (its finalizers too).
func checkTooLong(d decision, ao *appOwnershipSettings, pod gjson.Result, wasTask bool, before gjson.Result) decision {
	labels, annotations := pod.Get("metadata.labels"), pod.Get("metadata.annotations")
	id, source := appid.Named(appIDLookup(labels), appIDLookup(annotations))
	if wasTask && podAppID(before.Get("metadata.labels"), before.Get("metadata.annotations")) == id {
		return d // already its task
	}
	why := "is " + strconv.Itoa(len(id)) + " bytes long, more than the " + strconv.Itoa(appid.MaxIDBytes) + " bytes"
	if len(id) <= appid.MaxIDBytes {
		why = "is the marker the host's cache keeps in place of an ID longer than " + strconv.Itoa(appid.MaxIDBytes) + " bytes"
	}
	return checkFound(d, "application ownership", ao.mode, "the application ID in "+source+" "+why+
		" that the application ownership check reads, so who owns its application cannot be checked; use a shorter application ID")
}

// ownerHint ends a refusal: the owner is not named, since any user who may
// create a Pod would learn who runs what in namespaces they cannot read.
const ownerHint = "; who owns it is not shown here: a user who may list Pods in every namespace finds out with yunikorn-userinfo audit"

// podListFields are the fields the ownership check reads of each Pod.
const podListFields = `["metadata.name","metadata.namespace","metadata.uid","metadata.labels","metadata.annotations","spec.schedulerName","spec.schedulingGates","status.phase","status.containerStatuses.state.terminated.finishedAt"]`

// appOwned reports whether application appID is another user's than user:
// whether a Pod of another user, other than the Pod ns/name, is a task of
// it that the shim still counts. The host's index of application owners
// answers where it has one for these settings (serve, run); elsewhere
// (policy-server) the Pods are listed (appOwnedByList). missed: the host
// keeps indexes, but none for these settings.
func appOwned(ao *appOwnershipSettings, appID, user, ns, name string, s *Settings) (found, missed bool, err error) {
	found, ok, missed := appOwnedByIndex(ao.opts, appID, user, ns, name)
	if ok {
		return found, false, nil
	}
	found, err = appOwnedByList(ao, appID, user, ns+"/"+name, s)
	return found, missed, err
}

// The host capability of this project's hosts that answers from an index
// kept by their watch cache (binding, namespace, operation).
const (
	indexBinding   = "io.yunikorn-userinfo.host"
	indexNamespace = "index"
	indexValues    = "values"
)

// indexMissing is how this project's hosts say that they keep no index of
// the name asked (host/kubecap's ErrNoIndex).
const indexMissing = "no such index"

// appOwnedByIndex asks the host's index of application owners whether
// application appID has an owner other than user, the Pod ns/name aside:
// an answer of at most one user, whatever the size of the cluster. ok is
// false where the host offers no such index for these options (a
// Kubewarden host, or settings changed since the host started): any
// error means that the Pods must be listed instead, which is as exact.
// missed: the host answers the capability but keeps no index of this name.
func appOwnedByIndex(o appowners.Options, appID, user, ns, name string) (found, ok, missed bool) {
	b := make([]byte, 0, 256)
	b = append(b, `{"index":`...)
	b = appendJSONString(b, o.IndexName())
	b = append(b, `,"key":`...)
	b = appendJSONString(b, appID)
	b = append(b, `,"except":`...)
	b = appendJSONString(b, user)
	b = append(b, `,"limit":1,"exclude":{"namespace":`...)
	b = appendJSONString(b, ns)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, name)
	b = append(b, `}}`...)
	out, err := callHost(indexBinding, indexNamespace, indexValues, b)
	if err != nil {
		return false, false, strings.Contains(err.Error(), indexMissing)
	}
	if !gjson.ValidBytes(out) {
		return false, false, false
	}
	values := gjson.GetBytes(out, "values")
	if !values.IsArray() {
		return false, false, false
	}
	return len(values.Array()) > 0 || gjson.GetBytes(out, "more").Bool(), true, false
}

// appOwnedByList answers appOwned from a list of the scheduler's Pods
// (the field selector spec.schedulerName: Pods of other schedulers join
// no application), with the fields it reads (field masks), stopping at the
// first other owner. The shim keys applications by the ID alone, so the
// Pods of every namespace are read, each resolved as the shim resolves it
// (explicit, generated, cut, per Pod); a gated Pod is no task; a finished
// one counts until completingTimeout after it finished, as yunikorn-core
// keeps the application that long. A deleted Pod, which yunikorn-core
// also keeps that long, is not in the list: only the index sees it.
func appOwnedByList(ao *appOwnershipSettings, appID, user, self string, s *Settings) (bool, error) {
	items, err := listPods("spec.schedulerName=" + escapeFieldValue(ao.opts.SchedulerName))
	if err != nil {
		return false, err
	}
	now := time.Now()
	found := false
	items.ForEach(func(_, p gjson.Result) bool {
		meta := p.Get("metadata")
		ns := str(meta.Get("namespace"))
		if sched := p.Get("spec.schedulerName"); sched.Type != gjson.String || str(sched) != ao.opts.SchedulerName {
			return true
		}
		if g := p.Get("spec.schedulingGates"); g.IsArray() && len(g.Array()) > 0 {
			return true
		}
		if ns+"/"+str(meta.Get("name")) == self {
			return true
		}
		if ao.resolvedAppID(ns, str(meta.Get("uid")), meta) != appID {
			return true
		}
		if terminated(p) && !ao.completing(p, now) {
			return true
		}
		if podUser(meta) != user {
			found = true
			return false
		}
		return true
	})
	return found, nil
}

// escapeFieldValue escapes a field selector's value as
// fields.EscapeValue does: a backslash, comma or equals sign.
func escapeFieldValue(v string) string {
	if !strings.ContainsAny(v, `\,=`) {
		return v
	}
	b := make([]byte, 0, len(v)+4)
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\', ',', '=':
			b = append(b, '\\')
		}
		b = append(b, v[i])
	}
	return string(b)
}

// completing reports whether the finished Pod p still holds its
// application at now (appowners.Options.HeldUntil, by the latest finish
// time of its containers).
func (a *appOwnershipSettings) completing(p gjson.Result, now time.Time) bool {
	var times []string
	p.Get("status.containerStatuses").ForEach(func(_, c gjson.Result) bool {
		if v := c.Get("state.terminated.finishedAt"); v.Type == gjson.String {
			times = append(times, str(v))
		}
		return true
	})
	last, known := appowners.Latest(times)
	return now.Before(a.opts.HeldUntil(last, known, now))
}

// unbound reports whether a Pod (as pm has it) is not yet bound to a node:
// the shim still reads its queue when it schedules it.
func unbound(pm *podMeta) bool {
	n := pm.podObject().Get("spec.nodeName")
	return n.Type != gjson.String || str(n) == ""
}

// terminated reports whether a Pod has finished: the shim no longer counts
// it in its application, which completes once no live Pod is left.
func terminated(p gjson.Result) bool {
	return appowners.Finished(p.Get("status.phase").String())
}

// podUser is the owner a stored Pod's metadata proves: the user its
// user.info names. The legacy user label, which YuniKorn reads from a Pod
// without user.info, proves nothing (it may have been written before the
// policy guarded it): such a Pod owns its application as YuniKorn's
// default user, as the host's index counts it.
func podUser(meta gjson.Result) string {
	v := meta.Get("annotations").Get(gjson.Escape(AnnotationKey))
	user, _ := userOfRecord(v.String(), v.Type == gjson.String, "")
	return user
}

// listPods asks the host for the Pods of every namespace that match the
// field selector (kubernetes/list_resources_all), with only the fields the
// ownership check reads. policy-server keeps a watch per distinct selector,
// for good: a selector must come from the settings, never from a request
// (one per application ID would be a watch per application).
func listPods(fieldSelector string) (gjson.Result, error) {
	b := make([]byte, 0, 256)
	b = append(b, `{"api_version":"v1","kind":"Pod","field_selector":`...)
	b = appendJSONString(b, fieldSelector)
	b = append(b, `,"field_masks":`...)
	b = append(b, podListFields...)
	b = append(b, '}')
	out, err := callHost("kubewarden", "kubernetes", "list_resources_all", b)
	if err != nil {
		return gjson.Result{}, err
	}
	if !gjson.ValidBytes(out) {
		return gjson.Result{}, errString("the host's answer is not JSON")
	}
	items := gjson.GetBytes(out, "items")
	if items.Exists() && !items.IsArray() {
		return gjson.Result{}, errString("the host's answer has no list of items")
	}
	return items, nil
}
