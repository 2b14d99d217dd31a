package main

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Trust by provenance (docs/BEHAVIOUR.md §3.4): a submitter that may not
// supply the annotation may still copy one that the object's origin
// records. The operator can copy identities; it cannot invent one.

// Extras that the API server adds to the user of a service-account token
// bound to a Pod.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// proof is the outcome of one proof that applies to a request: the value
// its source records, or why there is none.
type proof struct {
	name   string // "owner" or "pod-token", for rules and messages
	source string // the object the value comes from, for messages
	value  string
	failed string
}

// ownerRef is the controller ownerReference of an object.
type ownerRef struct {
	apiVersion, kind, name, uid string
}

func (o ownerRef) kindRef() kindRef {
	group, _, found := strings.Cut(o.apiVersion, "/")
	if !found {
		group = ""
	}
	return kindRef{group, o.kind}
}

// proofs runs every proof that applies: the owner proof when a workloads
// entry names the submitter an operator, the pod-token proof for a Pod
// created with a token bound to a Pod under trustPodTokens.
func proofs(s *Settings, r request, kind kindRef, id identity) []proof {
	var out []proof
	var owners []kindRef
	for _, w := range s.Workloads {
		if matchAny(w.operators, id.user) {
			owners = append(owners, w.owners...)
		}
	}
	var podUID, podName string
	podToken := false
	if s.TrustPodTokens && kind == (kindRef{"", "Pod"}) {
		podUID, podName, podToken = boundPod(r.userInfo)
	}
	if len(owners) == 0 && !podToken {
		return nil
	}
	ns := ""
	if r.namespace.Type == gjson.String {
		ns = str(r.namespace)
	}
	ref, refProblem := controllerRef(r.object)
	if len(owners) > 0 {
		out = append(out, ownerProof(s, ns, ref, refProblem, owners, id))
	}
	if podToken {
		out = append(out, podTokenProof(s, ns, ref, refProblem, podUID, podName))
	}
	return out
}

// ownerProof: the controller owner, of a kind the submitter operates,
// exists with the uid the reference names, and records an identity.
func ownerProof(s *Settings, ns string, ref ownerRef, refProblem string, owners []kindRef, id identity) proof {
	p := proof{name: "owner"}
	if refProblem != "" {
		p.failed = refProblem
		return p
	}
	ok := kindRef{}
	for _, k := range owners {
		if k == ref.kindRef() {
			ok = k
		}
	}
	if ok.kind == "" {
		p.failed = "the controller owner is a " + kindName(ref.kindRef()) + ", and no workloads entry names " + id.user + " an operator of that kind"
		return p
	}
	p.source, p.value, p.failed = recordedBy(s, ns, ref)
	return p
}

// podTokenProof: the submitter's token is bound to the Pod that the new
// Pod's controller ownerReference names, and that Pod (same uid) records
// an identity.
func podTokenProof(s *Settings, ns string, ref ownerRef, refProblem, podUID, podName string) proof {
	p := proof{name: "pod-token"}
	switch {
	case refProblem != "":
		p.failed = refProblem
	case ref.kindRef() != (kindRef{"", "Pod"}) || ref.name != podName || ref.uid != podUID:
		p.failed = "the controller ownerReference (" + kindName(ref.kindRef()) + " " + ref.name + ", uid " + ref.uid +
			") is not the Pod the submitter's token is bound to (" + podName + ", uid " + podUID + ")"
	default:
		p.source, p.value, p.failed = recordedBy(s, ns, ref)
	}
	return p
}

// recordedBy reads the owner that ref names and the identity it records.
func recordedBy(s *Settings, ns string, ref ownerRef) (source, value, failed string) {
	source = ref.kind + " " + ns + "/" + ref.name
	obj, found, err := getObject(ref.apiVersion, ref.kind, ns, ref.name, false)
	if err == nil && (!found || gjson.Get(obj, "metadata.uid").String() != ref.uid) {
		// An operator creates Pods right after it sees their owner: the
		// host's cache may not have the owner yet, or still hold a
		// namesake that was deleted. Only the API server's copy refutes.
		obj, found, err = getObject(ref.apiVersion, ref.kind, ns, ref.name, true)
	}
	switch {
	case err != nil:
		return source, "", err.Error()
	case !found:
		return source, "", source + " does not exist"
	}
	if uid := gjson.Get(obj, "metadata.uid").String(); uid != ref.uid {
		return source, "", source + " has uid " + uid + ", not the uid " + ref.uid + " the ownerReference names"
	}
	locs, guarded, err := s.templatesOf(obj, ref.kind, ref.kindRef())
	if err != nil || !guarded {
		return source, "", source + " is not a kind whose templates this policy reads"
	}
	rec, err := recordedValue(locs)
	switch {
	case err != nil:
		return source, "", source + ": " + err.Error()
	case rec.disagree != "":
		return source, "", source + ": " + rec.disagree
	case !rec.ok:
		return source, "", source + " records no submitter"
	}
	return source, rec.value, ""
}

// ownerRefFields are the members of an ownerReference controllerRef reads.
var ownerRefFields = []string{"apiVersion", "kind", "name", "uid"}

// controllerRef reads the controller ownerReference of request.object, or
// says why there is none to use.
func controllerRef(object gjson.Result) (ownerRef, string) {
	refs := object.Get("metadata.ownerReferences")
	if !refs.IsArray() {
		return ownerRef{}, "the object has no controller ownerReference"
	}
	var ref ownerRef
	n := 0
	problem := ""
	// Declared once, not per reference: TinyGo puts both on the heap, and
	// garbage per element made collections, each walking back from the
	// pointers into the payload.
	var f [4]gjson.Result
	refs.ForEach(func(_, o gjson.Result) bool {
		// member, not o.Get: gjson's Get allocates its parse state, which
		// TinyGo puts on the heap. The first of duplicate keys counts, as
		// with Get.
		if c, _ := member(o, "", "controller"); c.Type != gjson.True {
			return true
		}
		n++
		f = [4]gjson.Result{}
		if err := members(o, "metadata.ownerReferences", ownerRefFields, f[:]); err != nil {
			problem = "the controller ownerReference is malformed: " + err.Error()
			return false
		}
		for _, v := range f {
			if v.Type != gjson.String || str(v) == "" {
				problem = "the controller ownerReference lacks apiVersion, kind, name or uid"
				return false
			}
		}
		ref = ownerRef{str(f[0]), str(f[1]), str(f[2]), str(f[3])}
		return true
	})
	switch {
	case problem != "":
		return ownerRef{}, problem
	case n == 0:
		return ownerRef{}, "the object has no controller ownerReference"
	case n > 1:
		return ownerRef{}, "the object has more than one controller ownerReference"
	}
	return ref, ""
}

// boundPod reads the Pod a service-account token is bound to from the
// user's extras; ok is false when there is none (or it is not one value).
func boundPod(userInfo gjson.Result) (uid, name string, ok bool) {
	extra := userInfo.Get("extra")
	one := func(key string) (string, bool) {
		v := extra.Get(gjson.Escape(key))
		if !v.IsArray() || len(v.Array()) != 1 || v.Array()[0].Type != gjson.String {
			return "", false
		}
		return v.Array()[0].String(), v.Array()[0].String() != ""
	}
	uid, okUID := one(extraPodUID)
	name, okName := one(extraPodName)
	return uid, name, okUID && okName
}

// decideByProvenance decides a supplied value from a submitter that no
// pattern allows: a proof that yields the value admits it; then trustRBAC,
// if set, decides; otherwise the message says which proofs failed.
func decideByProvenance(s *Settings, r request, kind kindRef, id identity, value string) (decision, error) {
	var failed []string
	for _, p := range proofs(s, r, kind, id) {
		if p.failed == "" && p.value == value {
			return accept("create: present, proven by " + p.name), nil
		}
		if p.failed == "" {
			p.failed = p.source + " records " + p.value + ", not the value supplied"
		}
		failed = append(failed, p.name+" proof failed: "+p.failed)
	}
	if s.TrustRBAC != nil {
		d, err := decideByRBAC(s, r, id, value)
		if err == nil && !d.accepted && len(failed) > 0 {
			d.message += "; " + strings.Join(failed, "; ")
		}
		return d, err
	}
	if len(failed) == 0 {
		return reject("create: present, submitter not allowed", codeForbidden, id.notAllowedMessage()), nil
	}
	return reject("create: present, provenance not proven", codeForbidden, id.notAllowedMessage()+": "+strings.Join(failed, "; ")), nil
}

// proven is an identity that the object's provenance proves.
type proven struct{ value, how string }

// provenValue is the identity a proof yields for an object that carries
// none, so that what an operator creates for a user is stamped with the
// user's identity rather than the operator's.
func provenValue(s *Settings, r request, kind kindRef, id identity) (proven, bool) {
	for _, p := range proofs(s, r, kind, id) {
		if p.failed == "" {
			return proven{value: p.value, how: "by " + p.name + " proof"}, true
		}
	}
	return proven{}, false
}
