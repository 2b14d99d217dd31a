package main

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/appid"
)

// Application ownership (docs/BEHAVIOUR.md §3.5): YuniKorn adds a Pod to
// the application its application ID names, whoever created the Pod and
// whatever its namespace (the shim keys applications by ID alone), and the
// application keeps the user of its first Pod. So a Pod labelled with
// someone else's application ID runs in their application, queue and
// quota, and so does a Pod without an ID in a namespace where another
// user's Pods already share the ID the shim generates for it. With
// applicationOwnership on, a Pod that would join an application whose live
// Pods belong to another user is refused (enforce) or admitted with a
// warning (warn), on CREATE and on an UPDATE that changes the application
// of a Pod not yet bound.

// appOwnershipSettings say what to do, and for which scheduler's Pods.
type appOwnershipSettings struct {
	mode          string // off, warn, enforce (the queue check's modes)
	schedulerName string
	// uniqueAppIDs mirrors the scheduler's
	// admissionController.filtering.generateUniqueAppId: a Pod without an
	// ID then gets one of its own rather than its namespace's.
	uniqueAppIDs bool
	uniqueSet    bool // generateUniqueAppIds was given
}

// parseAppOwnership reads applicationOwnership: a mode, or {mode,
// schedulerName, generateUniqueAppIds}.
func parseAppOwnership(errs *settingsError, v gjson.Result) *appOwnershipSettings {
	const key = "settings." + keyAppOwnership
	a := &appOwnershipSettings{mode: queueCheckOff, schedulerName: "yunikorn"}
	mode := func(path string, m gjson.Result) { parseMode(errs, path, m, &a.mode) }
	if v.Type == gjson.String {
		mode(key, v)
		return a
	}
	if !isObject(v) {
		errs.problems = append(errs.problems, key+": must be a mode (enforce, warn, off) or an object with mode, schedulerName and generateUniqueAppIds, got "+describe(v))
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
				return
			}
			a.schedulerName = str(f)
		case "generateUniqueAppIds":
			a.uniqueAppIDs, a.uniqueSet = parseBool(errs, keyAppOwnership+"."+name, f, false), true
		default:
			errs.problems = append(errs.problems, key+": unknown key "+quote(name)+" (known keys: mode, schedulerName, generateUniqueAppIds)")
		}
	})
	if !hasMode {
		errs.problems = append(errs.problems, key+".mode: missing")
	}
	return a
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
	return appid.Of(ns, appIDLookup(meta.Get("labels")), appIDLookup(meta.Get("annotations")), a.uniqueAppIDs)
}

// checkAppOwnership applies applicationOwnership to an admitted Pod: a
// CREATE, or an UPDATE that changes the application of a Pod not yet bound
// (old is nil on CREATE).
func checkAppOwnership(d decision, r request, s *Settings, kind kindRef, cur, old *podMeta) decision {
	ao := s.AppOwnership
	if ao == nil || ao.mode == queueCheckOff || !d.accepted || kind != (kindRef{"", "Pod"}) {
		return d
	}
	pod := cur.podObject()
	if sched := pod.Get("spec.schedulerName"); sched.Type != gjson.String || str(sched) != ao.schedulerName {
		return d
	}
	ns := ""
	if r.namespace.Type == gjson.String {
		ns = str(r.namespace)
	}
	appID, generated := ao.appIDOf(ns, pod.Get("metadata"))
	if appID == "" {
		return d // an application of its own
	}
	if old != nil {
		if !unbound(old) {
			return d
		}
		if oldID, _ := ao.appIDOf(ns, old.podObject().Get("metadata")); oldID == appID {
			return d // checked when it was set
		}
	}
	gns := appid.GeneratedNamespace(appID)
	if generated || appID == appid.Generated(ns) {
		gns = ns // also when the ID was cut to 63 bytes and names no namespace in full
	}
	user, _ := recordedIdentity(d, cur, s)
	owner, ownerPod, err := appOwner(ao, appID, gns, user, s)
	if err != nil {
		return checkSkipped(d, "application ownership check", "the Pods of application "+appID+" could not be listed: "+err.Error())
	}
	if owner == "" {
		return d
	}
	msg := "application " + appID + " belongs to user " + owner + " (pod " + ownerPod + "): a pod of user " + user + " may not join it"
	if generated {
		msg = "pods without an application ID in namespace " + ns + " join YuniKorn's generated application " + appID +
			", which belongs to user " + owner + " (pod " + ownerPod + "): a pod of user " + user +
			" may not join it; label it with an application ID of its own (applicationId), or run YuniKorn with admissionController.filtering.generateUniqueAppId"
	}
	return checkFound(d, "application ownership", ao.mode, msg)
}

// unbound reports whether a Pod (as pm has it) is not yet bound to a node:
// the shim still reads its application when it schedules it.
func unbound(pm *podMeta) bool {
	n := pm.podObject().Get("spec.nodeName")
	return n.Type != gjson.String || str(n) == ""
}

// podListFields are the fields the ownership check reads of each Pod.
const podListFields = `["metadata.name","metadata.namespace","metadata.labels","metadata.annotations","spec.schedulerName","status.phase"]`

// appOwner finds a live Pod of another user than user in application
// appID, wherever it is: the Pods of every namespace that carry the ID in a
// label the shim reads, and, when appID is the generated ID of namespace
// gns, the Pods of gns that name no ID. Each counts only if its own
// application, by the shim's order, is appID.
func appOwner(ao *appOwnershipSettings, appID, gns, user string, s *Settings) (owner, pod string, err error) {
	visit := func(items gjson.Result) {
		items.ForEach(func(_, p gjson.Result) bool {
			meta := p.Get("metadata")
			if p.Get("spec.schedulerName").String() != ao.schedulerName || terminated(p) {
				return true
			}
			if id, _ := ao.appIDOf(meta.Get("namespace").String(), meta); id != appID {
				return true
			}
			if other := podUser(meta, s); other != user {
				owner, pod = other, meta.Get("namespace").String()+"/"+meta.Get("name").String()
				return false
			}
			return true
		})
	}
	if appid.ValidLabelValue(appID) {
		for _, key := range [...]string{appid.LabelCanonical, appid.Label, appid.LabelSpark} {
			items, err := listPods("", key+"="+appID)
			if err != nil {
				return "", "", err
			}
			if visit(items); owner != "" {
				return owner, pod, nil
			}
		}
	}
	if gns != "" {
		items, err := listPods(gns, "")
		if err != nil {
			return "", "", err
		}
		visit(items)
	}
	return owner, pod, nil
}

// terminated reports whether a Pod has finished: the shim no longer counts
// it in its application, which completes once no live Pod is left.
func terminated(p gjson.Result) bool {
	switch p.Get("status.phase").String() {
	case "Succeeded", "Failed":
		return true
	}
	return false
}

// podUser is the user YuniKorn reads from a stored Pod's metadata.
func podUser(meta gjson.Result, s *Settings) string {
	v := meta.Get("annotations").Get(gjson.Escape(AnnotationKey))
	user, _ := userOfRecord(v.String(), v.Type == gjson.String, meta.Get("labels").Get(gjson.Escape(s.UserLabelKey)).String())
	return user
}

// listPods asks the host for the Pods that match selector ("" for all),
// with only the fields the ownership check reads: those of namespace ns
// (kubernetes/list_resources_by_namespace), or of every namespace when ns is
// "" (kubernetes/list_resources_all).
func listPods(ns, selector string) (gjson.Result, error) {
	b := make([]byte, 0, 256)
	b = append(b, `{"api_version":"v1","kind":"Pod"`...)
	op := "list_resources_all"
	if ns != "" {
		op = "list_resources_by_namespace"
		b = append(b, `,"namespace":`...)
		b = appendJSONString(b, ns)
	}
	if selector != "" {
		b = append(b, `,"label_selector":`...)
		b = appendJSONString(b, selector)
	}
	b = append(b, `,"field_masks":`...)
	b = append(b, podListFields...)
	b = append(b, '}')
	out, err := callHost("kubewarden", "kubernetes", op, b)
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
