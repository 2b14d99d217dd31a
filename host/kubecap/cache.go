package kubecap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// CacheAnnotation is the metadata annotation in which a module declares
// how this host may cache the kinds it reads (a JSON list of CacheSpec).
// Kubewarden keeps annotations as they are, so the declaration travels
// with the module without a key kwctl would refuse.
const CacheAnnotation = "io.yunikorn-userinfo.host.cache"

// Watch scopes of a CacheSpec.
const (
	// WatchCluster: one watch over all namespaces for the kind, started
	// on its first read; reads of one namespace use its namespace index.
	WatchCluster = "cluster"
	// WatchNamespace: one watch per namespace read (for kinds the account
	// may list only in some namespaces); list_resources_all adds one over
	// all namespaces. The default.
	WatchNamespace = "namespace"
)

// CacheSpec declares how one kind is cached: what a policy may read of its
// objects, where it is watched, and which labels are indexed.
type CacheSpec struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Watch is WatchCluster or WatchNamespace (the default).
	Watch string `json:"watch,omitempty"`
	// Fields are the dotted paths kept of each object (an array keeps the
	// path below it in every element); apiVersion and kind always stay.
	// Empty: the whole object but metadata.managedFields.
	Fields []string `json:"fields,omitempty"`
	// LabelIndex are label keys whose key=value pairs are indexed, so a
	// list whose selector requires one (=, ==, in) reads only the objects
	// that have it; "*" indexes every label.
	LabelIndex []string `json:"labelIndex,omitempty"`
	// Keys keep, of a kept field that is a map (its dotted path, as
	// "metadata.labels"), only the keys listed: an object stuffed with
	// labels no policy reads costs the cache nothing for them. A list
	// whose label selector names a label not kept is refused, since the
	// cache cannot answer it.
	Keys map[string][]string `json:"keys,omitempty"`
	// MaxValueBytes bound, of a kept field that is a map (its dotted
	// path), the string values of the keys listed, in bytes: a longer
	// value is kept as TooLongValue, not its bytes, so that what an object
	// carries under those keys costs the cache at most the bounds.
	MaxValueBytes map[string]map[string]int `json:"maxValueBytes,omitempty"`
}

// TooLongValue is what a watch cache keeps in place of a value longer than
// its bound (CacheSpec.MaxValueBytes); a reader that bounds a value
// treats it as too long.
const TooLongValue = "<value too long to cache>"

// labelsKept is the set of label keys s keeps, nil for all.
func (s CacheSpec) labelsKept() map[string]bool {
	keys, ok := s.Keys["metadata.labels"]
	if !ok {
		return nil
	}
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// checkSelector refuses a label selector that names a label the cache
// does not keep.
func (s CacheSpec) checkSelector(l labels.Selector) error {
	kept := s.labelsKept()
	if kept == nil {
		return nil
	}
	reqs, _ := l.Requirements()
	for _, r := range reqs {
		if !kept[r.Key()] {
			return fmt.Errorf("label_selector: the host's cache of %s keeps only the labels %s, not %q",
				s.resource(), strings.Join(slices.Sorted(maps.Keys(kept)), ", "), r.Key())
		}
	}
	return nil
}

// keepsField reports whether s keeps the field at the dotted path.
func (s CacheSpec) keepsField(path string) bool {
	return len(s.Fields) == 0 || slices.ContainsFunc(s.Fields, func(f string) bool { return f == path || strings.HasPrefix(path, f+".") })
}

func (s CacheSpec) resource() Resource { return Resource{APIVersion: s.APIVersion, Kind: s.Kind} }

// ParseCacheSpecs reads a JSON list of CacheSpec strictly: unknown keys,
// a kind declared twice, an unknown watch scope or an empty path are
// errors naming the entry.
func ParseCacheSpecs(data []byte) ([]CacheSpec, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var specs []CacheSpec
	if err := dec.Decode(&specs); err != nil {
		return nil, fmt.Errorf("cache declaration: %w", err)
	}
	if dec.More() {
		return nil, errors.New("cache declaration: more than one JSON value")
	}
	seen := map[Resource]bool{}
	for i, s := range specs {
		at := fmt.Sprintf("cache declaration[%d]", i)
		if _, err := schema.ParseGroupVersion(s.APIVersion); err != nil || s.APIVersion == "" || s.Kind == "" {
			return nil, fmt.Errorf("%s: apiVersion and kind are required (got %q, %q)", at, s.APIVersion, s.Kind)
		}
		if seen[s.resource()] {
			return nil, fmt.Errorf("%s: %s declared twice", at, s.resource())
		}
		seen[s.resource()] = true
		switch s.Watch {
		case "", WatchCluster, WatchNamespace:
		default:
			return nil, fmt.Errorf("%s.watch: %q is neither %q nor %q", at, s.Watch, WatchCluster, WatchNamespace)
		}
		for j, f := range s.Fields {
			if f == "" || slices.Contains(strings.Split(f, "."), "") {
				return nil, fmt.Errorf("%s.fields[%d]: %q is not a dotted path", at, j, f)
			}
		}
		for j, k := range s.LabelIndex {
			if k == "" || strings.Contains(k, "=") {
				return nil, fmt.Errorf("%s.labelIndex[%d]: %q is not a label key", at, j, k)
			}
			if kept := s.labelsKept(); kept != nil && (k == "*" || !kept[k]) {
				return nil, fmt.Errorf("%s.labelIndex[%d]: %q is not among the labels kept (keys.metadata.labels)", at, j, k)
			}
		}
		for _, path := range slices.Sorted(maps.Keys(s.Keys)) {
			if path == "" || slices.Contains(strings.Split(path, "."), "") {
				return nil, fmt.Errorf("%s.keys: %q is not a dotted path", at, path)
			}
			if !s.keepsField(path) {
				return nil, fmt.Errorf("%s.keys: %q is not a kept field", at, path)
			}
		}
		for _, path := range slices.Sorted(maps.Keys(s.MaxValueBytes)) {
			if path == "" || slices.Contains(strings.Split(path, "."), "") || !s.keepsField(path) {
				return nil, fmt.Errorf("%s.maxValueBytes: %q is not a kept field", at, path)
			}
			for _, key := range slices.Sorted(maps.Keys(s.MaxValueBytes[path])) {
				if n := s.MaxValueBytes[path][key]; n < len(TooLongValue) {
					return nil, fmt.Errorf("%s.maxValueBytes.%s: the bound of %q, %d, is less than the %d bytes of the marker kept in place of a longer value",
						at, path, key, n, len(TooLongValue))
				}
			}
		}
	}
	return specs, nil
}

// MergeCacheSpecs returns base with every kind that over declares
// replaced by over's entry (a host flag over the module's declaration).
func MergeCacheSpecs(base, over []CacheSpec) []CacheSpec {
	out := slices.Clone(base)
	for _, o := range over {
		i := slices.IndexFunc(out, func(s CacheSpec) bool { return s.resource() == o.resource() })
		if i >= 0 {
			out[i] = o
		} else {
			out = append(out, o)
		}
	}
	return out
}

// cachedObject is what a watch cache holds of one object: its key and the
// JSON of the fields its kind's CacheSpec keeps, which is what get and
// list answer with. A Pod of a few KiB of JSON takes tens of KiB as an
// unstructured map; its kept fields take a few hundred bytes here.
type cachedObject struct {
	namespace, name string
	raw             []byte
	// entries are what the kind's indexes get from the whole object
	// (indexed: they were computed).
	entries []heldEntry
	indexed bool
}

// The informer's key function reads these.
func (o *cachedObject) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: o.namespace, Name: o.name}
}
func (o *cachedObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (o *cachedObject) DeepCopyObject() runtime.Object   { c := *o; return &c } // raw is never written

// cachedList is what a paged list hands the informer: the page's objects,
// already compacted, so that a list of 100,000 Pods never exists as
// unstructured maps at once.
type cachedList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []runtime.Object
}

func (l *cachedList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = slices.Clone(l.Items)
	return &c
}

// keeper prunes objects of one kind to its declared fields, after running
// the index functions of the kind, if any, on the whole object.
type keeper struct {
	r       Resource
	fields  maskNode // nil: everything but managedFields
	indexes []IndexSpec
	now     func() time.Time
	keys    map[string]map[string]bool // path of a map: the keys kept
	bounds  map[string]map[string]int  // path of a map: the bounded keys' bounds
}

// keeperOf is the keeper of what spec keeps of kind r (a zero spec: the
// whole object but managedFields).
func keeperOf(r Resource, spec CacheSpec) *keeper {
	k := newKeeper(r, spec.Fields).withKeys(spec.Keys)
	k.bounds = spec.MaxValueBytes
	return k
}

// withKeys is k keeping only the listed keys of the maps at those paths.
func (k *keeper) withKeys(keys map[string][]string) *keeper {
	if len(keys) == 0 {
		return k
	}
	k.keys = map[string]map[string]bool{}
	for path, list := range keys {
		m := map[string]bool{}
		for _, key := range list {
			m[key] = true
		}
		k.keys[path] = m
	}
	return k
}

func newKeeper(r Resource, fields []string) *keeper {
	k := &keeper{r: r}
	if len(fields) > 0 {
		k.fields = maskNode{}
		for _, f := range fields {
			k.fields.insert(strings.Split(f, "."))
		}
	}
	return k
}

// transform is the informer's TransformFunc: an unstructured object
// becomes a cachedObject; anything else (a cachedObject from a paged
// list, a tombstone) passes unchanged, so it may run twice.
func (k *keeper) transform(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	return k.compact(u.Object)
}

// compact prunes obj (in place) and keeps its JSON.
func (k *keeper) compact(obj map[string]any) (*cachedObject, error) {
	meta, _ := obj["metadata"].(map[string]any)
	o := &cachedObject{}
	if len(k.indexes) > 0 {
		o.entries, o.indexed = entriesOf(k.indexes, obj, k.now()), true
	}
	o.namespace, _ = meta["namespace"].(string)
	o.name, _ = meta["name"].(string)
	if meta != nil {
		delete(meta, "managedFields")
	}
	if k.fields != nil {
		for key, v := range obj {
			if key == "apiVersion" || key == "kind" {
				continue
			}
			child, ok := k.fields[key]
			if !ok {
				delete(obj, key)
				continue
			}
			obj[key] = child.prune(v)
		}
	}
	for path, kept := range k.keys {
		m := mapAt(obj, path)
		for key := range m {
			if !kept[key] {
				delete(m, key)
			}
		}
	}
	for path, bounds := range k.bounds {
		m := mapAt(obj, path)
		for key, n := range bounds {
			if v, ok := m[key].(string); ok && len(v) > n {
				m[key] = TooLongValue
			}
		}
	}
	// Items of a list carry no apiVersion and kind of their own.
	if _, ok := obj["apiVersion"].(string); !ok {
		obj["apiVersion"] = k.r.APIVersion
	}
	if _, ok := obj["kind"].(string); !ok {
		obj["kind"] = k.r.Kind
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("cache %s %s/%s: %w", k.r, o.namespace, o.name, err)
	}
	o.raw = raw
	return o, nil
}

// mapAt is the map at the dotted path of obj, nil if there is none.
func mapAt(obj map[string]any, path string) map[string]any {
	var v any = obj
	for _, p := range strings.Split(path, ".") {
		parent, _ := v.(map[string]any)
		v = parent[p]
	}
	m, _ := v.(map[string]any)
	return m
}

// labelIndex indexes the declared label keys of cached objects.
type labelIndex struct {
	all  bool
	keys map[string]bool
}

func newLabelIndex(keys []string) *labelIndex {
	if len(keys) == 0 {
		return nil
	}
	li := &labelIndex{keys: map[string]bool{}}
	for _, k := range keys {
		if k == "*" {
			li.all = true
		}
		li.keys[k] = true
	}
	return li
}

func (li *labelIndex) covers(key string) bool { return li != nil && (li.all || li.keys[key]) }

// labelsOf reads a cached object's labels.
func labelsOf(raw []byte) labels.Set {
	set := labels.Set{}
	gjson.GetBytes(raw, "metadata.labels").ForEach(func(k, v gjson.Result) bool {
		if v.Type == gjson.String {
			set[k.Str] = v.Str
		}
		return true
	})
	return set
}

// matchCached reports whether a cached object is in namespace ("": any)
// and matches both selectors. Field selectors see the kept fields only.
// matching is the kept JSON of the items, each made a cachedObject by
// cached, that match namespace ("": all) and both selectors: the one loop
// of the watch cache's lists and of a cached view's.
func matching[T any](items []T, cached func(T) (*cachedObject, error), namespace string, l labels.Selector, f fields.Selector) ([][]byte, error) {
	var out [][]byte
	for _, item := range items {
		o, err := cached(item)
		if err != nil {
			return nil, err
		}
		ok, err := matchCached(o, namespace, l, f)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, o.raw)
		}
	}
	return out, nil
}

func matchCached(o *cachedObject, namespace string, l labels.Selector, f fields.Selector) (bool, error) {
	if namespace != "" && o.namespace != namespace {
		return false, nil
	}
	if !l.Empty() && !l.Matches(labelsOf(o.raw)) {
		return false, nil
	}
	if f.Empty() {
		return true, nil
	}
	return f.Matches(rawFields(o.raw)), nil
}

// rawFields are the scalar fields of an object's JSON by dotted path, as
// flatten collects them, read where a field selector asks (not arrays;
// null is absent).
type rawFields []byte

func (r rawFields) field(path string) (string, bool) {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		parts[i] = gjson.Escape(p)
	}
	v := gjson.GetBytes(r, strings.Join(parts, "."))
	switch v.Type {
	case gjson.String:
		return v.Str, true
	case gjson.True:
		return "true", true
	case gjson.False:
		return "false", true
	case gjson.Number:
		return strconv.FormatFloat(v.Num, 'f', -1, 64), true
	}
	return "", false
}

func (r rawFields) Has(path string) bool { _, ok := r.field(path); return ok }
func (r rawFields) Get(path string) string {
	v, _ := r.field(path)
	return v
}

// pagedListWatch lists in pages of listPage objects, compacting each page
// before the next, so that a list of 100,000 Pods never exists as
// unstructured maps at once, and watches. Where the client supports it,
// the informer streams its first list as watch events instead
// (client-go's WatchListClient), and its transform compacts each one as
// it arrives.
func pagedListWatch(ri dynamic.ResourceInterface, k *keeper) *cache.ListWatch {
	list := func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		// "0" would be served whole from the API server's watch cache,
		// ignoring the page size.
		if opts.ResourceVersion == "0" {
			opts.ResourceVersion = ""
		}
		opts.Limit = listPage
		out := &cachedList{}
		for {
			page, err := ri.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			for i := range page.Items {
				o, err := k.compact(page.Items[i].Object)
				if err != nil {
					return nil, err
				}
				out.Items = append(out.Items, o)
			}
			out.ResourceVersion = page.GetResourceVersion()
			if page.GetContinue() == "" {
				return out, nil
			}
			opts.Continue, opts.ResourceVersion = page.GetContinue(), ""
		}
	}
	watchFn := func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return ri.Watch(ctx, opts)
	}
	return &cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}
}

// listPage is the page size of a list.
const listPage = 500
