package main

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Background audits (docs/BEHAVIOUR.md §4.12). Kubewarden's audit scanner
// replays every stored object as a CREATE whose request.userInfo carries
// nothing: no username, uid, groups or extra. The API server never sends
// that (an unauthenticated request is system:anonymous, with groups), so
// such a request asks whether the stored object records a submitter, not
// who submits it: the answer checks the record and changes nothing.

// replayed reports whether userInfo carries nothing at all.
func replayed(userInfo gjson.Result) bool {
	if !isObject(userInfo) {
		return false
	}
	empty := true
	userInfo.ForEach(func(_, v gjson.Result) bool {
		switch strings.Join(strings.Fields(v.Raw), "") {
		case "null", `""`, "[]", "{}":
			return true
		}
		empty = false
		return false
	})
	return empty
}

// Messages of a background audit's answers.
const (
	msgReplayMissing = "annotation " + AnnotationKey + " is missing: the object records no submitter " +
		"(it was created before the policy, while it was down or in monitor mode, or by a path the policy does not guard)"
	msgReplayDisagree = "annotation " + AnnotationKey + " differs between the object's pod templates: "
)

// decideReplay answers a background audit's replay of a stored object
// (obj, of a guarded kind): accepted when every pod template records the
// same valid identity, refused otherwise. It never mutates.
func decideReplay(s *Settings, kind kindRef, obj string) decision {
	locs, _, err := s.templatesOf(obj, "request.object", kind)
	if err != nil {
		return rejectInput(err)
	}
	rec, err := recordedValue(locs)
	switch {
	case err != nil:
		return rejectInput(err)
	case rec.disagree != "":
		return reject("audit: templates disagree", codeForbidden, msgReplayDisagree+rec.disagree)
	case !rec.ok || len(rec.absent) > 0:
		msg := msgReplayMissing
		if rec.ok {
			msg = "annotation " + AnnotationKey + " is missing at " + rec.absent[0].metaField() + ".annotations: " +
				"the object's other pod templates record a submitter, this one none"
		}
		return reject("audit: not recorded", codeForbidden, msg)
	}
	if problem := checkSuppliedValue(rec.value); problem != "" {
		return reject("audit: invalid value", codeMalformed, "annotation "+AnnotationKey+" is invalid: "+problem)
	}
	d := accept("audit: recorded")
	d.claim(rec.value)
	return d
}
