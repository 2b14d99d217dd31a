package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/jsonindex"
)

// kindAdmissionReview is the kind of a full AdmissionReview. A bare
// AdmissionRequest also has a "kind" key, but its value is an object
// (group/version/kind), so a string equal to this marks a review.
const kindAdmissionReview = "AdmissionReview"

// reviewAPIVersion is the only AdmissionReview version the host speaks.
const reviewAPIVersion = "admission.k8s.io/v1"

// GroupVersionKind is the kind of the object under admission.
type GroupVersionKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// Request is one admission request as the policy will see it.
//
// Only Raw is sent to the policy; the other fields are read from it for the
// response (UID, Object) and for logs.
type Request struct {
	// Raw is the AdmissionRequest object, byte-for-byte as given (surrounding
	// whitespace trimmed), never re-encoded.
	Raw json.RawMessage
	// UID is request.uid, "" if absent. Kubernetes always sends one; kwctl
	// fixtures sometimes do not.
	UID string
	// Object is the raw request.object, nil if absent or null (DELETE).
	Object json.RawMessage

	// Kind is request.kind. Informational: zero if absent or malformed.
	Kind GroupVersionKind
	// Operation is request.operation (CREATE, UPDATE, DELETE, CONNECT).
	// Informational, like the fields below: "" if absent or not a string.
	Operation string
	// Namespace is request.namespace.
	Namespace string
	// Name is request.name.
	Name string
	// SubResource is request.subResource.
	SubResource string
	// UserName is request.userInfo.username.
	UserName string

	// validObject is Object as ParseRequest or ParseReview set it, part of
	// a document they validated: while Object is still that slice, the
	// differ does not validate it again.
	validObject json.RawMessage
	// doc is the validated document holding validObject, with its index.
	doc *scanned
}

// ParseRequest reads an AdmissionRequest from data, which is either a bare
// AdmissionRequest (the kwctl fixture format) or a full AdmissionReview
// (kind "AdmissionReview", whose .request is taken).
//
// The input must be a JSON object; an AdmissionReview must carry a request
// object; request.uid, when present, must be a string. Everything else in
// the request is passed to the policy untouched.
//
// # Notes
//
// Keys are matched exactly (case-sensitively), as the Kubernetes API
// machinery does, and not case-insensitively as encoding/json would with
// struct tags. When a key is duplicated the last value wins, as in
// encoding/json.
func ParseRequest(data []byte) (*Request, error) {
	// Cloned so that the Request does not alias a buffer the caller may
	// reuse (its members are slices of the clone).
	data = bytes.Clone(bytes.TrimSpace(data))
	doc, top, err := decodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("decode admission input: %w", err)
	}
	if isReview(top) {
		return reviewRequest(doc, top)
	}
	req, err := newRequest(doc, data, top)
	if err != nil {
		return nil, fmt.Errorf("decode admission request: field %w", err)
	}
	return req, nil
}

// ParseReview reads an AdmissionReview as a webhook receives it: a JSON
// object with apiVersion admission.k8s.io/v1, kind AdmissionReview, a
// request object and a non-empty request.uid (the response must echo it).
// Errors name the field at fault. The Request refers to data, which must
// not change while it is in use.
func ParseReview(data []byte) (*Request, error) {
	return ParseReviewDepth(data, maxDepth)
}

// ParseReviewDepth is ParseReview refusing, first, a document that nests
// arrays and objects deeper than depthLimit (at most 10,000). A webhook
// calls it with its own limit instead of checking the depth separately:
// the bytes are scanned once, for depth and validity together.
func ParseReviewDepth(data []byte, depthLimit int) (*Request, error) {
	data = bytes.TrimSpace(data)
	doc, err := scan(data, min(depthLimit, maxDepth))
	if err != nil {
		return nil, fmt.Errorf("decode admission review: %w", err)
	}
	top, err := doc.members(data)
	if err != nil {
		return nil, fmt.Errorf("decode admission review: %w", err)
	}
	if v := stringField(top, "apiVersion"); v != reviewAPIVersion {
		return nil, fmt.Errorf("decode admission review: field apiVersion must be %q, got %s", reviewAPIVersion, describe(top, "apiVersion"))
	}
	if !isReview(top) {
		return nil, fmt.Errorf("decode admission review: field kind must be %q, got %s", kindAdmissionReview, describe(top, "kind"))
	}
	req, err := reviewRequest(doc, top)
	if err != nil {
		return nil, err
	}
	if req.UID == "" {
		return nil, errors.New("decode admission review: field request.uid is missing or empty")
	}
	return req, nil
}

// reviewRequest takes the request out of a decoded AdmissionReview.
func reviewRequest(doc *scanned, top object) (*Request, error) {
	rawReq, ok := top.get("request")
	if !ok || isNull(rawReq) {
		return nil, errors.New("decode admission review: field request is missing")
	}
	fields, err := doc.members(rawReq) // valid: a part of the validated review
	if err != nil {
		return nil, fmt.Errorf("decode admission review: field request: %w", err)
	}
	req, err := newRequest(doc, rawReq, fields)
	if err != nil {
		return nil, fmt.Errorf("decode admission review: field request.%w", err)
	}
	return req, nil
}

// newRequest builds a Request from the raw AdmissionRequest and its decoded
// members. Only uid is checked: the other fields feed logs.
func newRequest(doc *scanned, raw json.RawMessage, top object) (*Request, error) {
	req := &Request{Raw: raw, doc: doc}
	if v, ok := top.get("uid"); ok && !isNull(v) {
		if err := json.Unmarshal(v, &req.UID); err != nil {
			return nil, fmt.Errorf("uid must be a string, got %s", clip(v))
		}
	}
	if v, ok := top.get("object"); ok && !isNull(v) {
		req.Object, req.validObject = v, v
	}

	// The remaining fields only feed logs: a malformed one must not stop an
	// evaluation that the policy itself may well be able to judge.
	if v, ok := top.get("kind"); ok {
		if kind, err := doc.members(v); err == nil {
			req.Kind = GroupVersionKind{
				Group:   stringField(kind, "group"),
				Version: stringField(kind, "version"),
				Kind:    stringField(kind, "kind"),
			}
		}
	}
	req.Operation = stringField(top, "operation")
	req.Namespace = stringField(top, "namespace")
	req.Name = stringField(top, "name")
	req.SubResource = stringField(top, "subResource")
	if v, ok := top.get("userInfo"); ok {
		if user, err := doc.members(v); err == nil {
			req.UserName = stringField(user, "username")
		}
	}
	return req, nil
}

// describe shows the value of top[key] for an error message.
func describe(top object, key string) string {
	v, ok := top.get(key)
	if !ok {
		return "nothing (missing)"
	}
	return clip(v)
}

// clip shortens raw JSON for an error message.
func clip(raw json.RawMessage) string {
	const max = 64
	if len(raw) > max {
		return string(raw[:max]) + "..."
	}
	return string(raw)
}

// ValidationPayload builds the payload of the waPC `validate` operation:
// {"request":<req.Raw>,"settings":<settings>}.
//
// The parts are concatenated, not re-encoded, so the policy receives the
// request bytes exactly as given. Empty or null settings become {}, since
// Kubewarden policies expect an object. The caller is responsible for
// settings being valid JSON (they went through validate_settings first).
func ValidationPayload(req *Request, settings json.RawMessage) []byte {
	settings = bytes.TrimSpace(settings)
	if len(settings) == 0 || isNull(settings) {
		settings = json.RawMessage("{}")
	}
	const (
		head = `{"request":`
		mid  = `,"settings":`
		tail = `}`
	)
	out := make([]byte, 0, len(head)+len(req.Raw)+len(mid)+len(settings)+len(tail))
	out = append(out, head...)
	out = append(out, req.Raw...)
	out = append(out, mid...)
	out = append(out, settings...)
	out = append(out, tail...)
	return out
}

// review is the AdmissionReview envelope around a response.
type review struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Response   *Response `json:"response"`
}

// Review wraps resp in an admission.k8s.io/v1 AdmissionReview, as a webhook
// answers the API server.
func Review(resp *Response) ([]byte, error) {
	out, err := marshal(review{APIVersion: reviewAPIVersion, Kind: kindAdmissionReview, Response: resp})
	if err != nil {
		return nil, fmt.Errorf("encode admission review: %w", err)
	}
	return out, nil
}

// decodeObject decodes data, which must be a JSON object, into its members
// with their raw bytes, and returns data as scanned (validated, its depth
// bounded, indexed). The members are slices of data, not copies: an
// AdmissionReview carries the object (and on UPDATE the old object) of up to
// the API server's 3 MiB limit, and copying them per level would cost more
// than the evaluation.
func decodeObject(data []byte) (*scanned, object, error) {
	doc := index(data, maxDepth)
	if doc == nil {
		return nil, nil, explainInvalid(data)
	}
	top, err := doc.members(data)
	return doc, top, err
}

// scanned is a document validated, its depth bounded and its containers
// indexed in one pass (internal/jsonindex): its objects are then read, and
// diffed, without scanning again the values they skip.
type scanned struct {
	doc string
	ix  jsonindex.Index
}

// scan scans data, refusing it if it is not valid JSON or nests deeper
// than limit; the error says which.
func scan(data []byte, limit int) (*scanned, error) {
	doc := index(data, limit)
	if doc == nil {
		if err := CheckDepth(data, limit); err != nil {
			return nil, err
		}
		return nil, explainInvalid(data)
	}
	return doc, nil
}

// index scans data, a view of which the result keeps; nil when data is not
// valid JSON nested at most limit deep.
func index(data []byte, limit int) *scanned {
	doc := &scanned{doc: unsafe.String(unsafe.SliceData(data), len(data))}
	if !doc.ix.Scan(doc.doc, limit) {
		return nil
	}
	return doc
}

// objectMembers iterates over the members of obj, a valid JSON object,
// through the index of doc when obj is a part of it (doc may be nil).
func (doc *scanned) objectMembers(obj string) jsonindex.Members {
	if doc != nil {
		if off := jsonindex.Offset(doc.doc, obj); off >= 0 {
			return jsonindex.NewMembers(obj, &doc.ix, off)
		}
	}
	return jsonindex.NewMembers(obj, nil, 0)
}

// explainInvalid says why data, which failed validation, is not valid.
// Only called on failure: the error is in encoding/json's words.
func explainInvalid(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	return errors.New("invalid JSON")
}

// members decodes data, valid JSON (a part of doc, or doc may be nil),
// into an object's members.
func (doc *scanned) members(data []byte) (object, error) {
	raw := unsafe.String(unsafe.SliceData(data), len(data))
	if k := rawKind(gjson.Result{Raw: raw}); k != kindObject {
		return nil, fmt.Errorf("must be a JSON object, got %s", k)
	}
	obj := make(object, 0, 16)
	it := doc.objectMembers(raw)
	for {
		k, v, _, ok := it.Next()
		if !ok {
			return obj, nil
		}
		key, err := decodeKey(k)
		if err != nil {
			return nil, err
		}
		obj = append(obj, field{key: key, raw: unsafe.Slice(unsafe.StringData(v), len(v))})
	}
}

// isReview reports whether a decoded top-level object is an AdmissionReview.
func isReview(top object) bool {
	var kind string
	v, ok := top.get("kind")
	return ok && json.Unmarshal(v, &kind) == nil && kind == kindAdmissionReview
}

// stringField returns obj[key] if it is a JSON string, else "".
func stringField(obj object, key string) string {
	v, ok := obj.get(key)
	if !ok || len(v) < 2 || v[0] != '"' {
		return "" // absent, or not a string
	}
	if body := v[1 : len(v)-1]; bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body) // a copy: the body's buffer is not kept
	}
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

// object is a JSON object's members in document order, keys decoded,
// values as raw slices of the document. A Kubernetes object has a dozen
// members at a level: a slice searched from the end is cheaper to build
// than a map.
type object []field

type field struct {
	key string
	raw json.RawMessage
}

// get returns the value of key; the last of duplicate keys wins, as in
// encoding/json.
func (o object) get(key string) (json.RawMessage, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].key == key {
			return o[i].raw, true
		}
	}
	return nil, false
}

// sameSlice reports whether a and b are the same bytes in memory, not
// merely equal ones.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// isNull reports whether raw (already valid JSON) is the literal null.
func isNull(raw []byte) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}
