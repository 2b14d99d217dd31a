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

// CanIRequest is the payload of can_i.
type CanIRequest struct {
	SubjectAccessReview SubjectAccessReview `json:"subject_access_review"`
	DisableCache        bool                `json:"disable_cache"`
}

// SubjectAccessReview is the part of a SubjectAccessReview spec a policy
// sends.
type SubjectAccessReview struct {
	Groups             []string           `json:"groups"`
	ResourceAttributes ResourceAttributes `json:"resourceAttributes"`
	User               string             `json:"user"`
}

// ResourceAttributes are the SubjectAccessReview's resource attributes.
type ResourceAttributes struct {
	Namespace string `json:"namespace"`
	Verb      string `json:"verb"`
	Group     string `json:"group"`
	Resource  string `json:"resource"`
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
