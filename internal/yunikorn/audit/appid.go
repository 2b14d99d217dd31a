package audit

import "github.com/yunikorn-userinfo/userinfo/policy/appid"

// AppID is the application the shim puts a Pod of namespace ns with uid
// in (appid.Resolve, the rules the policy's applicationOwnership check
// uses, docs/BEHAVIOUR.md §3.5): the ID its labels or annotations name,
// an -uniqueautogen suffix replaced with the uid, else the namespace's
// generated one (yunikorn-NS-autogen cut to 63 bytes, or with unique IDs
// <ns cut to 26>-<uid>). A Pod labelled with another Pod's resolved
// per-Pod ID is in that Pod's application.
func AppID(ns, uid string, labels, annotations map[string]string, uniqueAppIDs bool) string {
	return appid.Resolve(ns, uid, func(k string) string { return labels[k] }, func(k string) string { return annotations[k] }, uniqueAppIDs)
}
