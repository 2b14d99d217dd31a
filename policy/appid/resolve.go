package appid

import "strings"

// Resolve is the application the shim puts a Pod of namespace ns with uid
// in, as k8shim v1.9's GetApplicationIDFromPod returns it for a Pod of its
// scheduler: the ID the Pod names, its -uniqueautogen suffix replaced with
// "-<uid>" (not cut); else the generated ID (per namespace, or with unique
// IDs <ns cut to 26>-<uid>). "" when the ID needs a uid and uid is "" (a
// Pod being created: the API server gives it one after the mutating
// webhooks); no other Pod can be in that application then. An ID that is
// TooLong resolves to TooLongMarker, whatever its suffix: the Pods whose
// IDs are too long all fold into that one application, which no Pod
// admitted by the ownership check joins, and which reads the same from a
// whole Pod as from the watch cache's.
func Resolve(ns, uid string, label, annotation Lookup, uniqueAppIDs bool) string {
	id := FromPod(label, annotation)
	switch {
	case TooLong(id):
		return TooLongMarker
	case strings.HasSuffix(id, UniqueAutogenSuffix):
		if uid == "" {
			return ""
		}
		return strings.TrimSuffix(id, UniqueAutogenSuffix) + "-" + uid
	case id != "":
		return id
	case uniqueAppIDs:
		if uid == "" {
			return ""
		}
		return Generate(ns, true, uid)
	}
	return Generated(ns)
}
