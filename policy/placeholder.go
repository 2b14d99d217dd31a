package main

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/appid"
)

// Gang placeholders (docs/BEHAVIOUR.md §3.7). For an application with task
// groups, the YuniKorn shim creates placeholder Pods with its own
// credentials, owned by the application's originator Pod; it copies no
// identity to them (k8shim v1.9 pkg/cache/placeholder.go). A Pod CREATE is
// the scheduler's placeholder only when its submitter matches
// schedulerUsers and it carries the placeholder flag as the shim reads it;
// it then records what its originator records, and the queue and
// application ownership checks, which the originator passed when it
// created the application, do not apply to it.

// The placeholder flag, in the order the shim reads it (k8shim v1.9
// pkg/common/utils GetPlaceholderFlagFromPodSpec): the annotation, then
// the deprecated annotation and label it still honours.
const (
	annotationPlaceholderFlag    = "internal.yunikorn.apache.org/placeholder"
	oldAnnotationPlaceholderFlag = "yunikorn.apache.org/placeholder"
	oldLabelPlaceholderFlag      = "placeholder"
)

// defaultSchedulerUsers is the service account YuniKorn's Helm chart runs
// the scheduler as, in the namespace its documentation installs it in.
var defaultSchedulerUsers = []string{"^system:serviceaccount:yunikorn:yunikorn-admin$"}

// placeholder is what a scheduler's placeholder CREATE proves: the
// identity its originator records, or why it proves none.
type placeholder struct {
	source string // the originator, for rules and messages
	value  string
	failed string
	// unread: the originator could not be read at all (the webhook has
	// no access to Pods, or the API server did not answer).
	unread bool
}

// schedulerPlaceholder reports whether a CREATE of kind, whose pod
// metadata is cur, is a placeholder of the YuniKorn scheduler, and if so
// reads its originator. A Pod whose submitter is not the scheduler is
// never one, whatever it carries.
func schedulerPlaceholder(s *Settings, r request, kind kindRef, id identity, cur *podMeta) (placeholder, bool, error) {
	if kind != (kindRef{"", "Pod"}) || !matchAny(s.SchedulerUsers, id.user) {
		return placeholder{}, false, nil
	}
	if flag, err := placeholderFlag(cur); err != nil || !flag {
		return placeholder{}, false, err
	}
	ns := ""
	if r.namespace.Type == gjson.String {
		ns = str(r.namespace)
	}
	return originatorOf(ns, cur), true, nil
}

// placeholderFlag is the flag as the shim reads it: the first source with
// a value that strconv.ParseBool accepts decides; none means false.
func placeholderFlag(cur *podMeta) (bool, error) {
	for _, src := range [...]struct{ m, k string }{
		{"annotations", annotationPlaceholderFlag}, {"annotations", oldAnnotationPlaceholderFlag}, {"labels", oldLabelPlaceholderFlag},
	} {
		v, ok, err := cur.stringMapEntry(src.m, src.k)
		if err != nil {
			return false, err
		}
		if !ok || str(v) == "" {
			continue
		}
		if b, err := strconv.ParseBool(str(v)); err == nil {
			return b, nil
		}
	}
	return false, nil
}

// originatorOf reads the placeholder's originator: the one ownerReference
// of kind Pod (the shim's getOwnerReference), read through get_resource in
// the placeholder's namespace with its uid checked, in the application the
// placeholder names, recording an identity.
func originatorOf(ns string, cur *podMeta) placeholder {
	var ref ownerRef
	n := 0
	cur.object(cur.meta).Get("ownerReferences").ForEach(func(_, o gjson.Result) bool {
		if o.Get("apiVersion").String() == "v1" && o.Get("kind").String() == "Pod" {
			n++
			ref = ownerRef{"v1", "Pod", o.Get("name").String(), o.Get("uid").String()}
		}
		return true
	})
	switch {
	case n == 0:
		return placeholder{failed: "it has no ownerReference to its originator Pod"}
	case n > 1:
		return placeholder{failed: "it has more than one ownerReference to a Pod"}
	case ref.name == "" || ref.uid == "":
		return placeholder{failed: "its ownerReference to a Pod lacks name or uid"}
	}
	p := placeholder{source: "Pod " + ns + "/" + ref.name}
	obj, found, err := getObject("v1", "Pod", ns, ref.name, false)
	if err == nil && (!found || gjson.Get(obj, "metadata.uid").String() != ref.uid) {
		// The shim creates placeholders right after it sees the
		// originator: the host's cache may lag. Only a fresh read refutes.
		obj, found, err = getObject("v1", "Pod", ns, ref.name, true)
	}
	switch {
	case err != nil:
		p.failed, p.unread = err.Error(), true
		return p
	case !found:
		p.failed = p.source + " does not exist"
		return p
	}
	if uid := gjson.Get(obj, "metadata.uid").String(); uid != ref.uid {
		p.failed = p.source + " has uid " + uid + ", not the uid " + ref.uid + " the ownerReference names"
		return p
	}
	meta := gjson.Get(obj, "metadata")
	want := podAppID(cur.object(cur.meta).Get("labels"), cur.object(cur.meta).Get("annotations"))
	if got, ok := originatorApp(meta, ns, ref.uid, want); !ok {
		p.failed = p.source + " is in YuniKorn application " + quote(got) + ", not in application " + quote(want) + " that the placeholder names"
		return p
	}
	if v := meta.Get("annotations").Get(gjson.Escape(AnnotationKey)); v.Type == gjson.String {
		p.value = str(v)
		return p
	}
	p.failed = p.source + " records no submitter"
	return p
}

// originatorApp is the application ID the shim gives the originator
// (k8shim v1.9 GetApplicationIDFromPod), and whether it is want. An
// originator without one is in a generated application, per namespace or
// per Pod depending on the scheduler's configuration: either form is
// accepted.
func originatorApp(meta gjson.Result, ns, uid, want string) (string, bool) {
	id := podAppID(meta.Get("labels"), meta.Get("annotations"))
	if strings.HasSuffix(id, appid.UniqueAutogenSuffix) {
		id = strings.TrimSuffix(id, appid.UniqueAutogenSuffix) + "-" + uid
	}
	if id != "" {
		return id, id == want && want != ""
	}
	perNamespace := appid.Generate(ns, false, "")
	perPod := appid.Generate(ns, true, uid)
	return perNamespace, want == perNamespace || want == perPod
}

// decidePlaceholder decides the CREATE of a scheduler's placeholder cur,
// whose originator is ph. Without the annotation it is stamped with the
// originator's identity, or refused when the originator proves none; a
// value it supplies is admitted when it is exactly the originator's, and
// otherwise checked like any other supplied value. An originator that
// could not be read at all leaves the placeholder an ordinary Pod of the
// scheduler, with a warning: what YuniKorn's own admission controller
// records, and what the checks then decide.
func decidePlaceholder(s *Settings, r request, kind kindRef, id identity, cur *podMeta, ph placeholder, value string, present bool) (decision, error) {
	if ph.unread && !present {
		why := "its originator could not be read (" + ph.failed + "): decided as any Pod of " + id.user
		logWarning("placeholder not recognised", why)
		d, err := decideAbsent(s, r, kind, id, []*podMeta{cur})
		d.warnings = append(d.warnings, "placeholder "+podName(cur)+" not recognised: "+why)
		return d, err
	}
	if !present {
		if ph.failed != "" {
			return reject("create: placeholder, originator not proven", codeForbidden,
				"placeholder "+podName(cur)+" of the YuniKorn scheduler ("+id.user+") cannot carry its originator's identity: "+ph.failed), nil
		}
		d := accept("create: absent, placeholder of " + ph.source)
		d.mutation = []edit{{meta: cur, token: appendJSONString(make([]byte, 0, jsonStringLen(ph.value)), ph.value)}}
		d.placeholder = true
		return d, nil
	}
	if ph.failed == "" && value == ph.value {
		d := accept("create: present, placeholder of " + ph.source)
		d.placeholder = true
		return d, nil
	}
	d, err := decidePresent(s, r, kind, id, value)
	if err == nil && !d.accepted && d.code == codeForbidden {
		why := ph.failed
		if why == "" {
			why = ph.source + " records " + ph.value + ", not the value supplied"
		}
		d.message += "; placeholder proof failed: " + why
	}
	return d, err
}

// podName is the Pod's name, for messages ("" before the API server
// generates one).
func podName(cur *podMeta) string {
	return cur.object(cur.meta).Get("name").String()
}
