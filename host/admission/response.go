package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// PatchTypeJSONPatch is the only patch type admission.k8s.io/v1 defines.
const PatchTypeJSONPatch = "JSONPatch"

// CodeEvaluationFailed is the status code of a response for an evaluation
// that failed (trap, timeout, malformed answer), as Kubewarden uses it.
const CodeEvaluationFailed int32 = 500

// errMutateWithoutObject is reported when a policy returns a mutated object
// for a request that has none; there is nothing to patch.
var errMutateWithoutObject = errors.New("the policy tried to mutate a request without object " +
	"(request.object is null, as in DELETE requests); mutation is not allowed")

// ValidationResponse is what a Kubewarden policy answers to `validate`.
//
// See https://docs.kubewarden.io/reference/spec/validating-policies
type ValidationResponse struct {
	// Accepted is whether the request is allowed. Required.
	Accepted bool `json:"accepted"`
	// Message explains a rejection.
	Message *string `json:"message,omitempty"`
	// Code is the HTTP status code of a rejection.
	Code *int32 `json:"code,omitempty"`
	// MutatedObject is the whole object as the policy wants it; nil if the
	// policy does not mutate.
	MutatedObject json.RawMessage `json:"mutated_object,omitempty"`

	// validMutated is MutatedObject as ParseValidationResponse set it, part
	// of the answer it validated (see Request.validObject).
	validMutated json.RawMessage
	// doc is the validated response holding validMutated, with its index.
	doc *scanned
	// AuditAnnotations are added to the audit event of the request.
	AuditAnnotations map[string]string `json:"audit_annotations,omitempty"`
	// Warnings are shown to the API client.
	Warnings []string `json:"warnings,omitempty"`
}

// ParseValidationResponse decodes a policy's answer. It must be a JSON object
// with a boolean "accepted"; the optional fields must have their documented
// types or be null. Unknown keys are ignored, so newer policies still work.
//
// Keys are matched exactly: a policy answering "Accepted" is broken, and
// saying so beats guessing.
func ParseValidationResponse(data []byte) (*ValidationResponse, error) {
	doc, obj, err := decodeObject(bytes.TrimSpace(data))
	if err != nil {
		return nil, fmt.Errorf("decode validation response: %w", err)
	}
	vr := &ValidationResponse{}
	raw, ok := obj.get("accepted")
	if !ok {
		return nil, errors.New("decode validation response: field accepted is missing")
	}
	if err := json.Unmarshal(raw, &vr.Accepted); err != nil || isNull(raw) {
		return nil, fmt.Errorf("decode validation response: field accepted must be a boolean, got %s", raw)
	}
	fields := []struct {
		name string
		dst  any
	}{
		{name: "message", dst: &vr.Message},
		{name: "code", dst: &vr.Code},
		{name: "warnings", dst: &vr.Warnings},
	}
	for _, f := range fields {
		raw, ok := obj.get(f.name)
		if !ok || isNull(raw) {
			continue
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return nil, fmt.Errorf("decode validation response: field %s: %w", f.name, err)
		}
	}
	if raw, ok := obj.get("audit_annotations"); ok && !isNull(raw) {
		if vr.AuditAnnotations, err = decodeAuditAnnotations(doc, raw); err != nil {
			return nil, fmt.Errorf("decode validation response: field audit_annotations: %w", err)
		}
	}
	if raw, ok := obj.get("mutated_object"); ok && !isNull(raw) {
		vr.MutatedObject, vr.validMutated, vr.doc = raw, raw, doc
	}
	return vr, nil
}

// Response is the AdmissionResponse (admission.k8s.io/v1), with its fields
// in the order kwctl prints them.
//
// See https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#response
type Response struct {
	// UID echoes request.uid.
	UID string `json:"uid"`
	// Allowed is the verdict.
	Allowed bool `json:"allowed"`
	// PatchType is "JSONPatch" when Patch is set.
	PatchType *string `json:"patchType,omitempty"`
	// Patch is an RFC 6902 JSON Patch; encoding/json writes it as base64,
	// which is what the API expects.
	Patch []byte `json:"patch,omitempty"`
	// Status carries the message and code of a rejection or failure.
	Status *Status `json:"status,omitempty"`
	// AuditAnnotations is always written (null when unset), as kwctl does.
	AuditAnnotations map[string]string `json:"auditAnnotations"`
	// Warnings is always written (null when unset), as kwctl does.
	Warnings []string `json:"warnings"`
}

// Status is the subset of metav1.Status that a Kubewarden response uses.
type Status struct {
	// Message is shown to the API client.
	Message string `json:"message,omitempty"`
	// Code is the HTTP status code.
	Code int32 `json:"code,omitempty"`
}

// Respond builds the AdmissionResponse for req from the policy's answer vr.
//
// The uid is echoed and allowed is vr.Accepted. A status is set when the
// policy gave a message or a code (as kwctl does, also on acceptance).
// When the policy returned a mutated object, the patch is computed against
// the original request.object bytes, so it holds only the real changes; an
// unchanged object yields no patch at all. Warnings and audit annotations are
// passed through.
//
// A mutated object for a request without object (DELETE), or one that cannot
// be diffed, yields an [Errored] response with code 500.
func Respond(req *Request, vr *ValidationResponse) *Response {
	resp, err := respond(context.Background(), req, vr)
	if err != nil {
		return Errored(req.UID, CodeEvaluationFailed, err)
	}
	return resp
}

// respond is Respond, with the failure to build a patch as an error.
func respond(ctx context.Context, req *Request, vr *ValidationResponse) (*Response, error) {
	resp := &Response{
		UID:              req.UID,
		Allowed:          vr.Accepted,
		AuditAnnotations: vr.AuditAnnotations,
		Warnings:         vr.Warnings,
	}
	if vr.Message != nil || vr.Code != nil {
		resp.Status = &Status{}
		if vr.Message != nil {
			resp.Status.Message = *vr.Message
		}
		if vr.Code != nil {
			resp.Status.Code = *vr.Code
		}
	}
	if vr.MutatedObject == nil {
		return resp, nil
	}
	if req.Object == nil {
		return nil, errMutateWithoutObject
	}
	var ops []patchOp
	var err error
	if sameSlice(req.Object, req.validObject) && sameSlice(vr.MutatedObject, vr.validMutated) {
		// Both are parts of documents validated as they were parsed.
		ops, err = diffValid(ctx, req.Object, vr.MutatedObject, req.doc, vr.doc)
	} else {
		ops, err = diffDocuments(ctx, req.Object, vr.MutatedObject)
	}
	if err != nil {
		return nil, fmt.Errorf("create patch: %w", err)
	}
	if len(ops) == 0 {
		return resp, nil
	}
	patchType := PatchTypeJSONPatch
	resp.PatchType = &patchType
	resp.Patch = encodePatch(ops)
	return resp, nil
}

// ErrBadResponse matches the errors of [Evaluate] that come from the
// policy's answer rather than from running it: not a ValidationResponse, or
// a mutation no patch can be built from.
var ErrBadResponse = errors.New("unusable policy response")

// badResponse marks err as an ErrBadResponse without changing its text.
type badResponse struct{ err error }

func (e badResponse) Error() string   { return e.err.Error() }
func (e badResponse) Unwrap() []error { return []error{e.err, ErrBadResponse} }

// ValidateFunc runs a policy's validate operation on a payload and returns
// its raw answer; engine.Engine.Validate is one.
type ValidateFunc func(ctx context.Context, payload []byte) ([]byte, error)

// Evaluate runs validate on req with settings and builds the
// AdmissionResponse; the patch is computed under ctx too, so a huge object
// cannot keep the caller past its deadline. When the evaluation fails (the
// call fails, the answer is not a ValidationResponse, or no patch can be
// built from it, ctx's end included), the
// response is [Errored] with code 500 and the error says why; callers log
// and count it.
func Evaluate(ctx context.Context, validate ValidateFunc, req *Request, settings json.RawMessage) (*Response, error) {
	out, err := validate(ctx, ValidationPayload(req, settings))
	if err != nil {
		return Errored(req.UID, CodeEvaluationFailed, err), err
	}
	vr, err := ParseValidationResponse(out)
	if err == nil {
		var resp *Response
		if resp, err = respond(ctx, req, vr); err == nil {
			return resp, nil
		}
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return Errored(req.UID, CodeEvaluationFailed, err), err
	}
	return Errored(req.UID, CodeEvaluationFailed, err), badResponse{err}
}

// Errored is the response for an evaluation that failed: not allowed, with
// code (500 for evaluation failures) and the reason as message.
func Errored(uid string, code int32, err error) *Response {
	status := &Status{Code: code}
	if err != nil {
		// The first line says what failed; what follows (a Wasm stack
		// trace, for a trap) is for the host's log, not the API client.
		status.Message, _, _ = strings.Cut(err.Error(), "\n")
	}
	return &Response{UID: uid, Allowed: false, Status: status}
}

// Marshal encodes resp as one line of compact JSON, the way kwctl prints it:
// unlike json.Marshal it leaves <, > and & unescaped in messages.
func Marshal(resp *Response) ([]byte, error) {
	out, err := marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("encode admission response: %w", err)
	}
	return out, nil
}

// marshal is json.Marshal without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeAuditAnnotations decodes audit_annotations, raw (a part of doc),
// as json.Unmarshal into a map[string]string does, through the
// document's index rather than reflection: the yunikorn-userinfo policy
// answers with two or three on every request. Keys and values are copies,
// not views of the policy's answer. Anything but an object of strings
// (null members, other types) is left to encoding/json, for its result
// and its words.
func decodeAuditAnnotations(doc *scanned, raw json.RawMessage) (map[string]string, error) {
	text := unsafe.String(unsafe.SliceData(raw), len(raw))
	slow := func() (map[string]string, error) {
		var m map[string]string
		err := json.Unmarshal(raw, &m)
		return m, err
	}
	if rawKind(gjson.Result{Raw: text}) != kindObject {
		return slow()
	}
	out := make(map[string]string, 4)
	it := doc.objectMembers(text)
	for {
		k, v, _, ok := it.Next()
		if !ok {
			return out, nil
		}
		if len(v) == 0 || v[0] != '"' {
			return slow()
		}
		key, err := decodeKey(k)
		if err != nil {
			return nil, err
		}
		out[strings.Clone(key)] = ownString(v)
	}
}

// ownString decodes v, a JSON string of a validated document, into a new
// string. The escapes other than \u (a user.info value is full of \")
// are gjson's, which decodes them as encoding/json does; \u escapes,
// where the two differ on lone surrogates, and invalid UTF-8 are left to
// encoding/json.
func ownString(v string) string {
	body := v[1 : len(v)-1]
	switch {
	case !utf8.ValidString(body) || strings.Contains(body, `\u`):
		var s string
		_ = json.Unmarshal([]byte(v), &s) // v is a valid JSON string
		return s
	case strings.IndexByte(body, '\\') < 0:
		return strings.Clone(body)
	}
	return gjson.Parse(v).Str
}
