package kubecap

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Operations of the "kubernetes" namespace.
const (
	Namespace                  = "kubernetes"
	OpGetResource              = "get_resource"
	OpListResourcesByNamespace = "list_resources_by_namespace"
	OpListResourcesAll         = "list_resources_all"
	OpCanI                     = "can_i"
)

// ListByNamespaceRequest is the payload of list_resources_by_namespace.
type ListByNamespaceRequest struct {
	APIVersion    string   `json:"api_version"`
	Kind          string   `json:"kind"`
	Namespace     string   `json:"namespace"`
	LabelSelector *string  `json:"label_selector,omitempty"`
	FieldSelector *string  `json:"field_selector,omitempty"`
	FieldMasks    []string `json:"field_masks,omitempty"`
}

// ListAllRequest is the payload of list_resources_all.
type ListAllRequest struct {
	APIVersion    string   `json:"api_version"`
	Kind          string   `json:"kind"`
	LabelSelector *string  `json:"label_selector,omitempty"`
	FieldSelector *string  `json:"field_selector,omitempty"`
	FieldMasks    []string `json:"field_masks,omitempty"`
}

// GetRequest is the payload of get_resource.
type GetRequest struct {
	APIVersion   string   `json:"api_version"`
	Kind         string   `json:"kind"`
	Name         string   `json:"name"`
	Namespace    *string  `json:"namespace,omitempty"`
	DisableCache bool     `json:"disable_cache"`
	FieldMasks   []string `json:"field_masks,omitempty"`
}

// CanIRequest is the payload of can_i, in the shape policy-server reads
// (the Rust SDK's CanIRequest, snake_case): policy-sdk-go v0.13.1 writes
// "resourceAttributes" instead, which policy-server refuses as a missing
// field, and so does this host (docs/KUBEWARDEN.md).
type CanIRequest struct {
	SubjectAccessReview SubjectAccessReview `json:"subject_access_review"`
	DisableCache        bool                `json:"disable_cache"`
}

// SubjectAccessReview is the part of a SubjectAccessReview spec a policy
// sends. Groups may be null.
type SubjectAccessReview struct {
	Groups             []string           `json:"groups"`
	ResourceAttributes ResourceAttributes `json:"resource_attributes"`
	User               string             `json:"user"`
}

// ResourceAttributes are the SubjectAccessReview's resource attributes.
// Every member but resource and verb may be null or absent, which reads as
// "".
type ResourceAttributes struct {
	Group       string `json:"group,omitempty"`
	Name        string `json:"name,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"`
	Verb        string `json:"verb"`
	Version     string `json:"version,omitempty"`
}

// decodeCanI reads a can_i payload as serde reads the Rust type: the
// members that are not optional there must be present and not null.
func decodeCanI(payload []byte) (CanIRequest, error) {
	var req CanIRequest
	if err := decode(OpCanI, payload, &req); err != nil {
		return req, err
	}
	for _, r := range []struct {
		path string
		keys []string
	}{
		{"", []string{"subject_access_review", "disable_cache"}},
		{"subject_access_review", []string{"resource_attributes", "user"}},
		{"subject_access_review.resource_attributes", []string{"resource", "verb"}},
	} {
		if err := required(payload, r.path, r.keys); err != nil {
			return req, fmt.Errorf("%s: invalid request: %w", OpCanI, err)
		}
	}
	return req, nil
}

// required checks that the object at path (dotted; "" is the payload)
// has every key, none of them null.
func required(payload []byte, path string, keys []string) error {
	raw := json.RawMessage(payload)
	if path != "" {
		for _, p := range strings.Split(path, ".") {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			raw = m[p]
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			return fmt.Errorf("missing field `%s`", k)
		}
		if string(v) == "null" {
			return fmt.Errorf("%s: invalid type: null", k)
		}
	}
	return nil
}

// key identifies the review for caching.
func (s SubjectAccessReview) key() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Status is the answer of can_i.
type Status struct {
	Allowed         bool   `json:"allowed"`
	Denied          bool   `json:"denied,omitempty"`
	Reason          string `json:"reason,omitempty"`
	EvaluationError string `json:"evaluationError,omitempty"`
}

// decode reads a payload strictly enough to name what is wrong.
func decode(op string, payload []byte, v any) error {
	if err := json.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("%s: invalid request: %w", op, err)
	}
	return nil
}

// errNotGranted is policy-server's refusal of a resource the module's
// metadata does not declare.
func errNotGranted(apiVersion, kind string) error {
	//lint:ignore ST1005 policy-server's exact message
	return fmt.Errorf("Policy has not been granted access to Kubernetes %s/%s resources. The violation has been reported.", apiVersion, kind)
}

// ErrNotFound is returned by a Backend for an object that does not exist.
var ErrNotFound = errors.New("not found")

// notFound is policy-server's message for a missing object.
func notFound(apiVersion, kind, name string, namespace *string) error {
	ns := "None"
	if namespace != nil {
		ns = fmt.Sprintf("Some(%q)", *namespace)
	}
	//lint:ignore ST1005 policy-server's exact message
	return fmt.Errorf("Cannot find %s/%s named '%s' inside of namespace '%s'", apiVersion, kind, name, ns)
}

// listOf writes the "<Kind>List" policy-server answers a list with.
func listOf(apiVersion, kind string, items []json.RawMessage) ([]byte, error) {
	if items == nil {
		items = []json.RawMessage{}
	}
	return json.Marshal(struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   struct{}          `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}{APIVersion: apiVersion, Kind: kind + "List", Items: items})
}

// mask keeps, of an object's body, only the fields the masks name (dotted
// paths; arrays are masked element by element); apiVersion, kind and
// metadata always stay, as policy-server masks only an object's data.
// No masks: the object unchanged.
func mask(obj json.RawMessage, masks []string) (json.RawMessage, error) {
	if len(masks) == 0 {
		return obj, nil
	}
	var m map[string]any
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, fmt.Errorf("field masks: %w", err)
	}
	tree := maskNode{}
	for _, p := range masks {
		tree.insert(strings.Split(p, "."))
	}
	for k, v := range m {
		if k == "apiVersion" || k == "kind" || k == "metadata" {
			continue
		}
		child, ok := tree[k]
		if !ok {
			delete(m, k)
			continue
		}
		m[k] = child.prune(v)
	}
	return json.Marshal(m)
}

type maskNode map[string]maskNode

func (n maskNode) insert(path []string) {
	cur := n
	for _, p := range path {
		next, ok := cur[p]
		if !ok {
			next = maskNode{}
			cur[p] = next
		}
		cur = next
	}
}

func (n maskNode) prune(v any) any {
	if len(n) == 0 {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			child, ok := n[k]
			if !ok {
				delete(x, k)
				continue
			}
			x[k] = child.prune(e)
		}
	case []any:
		for i := range x {
			x[i] = n.prune(x[i])
		}
	}
	return v
}
