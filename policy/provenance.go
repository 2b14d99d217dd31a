package main

import (
	"strconv"
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
	// reached: the object's controller is an owner this proof reads (of a
	// kind the submitter operates, or the Pod its token is bound to), so a
	// failure is about that owner, not about whether the proof applies.
	reached bool
	// unrecorded: the failure is that the owner chain records no submitter
	// (source names the owner to re-create).
	unrecorded bool
}

// maxOwnerChain bounds the owners one proof reads: the controller owner and,
// while each records no submitter, the controller owners above it. Four
// covers the longest chain of the presets (TrainJob, JobSet, Job, Pod).
const maxOwnerChain = 4

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
// created with a token bound to a Pod under trustPodTokens. A malformed
// ownerReferences list is an error (400).
func proofs(s *Settings, r request, kind kindRef, id identity) ([]proof, error) {
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
		return nil, nil
	}
	ns := ""
	if r.namespace.Type == gjson.String {
		ns = str(r.namespace)
	}
	ref, refProblem, err := controllerRef(r.object, "request.object")
	if err != nil {
		return nil, err
	}
	if len(owners) > 0 {
		out = append(out, ownerProof(s, ns, ref, refProblem, owners, id))
	}
	if podToken {
		out = append(out, podTokenProof(s, ns, ref, refProblem, podUID, podName, id))
	}
	return out, nil
}

// ownerProof: the controller owner, of a kind the submitter operates,
// exists with the uid the reference names, and it (or an owner above it,
// see ownerChain) records an identity.
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
	p.reached = true
	ownerChain(s, ns, ref, &p, nil)
	return p
}

// podTokenProof: the submitter's token is bound to the Pod that the new
// Pod's controller ownerReference names, the submitter is that Pod's
// service account, and that Pod (same uid) records an identity.
func podTokenProof(s *Settings, ns string, ref ownerRef, refProblem, podUID, podName string, id identity) proof {
	p := proof{name: "pod-token"}
	switch {
	case refProblem != "":
		p.failed = refProblem
	case ref.kindRef() != (kindRef{"", "Pod"}) || ref.name != podName || ref.uid != podUID:
		p.failed = "the controller ownerReference (" + kindName(ref.kindRef()) + " " + ref.name + ", uid " + ref.uid +
			") is not the Pod the submitter's token is bound to (" + podName + ", uid " + podUID + ")"
	default:
		p.reached = true
		ownerChain(s, ns, ref, &p, func(pod gjson.Result, source string) string {
			// The API server binds a token only to a Pod that runs as the
			// token's service account; extras that came another way (an
			// authenticating proxy, impersonation) must name the same.
			sa := pod.Get("spec.serviceAccountName")
			want := "system:serviceaccount:" + ns + ":" + sa.String()
			if sa.Type != gjson.String || sa.String() == "" || id.user != want {
				return source + " runs as service account " + quote(sa.String()) + ", and the submitter " + id.user + " is not it"
			}
			return ""
		})
	}
	return p
}

// ownerChain fills p from the owner that ref names (after check, when
// given, accepts it): the identity it records, or, where it records none,
// the identity its own controller owner records, up to maxOwnerChain
// owners. The chain is followed only to owners of a kind that an operator
// of settings.workloads serves, and only back in time: an object is never
// created before its controller owner, so one that was had its
// ownerReferences set afterwards, by whoever may update it.
func ownerChain(s *Settings, ns string, ref ownerRef, p *proof, check func(obj gjson.Result, source string) string) {
	var walked []string // the owners read so far, each recording no one
	created := ""       // the creation time of the last of them
	for {
		source, obj, failed := readOwner(ns, ref)
		if p.source == "" {
			p.source = source
		}
		o := gjson.Parse(obj)
		if failed == "" && len(walked) > 0 {
			if owned := o.Get("metadata.creationTimestamp").String(); created == "" || owned == "" || created < owned {
				failed = "its controller owner " + source + " was created after it, or when is unknown: " +
					"an object is never older than its owner, so someone else set that ownerReference"
			}
		}
		if failed == "" && check != nil {
			failed, check = check(o, source), nil
		}
		var rec record
		if failed == "" {
			rec, failed = objectRecord(s, obj, source, ref)
		}
		switch {
		case failed != "" && len(walked) > 0:
			p.failed = unrecorded(walked) + "; " + failed
			return
		case failed != "":
			p.failed = failed
			return
		case rec.ok:
			p.source, p.value = source, rec.value
			return
		}
		walked = append(walked, source)
		next, problem, err := controllerRef(o, source)
		if err == nil && problem == "" && s.operated(next.kindRef()) && len(walked) < maxOwnerChain {
			created, ref = o.Get("metadata.creationTimestamp").String(), next
			continue
		}
		// The top of the chain records no one: an object created before
		// the policy guarded its kind. Re-creating it is what records it.
		p.failed, p.source, p.unrecorded = unrecorded(walked), source, true
		if err != nil {
			p.failed += " (" + err.Error() + ")"
		} else if problem == "" && len(walked) == maxOwnerChain {
			p.failed += " (the owners above are not read: at most " + strconv.Itoa(maxOwnerChain) + " are)"
		}
		return
	}
}

// unrecorded says that the owners walked record no submitter.
func unrecorded(walked []string) string {
	if len(walked) == 1 {
		return walked[0] + " records no submitter"
	}
	return walked[0] + " records no submitter, nor do the owners above it (" + strings.Join(walked[1:], ", ") + ")"
}

// readOwner reads the object ref names in ns, with the uid it names.
func readOwner(ns string, ref ownerRef) (source, obj, failed string) {
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
		// An owner that cannot be read proves nothing: the operator's
		// request fails and its controller retries it.
		return source, "", err.Error()
	case !found:
		return source, "", source + " does not exist"
	}
	if uid := gjson.Get(obj, "metadata.uid").String(); uid != ref.uid {
		return source, "", source + " has uid " + uid + ", not the uid " + ref.uid + " the ownerReference names"
	}
	return source, obj, ""
}

// objectRecord reads the identity the owner obj records: in its pod
// templates, and for a workload kind in its own metadata as well.
func objectRecord(s *Settings, obj, source string, ref ownerRef) (record, string) {
	locs, guarded, err := s.templatesOf(obj, ref.kind, ref.kindRef())
	if err != nil || !guarded {
		return record{}, source + " is not a kind whose templates this policy reads"
	}
	rec, err := recordedValue(locs)
	switch {
	case err != nil:
		return record{}, source + ": " + err.Error()
	case rec.disagree != "":
		return record{}, source + ": " + rec.disagree
	}
	return rec, ""
}

// ownerRefFields are the members of an ownerReference controllerRef reads.
var ownerRefFields = []string{"apiVersion", "kind", "name", "uid", "controller"}

// operated reports whether an operator of settings.workloads serves kind k.
func (s *Settings) operated(k kindRef) bool {
	for _, w := range s.Workloads {
		if len(w.operators) == 0 {
			continue
		}
		for _, o := range w.owners {
			if o == k {
				return true
			}
		}
	}
	return false
}

// controllerRef reads the controller ownerReference of object (whose JSON
// path is field), or says why there is none to use. A duplicated key, or a
// list or entry of the wrong type, is an error: decoders disagree on which
// duplicate wins, as everywhere else (docs/BEHAVIOUR.md §4.5).
func controllerRef(object gjson.Result, field string) (ownerRef, string, error) {
	meta, err := member(object, field, "metadata")
	if err != nil {
		return ownerRef{}, "", err
	}
	if !present(meta) {
		return ownerRef{}, "the object has no controller ownerReference", nil
	}
	field = join(field, "metadata")
	if !isObject(meta) {
		return ownerRef{}, "", malformed(field, "must be an object, got "+typeName(meta))
	}
	refs, err := member(meta, field, "ownerReferences")
	if err != nil {
		return ownerRef{}, "", err
	}
	if !present(refs) {
		return ownerRef{}, "the object has no controller ownerReference", nil
	}
	field = join(field, "ownerReferences")
	if !refs.IsArray() {
		return ownerRef{}, "", malformed(field, "must be an array, got "+typeName(refs))
	}
	var ref ownerRef
	n, i := 0, 0
	problem := ""
	// Declared once, not per reference: TinyGo puts both on the heap, and
	// garbage per element made collections, each walking back from the
	// pointers into the payload.
	var f [5]gjson.Result
	refs.ForEach(func(_, o gjson.Result) bool {
		i++
		if !isObject(o) {
			err = malformed(field+"["+strconv.Itoa(i-1)+"]", "must be an object, got "+typeName(o))
			return false
		}
		f = [5]gjson.Result{}
		// The entry's field path is spelled out only for a message: a
		// string per reference is garbage the collector walks (podMeta).
		if err = members(o, field, ownerRefFields, f[:]); err != nil {
			f = [5]gjson.Result{}
			err = members(o, field+"["+strconv.Itoa(i-1)+"]", ownerRefFields, f[:])
			return false
		}
		if f[4].Type != gjson.True || problem != "" {
			return true
		}
		n++
		for _, v := range f[:4] {
			if v.Type != gjson.String || str(v) == "" {
				problem = "the controller ownerReference lacks apiVersion, kind, name or uid"
				return true
			}
		}
		ref = ownerRef{str(f[0]), str(f[1]), str(f[2]), str(f[3])}
		return true
	})
	switch {
	case err != nil:
		return ownerRef{}, "", err
	case problem != "":
		return ownerRef{}, problem, nil
	case n == 0:
		return ownerRef{}, "the object has no controller ownerReference", nil
	case n > 1:
		return ownerRef{}, "the object has more than one controller ownerReference", nil
	}
	return ref, "", nil
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
	ps, err := proofs(s, r, kind, id)
	if err != nil {
		return decision{}, err
	}
	for _, p := range ps {
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
// user's identity rather than the operator's. failed are the proofs that
// reached the object's owner and failed: the object was created for an
// owner whose submitter is not proven, and must not be charged to the
// operator that creates it.
func provenValue(s *Settings, r request, kind kindRef, id identity) (p proven, ok bool, failed []proof, err error) {
	ps, err := proofs(s, r, kind, id)
	if err != nil {
		return proven{}, false, nil, err
	}
	for _, pr := range ps {
		if pr.failed == "" {
			return proven{value: pr.value, how: "by " + pr.name + " proof"}, true, nil, nil
		}
		if pr.reached {
			failed = append(failed, pr)
		}
	}
	return proven{}, false, failed, nil
}

// unprovenMessage is the refusal of an object without the annotation whose
// owner's submitter cannot be proven (docs/BEHAVIOUR.md §3.4).
func unprovenMessage(id identity, failed []proof) string {
	b := []byte("the submitter of this object cannot be proven, and it is not charged to " + id.user +
		", which creates it for its owner: ")
	remedy := ""
	for i, p := range failed {
		if i > 0 {
			b = append(b, "; "...)
		}
		b = append(b, p.name+" proof failed: "+p.failed...)
		if p.unrecorded && remedy == "" {
			remedy = "; re-create " + p.source + " so that the policy records its submitter, have an adopter (settings.adopters) record its owner, or have an allowed submitter create it with the annotation " + AnnotationKey
		}
	}
	return string(append(b, remedy...))
}
