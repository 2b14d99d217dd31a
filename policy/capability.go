package main

import (
	"github.com/tidwall/gjson"
)

// hostCaller asks the host for a Kubewarden capability. The wasm build
// sets it to the waPC __host_call import; natively, tests set it. nil: no
// host answers, and every capability fails.
var hostCaller func(binding, namespace, operation string, payload []byte) ([]byte, error)

// hostCallError is the host's answer to a capability call it failed.
type hostCallError []byte

func (e hostCallError) Error() string {
	if len(e) == 0 {
		return "the host failed the call without a message"
	}
	return string(e)
}

// errNoHost is every capability's answer without a host.
const errNoHost = errString("no host answers capability calls")

// callHost runs a capability call through hostCaller.
func callHost(binding, namespace, operation string, payload []byte) ([]byte, error) {
	if hostCaller == nil {
		return nil, errNoHost
	}
	return hostCaller(binding, namespace, operation, payload)
}

// rbacReview is the access a submitter needs to supply the annotation
// under trustRBAC: a custom verb on resources that exist only in RBAC
// rules, as Kubernetes' own impersonate and escalate are, one for the
// claimed user and one for each claimed group (docs/BEHAVIOUR.md §3.1).
type rbacReview struct {
	Verb, Group, Resource string
	// GroupsResource is the resource reviewed, in the same API group and
	// with the same verb, for each group the value claims.
	GroupsResource string
	// AcceptWildcardGrants counts a grant that comes through a wildcard
	// (verb, resource or API group "*", or an authorizer that allows
	// everything); by default the probes refuse it.
	AcceptWildcardGrants bool
	// MaxGroups is the most groups a claim may carry: each costs reviews.
	MaxGroups int
}

// defaultRBACReview is what trustRBAC: true asks.
var defaultRBACReview = rbacReview{Verb: "set", Group: "yunikorn.apache.org", Resource: "userinfos",
	GroupsResource: "usergroups", MaxGroups: defaultRBACMaxGroups}

const (
	// defaultRBACMaxGroups bounds the groups of a claim: a review (four
	// without acceptWildcardGrants) for each.
	defaultRBACMaxGroups = 32
	// maxRBACMaxGroups is the most trustRBAC.maxGroups may allow.
	maxRBACMaxGroups = 256
)

// The wildcard probes (docs/BEHAVIOUR.md §3.1): names no RBAC rule is
// written with. A probe differs from a granted review in one attribute; an
// authorizer that allows it too allows every value of that attribute, so
// the grant is a wildcard. The group is under .invalid (RFC 2606), which
// no API group can own.
const (
	probeVerb     = "yunikorn-userinfo-wildcard-probe"
	probeResource = "yunikorn-userinfo-wildcard-probes"
	probeGroup    = "wildcard-probe.yunikorn-userinfo.invalid"
)

// access is one resource access a review asks about: verb on resource in
// API group, the object named name.
type access struct {
	verb, group, resource, name string
}

// probes are the accesses that differ from a in exactly one attribute, in
// the order they are asked.
func (a access) probes() [3]access {
	v, r, g := a, a, a
	v.verb, r.resource, g.group = probeVerb, probeResource, probeGroup
	return [3]access{v, r, g}
}

// describe is the access as the messages name it: verb "set" on
// userinfos.yunikorn.apache.org "carol".
func (a access) describe() string {
	res := a.resource
	if a.group != "" {
		res += "." + a.group
	}
	return "verb " + quote(a.verb) + " on " + res + " " + quote(a.name)
}

// rbacAnswer is the outcome of one review.
type rbacAnswer struct {
	allowed bool
	reason  string // the authorizer's reason, if any
}

// inParens is the authorizer's reason as the messages append it: " (reason)",
// or nothing.
func (a rbacAnswer) inParens() string {
	if a.reason == "" {
		return ""
	}
	return " (" + a.reason + ")"
}

// canI asks the host's kubernetes/can_i capability whether the submitter
// id may have access a in namespace. The
// payload is the one policy-server reads (the Rust SDK's CanIRequest); it
// is written by hand because policy-sdk-go's type has another shape
// (docs/KUBEWARDEN.md).
func canI(a access, id identity, namespace string) (rbacAnswer, error) {
	b := make([]byte, 0, 256+len(id.groups))
	b = append(b, `{"subject_access_review":{"groups":`...)
	if id.ngroups == 0 {
		b = append(b, "null"...)
	} else {
		b = id.appendGroups(append(b, '['), appendJSONString)
		b = append(b, ']')
	}
	b = append(b, `,"resource_attributes":{"group":`...)
	b = appendJSONString(b, a.group)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, a.name)
	b = append(b, `,"namespace":`...)
	b = appendJSONString(b, namespace)
	b = append(b, `,"resource":`...)
	b = appendJSONString(b, a.resource)
	b = append(b, `,"verb":`...)
	b = appendJSONString(b, a.verb)
	b = append(b, `},"user":`...)
	b = appendJSONString(b, id.user)
	b = append(b, `},"disable_cache":false}`...)
	out, err := callHost("kubewarden", "kubernetes", "can_i", b)
	if err != nil {
		return rbacAnswer{}, err
	}
	if !gjson.ValidBytes(out) {
		return rbacAnswer{}, answerError("not JSON")
	}
	st := gjson.ParseBytes(out)
	if !st.IsObject() {
		return rbacAnswer{}, answerError("not an object")
	}
	allowed := st.Get("allowed")
	if allowed.Type != gjson.True && allowed.Type != gjson.False {
		return rbacAnswer{}, answerError("allowed is not a boolean")
	}
	answer := rbacAnswer{allowed: allowed.Type == gjson.True}
	if reason := st.Get("reason"); reason.Type == gjson.String {
		answer.reason = reason.String()
	}
	return answer, nil
}

type answerError string

func (e answerError) Error() string { return "the can_i answer is invalid: " + string(e) }
