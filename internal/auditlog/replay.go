package auditlog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// Replay asks the policy, afresh, about every request the log shows
// stored: each create of an object the API server answered with success,
// not a dry run, whose request object (level Request or above) the log
// holds. The policy module itself judges, with the settings given, so a
// value the submitter could not have supplied is listed with the very
// rule name the policy gives it: what was forged while the policy was
// absent, down, or bypassed.
//
// An update is judged only when the log holds the object as stored both
// before and after it (its events at level RequestResponse): the request
// object of an update is the patch, or an object whose user.info may be
// the unchanged value a mutating webhook wrote, so it alone cannot say
// what the submitter changed. Other updates are counted in
// Result.UpdatesUnjudged.
type Replay struct {
	// Validate is the policy's validate call (engine.Engine.Validate),
	// with no host capabilities: the proofs that read the cluster
	// (operators, trustRBAC) cannot be made from a log, so a value they
	// would have proved is listed with the policy's reason.
	Validate admission.ValidateFunc
	// Settings are the policy's settings, as validate takes them.
	Settings json.RawMessage
}

// Sources of an Admission.
const (
	// SourceMonitor: the webhook, in monitor mode, marked the request.
	SourceMonitor = "monitor"
	// SourceReplay: the policy, asked afresh (Replay), refuses the value
	// the request supplied.
	SourceReplay = "replay"
)

// maxStates bounds the bytes of stored objects Replay keeps to judge
// later updates with: past it, older states are dropped (their updates
// are then counted, not judged).
const maxStates = 64 << 20

// replayer is a Replay under way.
type replayer struct {
	*Replay
	ctx context.Context
	// states are the objects as last stored, by objectKey, from events at
	// level RequestResponse; size counts their bytes.
	states map[string]json.RawMessage
	size   int
}

// objectKey names the object an event is about; "" when it names none.
func objectKey(e *event) string {
	ref := e.ObjectRef
	if ref == nil || ref.Name == "" {
		return ""
	}
	return ref.APIGroup + "/" + ref.Resource + "/" + ref.Namespace + "/" + ref.Name
}

// judge replays e, a final-stage event of a request no monitor mark
// covers, and adds the refusal it finds.
func (rp *replayer) judge(res *Result, e *event) error {
	ref := e.ObjectRef
	if ref == nil || ref.Subresource != "" || dryRun(e.RequestURI) || e.ResponseStatus == nil ||
		e.ResponseStatus.Code < 200 || e.ResponseStatus.Code >= 300 {
		return nil // nothing stored, or not the object's own metadata
	}
	key := objectKey(e)
	var old, object json.RawMessage
	op := ""
	switch e.Verb {
	case "create":
		op, object = "CREATE", e.RequestObject
	case "update", "patch":
		op, old, object = "UPDATE", rp.states[key], e.ResponseObject
		if len(object) == 0 || len(old) == 0 {
			if bytes.Contains(e.RequestObject, []byte(userInfoKey)) || bytes.Contains(object, []byte(userInfoKey)) {
				res.UpdatesUnjudged++
			}
			rp.remember(key, e.ResponseObject)
			return nil
		}
	default:
		return nil
	}
	rp.remember(key, e.ResponseObject)
	if len(object) == 0 || !bytes.Contains(object, []byte(userInfoKey)) {
		return nil // no value supplied: the policy would have recorded the submitter
	}
	kind, err := kindOf(object)
	if err != nil || kind.Kind == "" {
		return nil // not an object the policy could be asked about
	}
	res.Replayed++
	req, err := admission.ParseRequest(reviewRequest(e, op, kind, object, old))
	if err != nil {
		return fmt.Errorf("replay the %s of %s: %w", e.Verb, key, err)
	}
	resp, err := admission.Evaluate(rp.ctx, rp.Validate, req, rp.Settings)
	if err != nil {
		return fmt.Errorf("replay the %s of %s: the policy: %w", e.Verb, key, err)
	}
	claimed, supplied := resp.AuditAnnotations[keyClaimed]
	if resp.Allowed || !supplied {
		return nil
	}
	a := admissionOf(e, "")
	a.Source, a.Rule, a.Claimed = SourceReplay, resp.AuditAnnotations[keyRule], claimed
	if resp.Status != nil {
		a.Message = resp.Status.Message
	}
	res.Admissions = append(res.Admissions, a)
	return nil
}

// userInfoKey is the annotation the policy guards; an object without it
// supplied no value.
const userInfoKey = userinfo.AnnotationKey

// remember keeps object as the stored state of key, within maxStates.
func (rp *replayer) remember(key string, object json.RawMessage) {
	if key == "" || len(object) == 0 {
		return
	}
	rp.size += len(object) - len(rp.states[key])
	rp.states[key] = object
	for k, v := range rp.states {
		if rp.size <= maxStates {
			break
		}
		if k != key {
			rp.size -= len(v)
			delete(rp.states, k)
		}
	}
}

// kindOf reads an object's group, version and kind.
func kindOf(object json.RawMessage) (admission.GroupVersionKind, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(object, &tm); err != nil {
		return admission.GroupVersionKind{}, err
	}
	group, version, ok := strings.Cut(tm.APIVersion, "/")
	if !ok {
		group, version = "", tm.APIVersion
	}
	return admission.GroupVersionKind{Group: group, Version: version, Kind: tm.Kind}, nil
}

// reviewRequest is the AdmissionRequest the API server sent for e: the
// identity it acted as (the impersonated one, if any), the object as the
// submitter sent it, and for an update the object as stored before.
func reviewRequest(e *event, op string, kind admission.GroupVersionKind, object, old json.RawMessage) []byte {
	user := e.User
	if e.ImpersonatedUser != nil {
		user = *e.ImpersonatedUser
	}
	type gvr struct {
		Group    string `json:"group"`
		Version  string `json:"version"`
		Resource string `json:"resource"`
	}
	req := struct {
		UID       string                     `json:"uid"`
		Kind      admission.GroupVersionKind `json:"kind"`
		Resource  gvr                        `json:"resource"`
		Namespace string                     `json:"namespace,omitempty"`
		Name      string                     `json:"name,omitempty"`
		Operation string                     `json:"operation"`
		UserInfo  userInfo                   `json:"userInfo"`
		Object    json.RawMessage            `json:"object"`
		OldObject json.RawMessage            `json:"oldObject,omitempty"`
	}{
		UID: e.AuditID, Kind: kind, Resource: gvr{e.ObjectRef.APIGroup, e.ObjectRef.APIVersion, e.ObjectRef.Resource},
		Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name, Operation: op, UserInfo: user, Object: object, OldObject: old,
	}
	b, err := json.Marshal(req)
	if err != nil {
		panic(err) // strings and raw JSON the log held always encode
	}
	return b
}
