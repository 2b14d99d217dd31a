package kubecap

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
}

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
			if len(s.Fields) > 0 && !slices.ContainsFunc(s.Fields, func(f string) bool { return f == path || strings.HasPrefix(path, f+".") }) {
				return nil, fmt.Errorf("%s.keys: %q is not a kept field", at, path)
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
	// stored marks an object the first list already wrote into the store
	// (it carries no JSON): the queue's Replace still needs its key.
	stored bool
	// entries are what the store's indexes get from the whole object
	// (indexed: they were computed).
	entries []heldEntry
	indexed bool
}

// The store's key function and namespace index read these.
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
// becomes a cachedObject; anything else (a cachedObject from a relist,
// a tombstone) passes unchanged, so it may run twice.
func (k *keeper) transform(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	if token, ok := u.Object[storedKey].(string); ok && token == storedToken {
		return &cachedObject{namespace: u.GetNamespace(), name: u.GetName(), stored: true}, nil
	}
	return k.compact(u.Object)
}

// storedKey is the member of a streamed first list's watch event that
// marks it as stored: the reflector checks that watch events are
// Unstructured, so the marker travels as one, its key and
// resourceVersion only. The value is a random token of this process, so
// no object from the API server can pose as a marker.
const storedKey = "\x00stored"

var storedToken = rand.Text()

// storedEvent is an Added (or Modified) event of a streamed first list
// whose object went into the store.
func storedEvent(e watch.Event, o *cachedObject, resourceVersion string) watch.Event {
	meta := map[string]any{"name": o.name}
	if o.namespace != "" {
		meta["namespace"] = o.namespace
	}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	e.Object = &unstructured.Unstructured{Object: map[string]any{"metadata": meta, storedKey: storedToken}}
	return e
}

// firstListWatch passes a watch through, writing the initial events of a
// streamed list (up to the bookmark that ends them) straight into store
// and handing on stored markers instead; after the bookmark, events pass
// unchanged. Ended before that bookmark, it empties the store before the
// reflector can see the end (and retry), so that a retry starts clean.
type firstListWatch struct {
	in    watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	k     *keeper
	store *objectStore
	ended func() // the initial events are all in store
}

func newFirstListWatch(in watch.Interface, k *keeper, store *objectStore, ended func()) *firstListWatch {
	w := &firstListWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{}), done: make(chan struct{}),
		k: k, store: store, ended: ended}
	go w.run()
	return w
}

func (w *firstListWatch) run() {
	defer close(w.done)
	defer close(w.out)
	initial := true
	defer func() {
		if initial {
			_ = w.store.Replace(nil, "")
		}
	}()
	for {
		var e watch.Event
		var ok bool
		select {
		case e, ok = <-w.in.ResultChan():
			if !ok {
				return
			}
		case <-w.stop:
			return
		}
		if initial {
			e = w.initialEvent(e)
			if e.Type == watch.Bookmark {
				if u, ok := e.Object.(*unstructured.Unstructured); ok && u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					initial = false
					w.ended()
				}
			}
		}
		select {
		case w.out <- e:
		case <-w.stop:
			return
		}
	}
}

// initialEvent writes an initial event's object into the store.
func (w *firstListWatch) initialEvent(e watch.Event) watch.Event {
	u, ok := e.Object.(*unstructured.Unstructured)
	if !ok {
		return e
	}
	switch e.Type {
	case watch.Added, watch.Modified:
		rv := u.GetResourceVersion()
		o, err := w.k.compact(u.Object)
		if err != nil {
			return watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}}
		}
		w.store.put(o)
		return storedEvent(e, o, rv)
	case watch.Deleted:
		w.store.remove(u.GetNamespace(), u.GetName(), nil)
	}
	return e
}

func (w *firstListWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop ends the watch and returns once the store is as it will stay.
func (w *firstListWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
	<-w.done
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
		var m any = obj
		for _, p := range strings.Split(path, ".") {
			parent, _ := m.(map[string]any)
			m = parent[p]
		}
		if m, ok := m.(map[string]any); ok {
			for key := range m {
				if !kept[key] {
					delete(m, key)
				}
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
// before the next, and watches; the watch events are compacted by the
// informer's transform. Where the client supports it, the informer
// streams the initial list as watch events instead (WatchListClient), and
// the same transform compacts each one as it arrives.
//
// The first list writes each object straight into store and hands the
// informer only its key (a stored marker), so that a first sync of
// 100,000 Pods never holds their kept JSON on the Go heap and in the store
// at once. Only the first: nothing is queued before it, whereas a relist
// may overtake events still queued, which must then be applied in order
// through the queue. A first list that fails leaves the store empty.
func pagedListWatch(ri dynamic.ResourceInterface, k *keeper, store *objectStore) *cache.ListWatch {
	var first atomic.Bool
	first.Store(true)
	list := func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		// "0" would be served whole from the API server's watch cache,
		// ignoring the page size.
		if opts.ResourceVersion == "0" {
			opts.ResourceVersion = ""
		}
		opts.Limit = listPage
		direct := first.Load()
		out := &cachedList{}
		fail := func(err error) (runtime.Object, error) {
			if direct {
				_ = store.Replace(nil, "")
			}
			return nil, err
		}
		for {
			page, err := ri.List(ctx, opts)
			if err != nil {
				return fail(err)
			}
			for i := range page.Items {
				o, err := k.compact(page.Items[i].Object)
				if err != nil {
					return fail(err)
				}
				if direct {
					store.put(o)
					o = &cachedObject{namespace: o.namespace, name: o.name, stored: true}
				}
				out.Items = append(out.Items, o)
			}
			out.ResourceVersion = page.GetResourceVersion()
			if page.GetContinue() == "" {
				first.Store(false)
				return out, nil
			}
			opts.Continue, opts.ResourceVersion = page.GetContinue(), ""
		}
	}
	watchFn := func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		if opts.SendInitialEvents == nil || !*opts.SendInitialEvents || !first.Load() {
			// Events may be queued from here on: later lists and
			// streamed lists go through the queue.
			first.Store(false)
			return ri.Watch(ctx, opts)
		}
		w, err := ri.Watch(ctx, opts)
		if err != nil {
			return nil, err
		}
		return newFirstListWatch(w, k, store, func() { first.Store(false) }), nil
	}
	return &cache.ListWatch{
		ListWithContextFunc:  list,
		WatchFuncWithContext: watchFn,
	}
}

// listPage is the page size of a list.
const listPage = 500
