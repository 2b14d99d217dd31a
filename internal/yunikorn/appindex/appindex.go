// Package appindex is the host's index of YuniKorn application owners:
// for each application ID, the users whose Pods YuniKorn counts in it
// right now, kept by serve's watch cache of Pods (a kubecap.IndexSpec)
// and asked by the policy's applicationOwnership check in place of a list
// of every Pod. It reads a Pod with the policy's own rules (policy/appid,
// policy/userinfo, policy/appowners), so the index and the policy's list
// path agree Pod for Pod: only Pods of the scheduler; a gated Pod owns
// nothing; a finished Pod owns until completingTimeout after its last
// container finished; a deleted Pod owns for completingTimeout after its
// deletion (the index's linger), which a list cannot see.
package appindex

import (
	"time"

	"github.com/yunikorn-userinfo/userinfo/host/kubecap"
	"github.com/yunikorn-userinfo/userinfo/policy/appid"
	"github.com/yunikorn-userinfo/userinfo/policy/appowners"
	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// Spec is the index for options o, over v1 Pods.
func Spec(o appowners.Options) kubecap.IndexSpec {
	return kubecap.IndexSpec{Name: o.IndexName(), Resource: kubecap.Resource{APIVersion: "v1", Kind: "Pod"},
		Linger: o.Window(), Func: func(obj map[string]any, now time.Time) []kubecap.IndexEntry {
			return Entries(o, obj, now)
		}}
}

// Entries are what the Pod obj (decoded JSON) gives the index at now: its
// resolved application ID and its user, until when a finished Pod stops
// holding it; none for a Pod of another scheduler, a gated Pod, a Pod
// whose application needs a uid it has not got, or a finished Pod whose
// time is over.
func Entries(o appowners.Options, obj map[string]any, now time.Time) []kubecap.IndexEntry {
	spec, _ := obj["spec"].(map[string]any)
	if sched, _ := spec["schedulerName"].(string); sched != o.SchedulerName {
		return nil
	}
	if gates, _ := spec["schedulingGates"].([]any); len(gates) > 0 {
		return nil
	}
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	uid, _ := meta["uid"].(string)
	labels, _ := meta["labels"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	id := appid.Resolve(ns, uid, lookup(labels), lookup(annotations), o.UniqueAppIDs)
	if id == "" {
		return nil
	}
	// The legacy user label is no proof of ownership: a Pod that records
	// no user.info owns its application as YuniKorn's default user, so
	// that a label written before the policy guarded it claims nothing
	// (docs/BEHAVIOUR.md §3.5).
	value, hasValue := annotations[userinfo.AnnotationKey].(string)
	user, _ := userinfo.OfRecord(value, hasValue, "")
	e := kubecap.IndexEntry{Key: id, Value: user}
	status, _ := obj["status"].(map[string]any)
	if phase, _ := status["phase"].(string); appowners.Finished(phase) {
		var times []string
		statuses, _ := status["containerStatuses"].([]any)
		for _, c := range statuses {
			cs, _ := c.(map[string]any)
			state, _ := cs["state"].(map[string]any)
			term, _ := state["terminated"].(map[string]any)
			if t, ok := term["finishedAt"].(string); ok {
				times = append(times, t)
			}
		}
		last, known := appowners.Latest(times)
		if e.Until = o.HeldUntil(last, known, now); !e.Until.After(now) {
			return nil
		}
	}
	return []kubecap.IndexEntry{e}
}

// lookup reads a string map of a Pod's metadata for appid.
func lookup(m map[string]any) appid.Lookup {
	return func(key string) string {
		v, _ := m[key].(string)
		return v
	}
}
