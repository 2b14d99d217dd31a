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
// under trustRBAC: a custom verb on a resource that exists only in RBAC
// rules, as Kubernetes' own impersonate and escalate are (docs/BEHAVIOUR.md
// §3.1).
type rbacReview struct {
	Verb, Group, Resource string
}

// defaultRBACReview is what trustRBAC: true asks.
var defaultRBACReview = rbacReview{Verb: "set", Group: "yunikorn.apache.org", Resource: "userinfos"}

// rbacAnswer is the outcome of one review.
type rbacAnswer struct {
	allowed bool
	reason  string // the authorizer's reason, if any
}

// canI asks the host's kubernetes/can_i capability whether the submitter
// id may do r's verb on r's resource, named claimed, in namespace. The
// payload is the one policy-server reads (the Rust SDK's CanIRequest); it
// is written by hand because policy-sdk-go's type has another shape
// (docs/KUBEWARDEN.md).
func canI(r rbacReview, id identity, namespace, claimed string) (rbacAnswer, error) {
	b := make([]byte, 0, 256+len(id.groups))
	b = append(b, `{"subject_access_review":{"groups":`...)
	if id.ngroups == 0 {
		b = append(b, "null"...)
	} else {
		b = id.appendGroups(append(b, '['), appendJSONString)
		b = append(b, ']')
	}
	b = append(b, `,"resource_attributes":{"group":`...)
	b = appendJSONString(b, r.Group)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, claimed)
	b = append(b, `,"namespace":`...)
	b = appendJSONString(b, namespace)
	b = append(b, `,"resource":`...)
	b = appendJSONString(b, r.Resource)
	b = append(b, `,"verb":`...)
	b = appendJSONString(b, r.Verb)
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
	a := rbacAnswer{allowed: allowed.Type == gjson.True}
	if reason := st.Get("reason"); reason.Type == gjson.String {
		a.reason = reason.String()
	}
	return a, nil
}

type answerError string

func (e answerError) Error() string { return "the can_i answer is invalid: " + string(e) }
