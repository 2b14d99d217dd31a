package main

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Application ownership (docs/BEHAVIOUR.md §3.5): YuniKorn adds a Pod to
// the application its application ID names, whoever created the Pod, and
// the application keeps the user of its first Pod. So a Pod labelled with
// someone else's application ID runs in their application, queue and
// quota. With applicationOwnership on, a new Pod whose application ID is
// used in its namespace by a Pod of another user is refused (enforce) or
// admitted with a warning (warn).

// appOwnershipSettings say what to do, and for which scheduler's Pods.
type appOwnershipSettings struct {
	mode          string // off, warn, enforce (the queue check's modes)
	schedulerName string
}

// The application ID sources, in the order the YuniKorn shim (k8shim
// v1.9's GetApplicationIDFromPod) reads them.
const (
	labelAppIDCanonical = "yunikorn.apache.org/app-id"
	annotationAppID     = "yunikorn.apache.org/app-id"
	labelAppID          = "applicationId"
	labelSparkAppID     = "spark-app-selector"
	// uniqueAutogenSuffix makes the shim replace it with the Pod's uid: an
	// application of its own.
	uniqueAutogenSuffix = "-uniqueautogen"
)

// parseAppOwnership reads applicationOwnership: a mode, or {mode,
// schedulerName}.
func parseAppOwnership(errs *settingsError, v gjson.Result) *appOwnershipSettings {
	const key = "settings." + keyAppOwnership
	a := &appOwnershipSettings{mode: queueCheckOff, schedulerName: "yunikorn"}
	mode := func(path string, m gjson.Result) { parseMode(errs, path, m, &a.mode) }
	if v.Type == gjson.String {
		mode(key, v)
		return a
	}
	if !isObject(v) {
		errs.problems = append(errs.problems, key+": must be a mode (enforce, warn, off) or an object with mode and schedulerName, got "+describe(v))
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
		default:
			errs.problems = append(errs.problems, key+": unknown key "+quote(name)+" (known keys: mode, schedulerName)")
		}
	})
	if !hasMode {
		errs.problems = append(errs.problems, key+".mode: missing")
	}
	return a
}

// podAppID is the application ID the shim gives a Pod (its metadata m):
// "" when the Pod names none (the shim then generates one per namespace or
// per Pod, which this check leaves alone).
func podAppID(labels, annotations gjson.Result) string {
	get := func(m gjson.Result, key string) string {
		v := m.Get(gjson.Escape(key))
		if v.Type != gjson.String {
			return ""
		}
		return str(v)
	}
	id := get(labels, labelAppIDCanonical)
	if id == "" {
		id = get(annotations, annotationAppID)
	}
	if id == "" {
		id = get(labels, labelAppID)
	}
	if id == "" {
		id = get(labels, labelSparkAppID)
	}
	return id
}

// validLabelValue reports whether s can be a label value, and so be found
// with a label selector.
func validLabelValue(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && ((c != '-' && c != '_' && c != '.') || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// checkAppOwnership applies applicationOwnership to an admitted Pod
// CREATE.
func checkAppOwnership(d decision, r request, s *Settings, kind kindRef, cur *podMeta) decision {
	ao := s.AppOwnership
	if ao == nil || ao.mode == queueCheckOff || !d.accepted || s.ValidateOnly || kind != (kindRef{"", "Pod"}) {
		return d
	}
	pod := cur.podObject()
	if sched := pod.Get("spec.schedulerName"); sched.Type != gjson.String || str(sched) != ao.schedulerName {
		return d
	}
	meta := pod.Get("metadata")
	appID := podAppID(meta.Get("labels"), meta.Get("annotations"))
	if appID == "" || strings.HasSuffix(appID, uniqueAutogenSuffix) || !validLabelValue(appID) {
		// No ID, an ID of its own, or one that no label can carry and so
		// no selector can find (docs/BEHAVIOUR.md §3.5).
		return d
	}
	ns := ""
	if r.namespace.Type == gjson.String {
		ns = str(r.namespace)
	}
	user, _ := recordedIdentity(d, cur, s)
	owner, ownerPod, err := appOwner(ns, appID, ao.schedulerName, user, s)
	if err != nil {
		return checkSkipped(d, "application ownership check", "the Pods of application "+appID+" could not be listed: "+err.Error())
	}
	if owner == "" {
		return d
	}
	return checkFound(d, "application ownership", ao.mode, "application "+appID+" in namespace "+ns+" belongs to user "+owner+
		" (pod "+ownerPod+"): a pod of user "+user+" may not join it")
}

// appOwner finds a Pod of another user than user in application appID of
// namespace ns: it lists the Pods carrying the ID in each label the shim
// reads, and keeps those whose application, by the shim's order, is appID.
func appOwner(ns, appID, schedulerName, user string, s *Settings) (owner, pod string, err error) {
	for _, key := range [...]string{labelAppIDCanonical, labelAppID, labelSparkAppID} {
		items, err := listPods(ns, key+"="+appID)
		if err != nil {
			return "", "", err
		}
		items.ForEach(func(_, p gjson.Result) bool {
			meta := p.Get("metadata")
			if p.Get("spec.schedulerName").String() != schedulerName || podAppID(meta.Get("labels"), meta.Get("annotations")) != appID {
				return true
			}
			other := podUser(meta, s)
			if other != user {
				owner, pod = other, meta.Get("name").String()
				return false
			}
			return true
		})
		if owner != "" {
			return owner, pod, nil
		}
	}
	return "", "", nil
}

// podUser is the user YuniKorn reads from a stored Pod's metadata.
func podUser(meta gjson.Result, s *Settings) string {
	v := meta.Get("annotations").Get(gjson.Escape(AnnotationKey))
	user, _ := userOfRecord(v.String(), v.Type == gjson.String, meta.Get("labels").Get(gjson.Escape(s.UserLabelKey)).String())
	return user
}

// listPods asks the host's kubernetes/list_resources_by_namespace for the
// Pods of ns that match selector, with only the fields this check reads.
func listPods(ns, selector string) (gjson.Result, error) {
	b := make([]byte, 0, 160)
	b = append(b, `{"api_version":"v1","kind":"Pod","namespace":`...)
	b = appendJSONString(b, ns)
	b = append(b, `,"label_selector":`...)
	b = appendJSONString(b, selector)
	b = append(b, `,"field_masks":["metadata.name","metadata.labels","metadata.annotations","spec.schedulerName"]}`...)
	out, err := callHost("kubewarden", "kubernetes", "list_resources_by_namespace", b)
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
