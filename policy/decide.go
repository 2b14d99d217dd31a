package main

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// HTTP-style codes the policy answers with; the API server shows them.
const (
	codeMalformed = 400 // the request cannot be evaluated as given
	codeForbidden = 403 // the identity rules refuse it
)

// Messages that clients and alerts match on.
const (
	msgChangeNotAllowed = "user info annotation change is not allowed"
	warnRestored        = "annotation " + AnnotationKey + " cannot be removed: its previous value was kept"
)

// decision is the outcome of one evaluation, plus what the trace logs.
type decision struct {
	accepted bool
	code     int
	message  string
	mutation []edit // how the object changes; nil when unchanged
	// sched is what the scheduling jobs change besides (docs/BEHAVIOUR.md
	// §3.10); nil when they change nothing.
	sched    *schedPlan
	warnings []string // admission warnings shown to the client
	rule     string   // which rule decided, for the decision trace
	// claimed is the user.info value the request supplied where the rules
	// judged one (a CREATE that carries it, an UPDATE that changes it); ""
	// otherwise, and hasClaim whether it was (the value may be empty). Only
	// the audit annotations report it; set it with claim.
	claimed  string
	hasClaim bool
	kind     string
	op       string
	user     string
	// placeholder: the scheduler's gang placeholder, carrying its
	// originator's identity; the queue and ownership checks skip it
	// (docs/BEHAVIOUR.md §3.7).
	placeholder bool
}

// claim records value as the user.info value the request supplied.
func (d *decision) claim(value string) { d.claimed, d.hasClaim = value, true }

func accept(rule string) decision { return decision{accepted: true, rule: rule} }

func reject(rule string, code int, msg string) decision {
	return decision{code: code, message: msg, rule: rule}
}

func rejectInput(err error) decision {
	return reject("malformed", codeMalformed, err.Error())
}

// requestFields are the members of the AdmissionRequest the policy reads.
var requestFields = []string{"kind", "operation", "userInfo", "object", "oldObject", "namespace"}

// request holds those members, found in one pass.
type request struct {
	kind, operation, userInfo, object, oldObject, namespace gjson.Result
}

// decide applies the rules of docs/BEHAVIOUR.md §4 to one AdmissionRequest.
func decide(req gjson.Result, s *Settings) decision {
	if !isObject(req) {
		return reject("malformed", codeMalformed, "request: must be an object, got "+typeName(req))
	}
	var f [6]gjson.Result
	if err := members(req, "request", requestFields, f[:]); err != nil {
		return rejectInput(err)
	}
	r := request{kind: f[0], operation: f[1], userInfo: f[2], object: f[3], oldObject: f[4], namespace: f[5]}
	kind, err := parseKind(r.kind)
	if err != nil {
		return rejectInput(err)
	}
	if !r.operation.Exists() {
		return rejectInput(malformed("request.operation", "missing"))
	}
	if r.operation.Type != gjson.String {
		return rejectInput(malformed("request.operation", "must be a string, got "+typeName(r.operation)))
	}
	op := str(r.operation)
	d := decideKnown(r, s, kind, op)
	if s.ValidateOnly && d.mutation != nil {
		d = refuseMutation(d)
	}
	d.kind, d.op = kind.kind, op
	return d
}

// Messages of the validating twin (docs/BEHAVIOUR.md §4.9).
const (
	msgTwinMissing = "annotation " + AnnotationKey + " is missing: it must record the submitter " +
		"(the mutating policy adds it; a mutating webhook that ran after it may have removed it)"
	msgTwinRemoved = "annotation " + AnnotationKey + " was removed: its previous value must be kept " +
		"(the mutating policy restores it; a mutating webhook that ran after it may have removed it)"
)

// refuseMutation turns a decision that would change the object into a
// refusal: in validateOnly mode the policy runs after every mutating
// webhook, where a change it would make means a later webhook undid its
// work, and no later step would redo it.
func refuseMutation(d decision) decision {
	msg := msgTwinMissing
	if d.rule == "update: removed, restore" {
		msg = msgTwinRemoved
	}
	r := reject("validate-only: "+d.rule, codeForbidden, msg)
	r.user, r.claimed, r.hasClaim = d.user, d.claimed, d.hasClaim
	return r
}

func decideKnown(r request, s *Settings, kind kindRef, op string) decision {
	switch op {
	case "CREATE", "UPDATE":
	case "DELETE", "CONNECT":
		return accept("pass-through: operation")
	default:
		return rejectInput(malformed("request.operation", "unknown operation "+quote(op)))
	}
	if kind == bindingKind {
		return decideBinding(r)
	}
	if kind == configMapKind {
		if cv := s.ConfigValidation; cv != nil && cv.mode != queueCheckOff {
			return decideConfigMap(r, cv)
		}
		return accept("pass-through: kind")
	}
	path, guarded := metadataPath(kind)
	var wk *workloadKind
	if !guarded {
		if wk = s.workload(kind); wk == nil {
			return accept("pass-through: kind")
		}
	}
	id, err := parseIdentity(r.userInfo)
	if err != nil {
		return rejectInput(err)
	}
	obj, err := objectField(r.object, "object")
	if err != nil {
		return rejectInput(err)
	}
	if op == "CREATE" && replayed(r.userInfo) {
		return decideReplay(s, kind, obj)
	}
	if wk != nil {
		d, err := decideWorkload(r, s, kind, wk, op, id, obj)
		if err != nil {
			d = rejectInput(err)
		}
		d.user = id.user
		return d
	}
	cur, err := locate(obj, "request.object", path)
	if err != nil {
		return rejectInput(err)
	}
	var d decision
	if op == "CREATE" {
		d, err = decideCreate(s, r, kind, id, cur)
		var plan *schedPlan
		if err == nil && d.accepted && kind == (kindRef{"", "Pod"}) && !s.ValidateOnly {
			plan, err = planScheduling(s, r, cur)
		}
		// The checks judge the Pod as the scheduling jobs leave it: its
		// scheduler and application are theirs.
		eff := cur
		if err == nil {
			checks := (s.QueueCheck != nil && s.QueueCheck.mode != queueCheckOff) || (s.AppOwnership != nil && s.AppOwnership.mode != queueCheckOff)
			eff, err = plan.build(cur, d.mutation, checks && !d.placeholder)
		}
		if err == nil && !d.placeholder {
			d = checkQueue(d, r, s, kind, eff)
			d = checkAppOwnership(d, r, s, kind, eff, nil)
		}
		if err == nil && d.accepted && plan != nil {
			d = withScheduling(d, plan)
		}
	} else {
		var old *podMeta
		d, old, err = decideUpdate(r, s, id, path, cur)
		if err == nil && kind == (kindRef{"", "Pod"}) {
			// The shim reads a Pod's queue when it schedules it, not when
			// it was created: an UPDATE before binding that moves it is
			// checked as a CREATE would be. It reads the Pod's
			// application on every event of the Pod (§3.5).
			if unbound(old) && (queueMoved(old, cur) || appMoved(s, r, old, cur)) {
				d = checkQueue(d, r, s, kind, cur)
			}
			d = checkAppOwnership(d, r, s, kind, cur, old)
		}
	}
	if err != nil {
		d = rejectInput(err)
	}
	d.user = id.user
	return d
}

// decideCreate: docs/BEHAVIOUR.md §4.1 and §4.2, CREATE, for a kind whose
// pods' metadata is cur.
func decideCreate(s *Settings, r request, kind kindRef, id identity, cur *podMeta) (decision, error) {
	value, _, present, err := cur.annotation()
	if err != nil {
		return decision{}, err
	}
	ph, isPlaceholder, err := schedulerPlaceholder(s, r, kind, id, cur)
	if err != nil {
		return decision{}, err
	}
	if isPlaceholder {
		d, err := decidePlaceholder(s, r, kind, id, cur, ph, value, present)
		if present {
			d.claim(value)
		}
		return d, err
	}
	if present {
		d, err := decidePresent(s, r, kind, id, value)
		d.claim(value)
		return d, err
	}
	return decideAbsent(s, r, kind, id, []*podMeta{cur})
}

// decidePresent decides a CREATE that supplies value. A refusal ends by
// showing the record the policy would write for the submitter: the value
// the submitter may always supply, and the one written when they supply
// none.
func decidePresent(s *Settings, r request, kind kindRef, id identity, value string) (decision, error) {
	d, err := judgeSupplied(s, r, kind, id, value)
	if err == nil && !d.accepted {
		d.message += "; the value is not exactly your record; it would be " + id.recordedValue(s.RecordedGroups)
	}
	return d, err
}

// judgeSupplied is decidePresent without the record in its refusals.
func judgeSupplied(s *Settings, r request, kind kindRef, id identity, value string) (decision, error) {
	switch {
	case s.BypassAuth:
		return accept("create: present, bypassAuth"), nil
	case value == id.recordedValue(s.RecordedGroups):
		return accept("create: present, submitter's own identity"), nil
	case !allowed(s, id):
		return decideByProvenance(s, r, kind, id, value)
	}
	if problem := checkSuppliedValue(value); problem != "" {
		return reject("create: present, invalid value", codeMalformed,
			"annotation "+AnnotationKey+" is invalid: "+problem), nil
	}
	return accept("create: present, allowed submitter"), nil
}

// decideAbsent decides a CREATE whose pod templates (locs, at least one)
// carry no annotation: each is stamped with the submitter's identity, or
// with the identity the object's provenance proves.
func decideAbsent(s *Settings, r request, kind kindRef, id identity, locs []*podMeta) (decision, error) {
	if s.BypassAuth {
		for _, cur := range locs {
			label, ok, err := cur.stringMapEntry("labels", s.UserLabelKey)
			if err != nil {
				return decision{}, err
			}
			if ok && str(label) != "" {
				d := accept("create: absent, bypassAuth with legacy label")
				d.warnings = []string{"label " + s.UserLabelKey + " is deprecated: YuniKorn reads the submitter from the annotation " +
					AnnotationKey + "; remove the label and let the admission policy record the user"}
				return d, nil
			}
		}
	}
	if kind == (kindRef{"apps", "ReplicaSet"}) && matchAny(s.SystemUsers, id.user) {
		// The Deployment controller copies the Deployment's (already
		// annotated) template; changing it would make the controller
		// recreate ReplicaSets forever (YUNIKORN-1627).
		return accept("create: absent, ReplicaSet from a system user"), nil
	}
	d := accept("create: absent, inject")
	want := id.recordedValue(s.RecordedGroups)
	p, ok, failed, err := provenValue(s, r, kind, id)
	switch {
	case err != nil:
		return decision{}, err
	case ok:
		d = accept("create: absent, inherited " + p.how)
		want = p.value
	case len(failed) > 0:
		// An operator creates this for an owner whose submitter is not
		// proven: charging the operator would launder the owner's work.
		return reject("create: absent, provenance not proven", codeForbidden, unprovenMessage(id, failed)), nil
	}
	token := appendJSONString(make([]byte, 0, jsonStringLen(want)), want)
	for _, cur := range locs {
		d.mutation = append(d.mutation, edit{meta: cur, token: token})
	}
	return d, nil
}

// decideByRBAC: docs/BEHAVIOUR.md §3.1, a submitter no pattern allows
// under trustRBAC. The value is checked first, so that the reviews can name
// the user and the groups it claims: each must be granted, and, unless the
// settings accept wildcard grants, not through a wildcard. An API server
// that cannot answer denies the trust, never grants it.
func decideByRBAC(s *Settings, r request, id identity, value string) (decision, error) {
	if problem := checkSuppliedValue(value); problem != "" {
		return reject("create: present, invalid value", codeMalformed,
			"annotation "+AnnotationKey+" is invalid: "+problem), nil
	}
	if r.namespace.Exists() && r.namespace.Type != gjson.String {
		return decision{}, malformed("request.namespace", "must be a string, got "+typeName(r.namespace))
	}
	ns := str(r.namespace)
	rv := s.TrustRBAC
	claim := gjson.Parse(value)
	groups := claim.Get("groups")
	n := 0
	groups.ForEach(func(_, _ gjson.Result) bool { n++; return true })
	if n > rv.MaxGroups {
		return reject("create: present, too many groups for RBAC", codeForbidden,
			id.notAllowedMessage()+": the value claims "+strconv.Itoa(n)+" groups, and trustRBAC reviews at most "+
				strconv.Itoa(rv.MaxGroups)+" (settings trustRBAC.maxGroups)"), nil
	}
	user := access{verb: rv.Verb, group: rv.Group, resource: rv.Resource, name: str(claim.Get("user"))}
	if d, ok := reviewClaim(rv, id, ns, user, "user"); !ok {
		return d, nil
	}
	d, ok := decision{}, true
	groups.ForEach(func(_, g gjson.Result) bool {
		group := access{verb: rv.Verb, group: rv.Group, resource: rv.GroupsResource, name: str(g)}
		d, ok = reviewClaim(rv, id, ns, group, "group")
		return ok
	})
	if !ok {
		return d, nil
	}
	return accept("create: present, granted by RBAC"), nil
}

// reviewClaim asks whether id is granted a in namespace ns and, unless
// the settings accept wildcard grants, whether each of a's probes is
// granted too, which means the grant is a wildcard. ok: a counts;
// otherwise d refuses the claim of what ("user" or "group").
func reviewClaim(rv *rbacReview, id identity, ns string, a access, what string) (d decision, ok bool) {
	where := " in namespace " + quote(ns)
	answer, err := canI(a, id, ns)
	if err != nil {
		return rbacCheckFailed(id, a.describe()+where, err), false
	}
	if !answer.allowed {
		rule := "create: present, not granted by RBAC"
		if what == "group" {
			rule = "create: present, group not granted by RBAC"
		}
		return reject(rule, codeForbidden, id.notAllowedMessage()+": RBAC does not grant "+a.describe()+where+answer.inParens()), false
	}
	if rv.AcceptWildcardGrants {
		return decision{}, true
	}
	for _, p := range a.probes() {
		answer, err := canI(p, id, ns)
		if err != nil {
			return rbacCheckFailed(id, p.describe()+where, err), false
		}
		if answer.allowed {
			return reject("create: present, RBAC grant is a wildcard", codeForbidden, id.notAllowedMessage()+
				": RBAC grants "+a.describe()+where+" through a wildcard: it also grants "+p.describe()+
				", which no rule names"+answer.inParens()+"; trustRBAC does not count a grant through a wildcard verb, "+
				"resource or API group (\"*\"), nor one from an authorizer that allows everything (system:masters, "+
				"an allow-all webhook): grant verb "+quote(a.verb)+" on resource "+quote(a.resource)+" in API group "+
				quote(a.group)+" by name, or set trustRBAC.acceptWildcardGrants"), false
		}
	}
	return decision{}, true
}

// rbacCheckFailed refuses a claim whose review could not be made.
func rbacCheckFailed(id identity, what string, err error) decision {
	return reject("create: present, RBAC check failed", codeForbidden,
		id.notAllowedMessage()+": the RBAC check for "+what+" could not be made: "+err.Error())
}

// decideUpdate: docs/BEHAVIOUR.md §4.3, UPDATE. Nobody may change the recorded identity,
// whatever the settings: the rules hold for allowed submitters and with
// bypassAuth too.
// It also returns the old object's metadata, for the checks that follow.
// An object that records no owner may gain one from an adopter (§4.13).
func decideUpdate(r request, s *Settings, id identity, path []string, cur *podMeta) (decision, *podMeta, error) {
	oldRaw, err := objectField(r.oldObject, "oldObject")
	if err != nil {
		return decision{}, nil, err
	}
	old, err := locate(oldRaw, "request.oldObject", path)
	if err != nil {
		return decision{}, nil, err
	}
	oldValue, oldToken, oldPresent, err := old.annotation()
	if err != nil {
		return decision{}, nil, err
	}
	newValue, _, newPresent, err := cur.annotation()
	if err != nil {
		return decision{}, nil, err
	}
	switch {
	case !oldPresent && !newPresent:
		d, err := decideLegacyLabel(s, r, id, old, cur)
		return d, old, err
	case oldPresent && newPresent && oldValue == newValue:
		return accept("update: unchanged"), old, nil
	case oldPresent && !newPresent:
		// A server-side apply or GitOps re-apply of a manifest that never
		// had the annotation: keep the old value instead of failing.
		d := accept("update: removed, restore")
		d.mutation = []edit{{meta: cur, token: []byte(oldToken)}}
		d.warnings = []string{warnRestored}
		return d, old, nil
	case !oldPresent:
		return decideAdopt(s, id, newValue, ""), old, nil
	}
	d := reject("update: changed", codeForbidden, msgChangeNotAllowed)
	d.claim(newValue)
	return readoptRefusal(s, id, d), old, nil
}

// queueMoved reports whether an UPDATE changes the queue a Pod asks for.
func queueMoved(old, cur *podMeta) bool { return podQueue(old) != podQueue(cur) }

// appMoved reports whether an UPDATE changes the application a Pod joins.
func appMoved(s *Settings, r request, old, cur *podMeta) bool {
	ao := s.AppOwnership
	if ao == nil {
		ao = &appOwnershipSettings{}
	}
	ns := ""
	if r.namespace.Type == gjson.String {
		ns = str(r.namespace)
	}
	a, _ := ao.appIDOf(ns, old.podObject().Get("metadata"))
	b, _ := ao.appIDOf(ns, cur.podObject().Get("metadata"))
	return a != b
}

// bindingKind is what a pods/binding (or legacy bindings) request carries.
var bindingKind = kindRef{"", "Binding"}

// decideBinding guards the one other way to write a Pod's annotations: the
// API server merges a Binding's metadata.annotations into the bound Pod in
// its storage layer, where no Pod UPDATE is admitted. A Binding carrying
// the annotation would change it unchecked, so it is refused, for everyone;
// any other Binding passes untouched.
func decideBinding(r request) decision {
	obj, err := objectField(r.object, "object")
	if err != nil {
		return rejectInput(err)
	}
	b, err := locate(obj, "request.object", []string{"metadata"})
	if err != nil {
		return rejectInput(err)
	}
	_, _, present, err := b.annotation()
	switch {
	case err != nil:
		return rejectInput(err)
	case present:
		return reject("binding: carries the annotation", codeForbidden, msgChangeNotAllowed)
	}
	return accept("binding: no annotation")
}

// allowed reports whether the submitter may supply the annotation
// (docs/BEHAVIOUR.md §3).
func allowed(s *Settings, id identity) bool {
	if s.TrustControllers && matchAny(s.SystemUsers, id.user) {
		return true
	}
	if matchAny(s.ExternalUsers, id.user) {
		return true
	}
	found := false
	id.eachGroup(func(g string) bool {
		found = matchAny(s.ExternalGroups, g)
		return !found
	})
	return found
}

// parseKind reads request.kind. The version is ignored: the JSON layout of
// every guarded kind is the same in all its versions.
func parseKind(k gjson.Result) (kindRef, error) {
	if !isObject(k) {
		if !k.Exists() {
			return kindRef{}, malformed("request.kind", "missing")
		}
		return kindRef{}, malformed("request.kind", "must be an object, got "+typeName(k))
	}
	group, err := member(k, "request.kind", "group")
	if err != nil {
		return kindRef{}, err
	}
	if group.Exists() && group.Type != gjson.String {
		return kindRef{}, malformed("request.kind.group", "must be a string, got "+typeName(group))
	}
	kind, err := member(k, "request.kind", "kind")
	if err != nil {
		return kindRef{}, err
	}
	if kind.Type != gjson.String {
		if !kind.Exists() {
			return kindRef{}, malformed("request.kind.kind", "missing")
		}
		return kindRef{}, malformed("request.kind.kind", "must be a string, got "+typeName(kind))
	}
	return kindRef{group: str(group), kind: str(kind)}, nil
}

// objectField checks request.object or request.oldObject, which must be a
// JSON object, and returns its text (a view into the payload, not a copy).
func objectField(v gjson.Result, name string) (string, error) {
	if !present(v) {
		return "", malformed("request."+name, "missing")
	}
	if !isObject(v) {
		return "", malformed("request."+name, "must be an object, got "+typeName(v))
	}
	return v.Raw, nil
}
