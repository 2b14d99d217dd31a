package kubecap

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Replay answers the capabilities from a directory of objects: every
// *.yaml, *.yml and *.json file below it, each holding one or more
// documents (a List's items count one by one). Objects of kind
// SubjectAccessReview (authorization.k8s.io/v1) with a spec and a status
// are the answers to can_i: a review whose user, groups (in any order) and
// resource attributes equal the request's gives its status; no match is a
// denial that says so. An object annotated ReplayErrorAnnotation is not
// served: getting it fails with the annotation's text, as a request the
// API server refuses (no RBAC grant, say) would. It is how `run` answers
// a context-aware policy offline.
type Replay struct {
	objects map[Resource][]map[string]any
	reviews []replayReview
}

type replayReview struct {
	spec   SubjectAccessReview
	status Status
}

// clusterScoped are the built-in kinds that live outside namespaces, for
// kinds a replay directory holds no object of.
var clusterScoped = []string{"Namespace", "Node", "PersistentVolume", "ClusterRole", "ClusterRoleBinding",
	"StorageClass", "PriorityClass", "CustomResourceDefinition", "MutatingWebhookConfiguration",
	"ValidatingWebhookConfiguration", "RuntimeClass", "IngressClass", "CSIDriver", "CSINode", "VolumeAttachment"}

// ReplayErrorAnnotation marks a replayed object whose get fails with
// the annotation's value.
const ReplayErrorAnnotation = "replay.yunikorn-userinfo/get-error"

// LoadReplay reads dir.
func LoadReplay(dir string) (*Replay, error) {
	r := &Replay{objects: map[Resource][]map[string]any{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := r.add(path, data); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load replay directory %s: %w", dir, err)
	}
	return r, nil
}

func (r *Replay) add(path string, data []byte) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		if obj == nil {
			continue
		}
		if err := r.addObject(obj); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
	}
}

func (r *Replay) addObject(obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion == "" || kind == "" {
		return errors.New("apiVersion and kind are required")
	}
	if items, ok := obj["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		for j, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				return fmt.Errorf("items[%d]: not an object", j)
			}
			if err := r.addObject(m); err != nil {
				return fmt.Errorf("items[%d]: %w", j, err)
			}
		}
		return nil
	}
	if kind == "SubjectAccessReview" {
		b, _ := json.Marshal(obj)
		var sar authorizationv1.SubjectAccessReview
		if err := json.Unmarshal(b, &sar); err != nil {
			return fmt.Errorf("SubjectAccessReview: %w", err)
		}
		ra := sar.Spec.ResourceAttributes
		if ra == nil {
			return errors.New("SubjectAccessReview: spec.resourceAttributes is required")
		}
		r.reviews = append(r.reviews, replayReview{
			spec: SubjectAccessReview{User: sar.Spec.User, Groups: sar.Spec.Groups, ResourceAttributes: ResourceAttributes{
				Group: ra.Group, Name: ra.Name, Namespace: ra.Namespace, Resource: ra.Resource,
				Subresource: ra.Subresource, Verb: ra.Verb, Version: ra.Version,
			}},
			status: Status{Allowed: sar.Status.Allowed, Denied: sar.Status.Denied, Reason: sar.Status.Reason,
				EvaluationError: sar.Status.EvaluationError},
		})
		return nil
	}
	meta, _ := obj["metadata"].(map[string]any)
	if name, _ := meta["name"].(string); name == "" {
		return fmt.Errorf("%s/%s: metadata.name is required", apiVersion, kind)
	}
	res := Resource{apiVersion, kind}
	r.objects[res] = append(r.objects[res], obj)
	return nil
}

// Namespaced implements Backend: a kind is namespaced when its objects
// have a namespace, or, with none in the directory, unless it is a
// built-in cluster-scoped kind.
func (r *Replay) Namespaced(_ context.Context, res Resource) (bool, error) {
	if objs := r.objects[res]; len(objs) > 0 {
		meta, _ := objs[0]["metadata"].(map[string]any)
		ns, _ := meta["namespace"].(string)
		return ns != "", nil
	}
	return !slices.Contains(clusterScoped, res.Kind), nil
}

// Get implements Backend.
func (r *Replay) Get(_ context.Context, res Resource, namespace, name string, _ bool) (json.RawMessage, error) {
	for _, obj := range r.objects[res] {
		meta, _ := obj["metadata"].(map[string]any)
		n, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		if n == name && ns == namespace {
			if annotations, _ := meta["annotations"].(map[string]any); annotations != nil {
				if msg, ok := annotations[ReplayErrorAnnotation].(string); ok {
					return nil, errors.New(msg)
				}
			}
			return json.Marshal(obj)
		}
	}
	return nil, fmt.Errorf("%s %s/%s: %w", res, namespace, name, ErrNotFound)
}

// List implements Backend.
func (r *Replay) List(_ context.Context, res Resource, namespace string, l labels.Selector, f fields.Selector) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, obj := range r.objects[res] {
		if !matches(obj, namespace, l, f) {
			continue
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// CanI implements Backend.
func (r *Replay) CanI(_ context.Context, review SubjectAccessReview, _ bool) (Status, error) {
	for _, rr := range r.reviews {
		if rr.spec.User == review.User && rr.spec.ResourceAttributes == review.ResourceAttributes && sameSet(rr.spec.Groups, review.Groups) {
			return rr.status, nil
		}
	}
	return Status{Allowed: false, Reason: "no SubjectAccessReview in the replay directory matches this request"}, nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// WithIndexes is r answering the index capability too, for the indexes of
// specs, computed over the objects at each query as of now(): a replay
// directory holds no deleted object, so nothing lingers.
func (r *Replay) WithIndexes(now func() time.Time, specs ...IndexSpec) Backend {
	if now == nil {
		now = time.Now
	}
	return &indexedReplay{Replay: r, now: now, specs: specs}
}

type indexedReplay struct {
	*Replay
	now   func() time.Time
	specs []IndexSpec
}

// IndexValues implements Indexer.
func (r *indexedReplay) IndexValues(_ context.Context, q IndexQuery) (IndexAnswer, error) {
	if err := q.check(); err != nil {
		return IndexAnswer{}, err
	}
	i := slices.IndexFunc(r.specs, func(s IndexSpec) bool { return s.Name == q.Index })
	if i < 0 {
		return IndexAnswer{}, fmt.Errorf("index %q: %w", q.Index, ErrNoIndex)
	}
	spec, now := r.specs[i], r.now()
	seen := map[string]bool{}
	ans := IndexAnswer{Values: []string{}}
	for _, obj := range r.objects[spec.Resource] {
		meta, _ := obj["metadata"].(map[string]any)
		if q.Exclude != nil {
			ns, _ := meta["namespace"].(string)
			name, _ := meta["name"].(string)
			if ns == q.Exclude.Namespace && name == q.Exclude.Name {
				continue
			}
		}
		for _, e := range spec.Func(obj, now) {
			if e.Key != q.Key || e.Value == q.Except || seen[e.Value] || (!e.Until.IsZero() && !e.Until.After(now)) {
				continue
			}
			seen[e.Value] = true
			ans.Values = append(ans.Values, e.Value)
		}
	}
	slices.Sort(ans.Values)
	if len(ans.Values) > q.Limit {
		ans.Values, ans.More = ans.Values[:q.Limit], true
	}
	return ans, nil
}
