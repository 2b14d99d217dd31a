package kubecap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// ClusterOptions configure NewCluster.
type ClusterOptions struct {
	// Config reaches the API server (in-cluster, or from a kubeconfig).
	// Required unless Dynamic, Reviews and Mapper are all set.
	Config *rest.Config
	// Resources are the kinds to watch: the module's contextAwareResources.
	Resources []Resource
	// Cache declares, per kind, the watch scope, the fields kept and the
	// labels indexed (the module's CacheAnnotation, and the host's flag
	// over it). A kind not declared is watched per namespace and kept
	// whole but for metadata.managedFields.
	Cache []CacheSpec
	// Indexes are kept by the watch over all namespaces of their kinds
	// (which StartIndexes starts) and answer the index capability.
	Indexes []IndexSpec
	// SyncTimeout bounds the first list of every watched kind. Default: 30s.
	SyncTimeout time.Duration
	// ReviewTTL is how long a SubjectAccessReview answer is reused, as
	// policy-server caches can_i for 5 seconds. Default: 5s.
	ReviewTTL time.Duration
	// MaxReviews bounds the answers kept. Default: 10000.
	MaxReviews int
	// Logger. Default: discard.
	Logger *slog.Logger
	// Clock times the cached answers and the retries of unserved kinds.
	// Default: the real clock; tests pass a fake one.
	Clock clock.PassiveClock

	// For tests: the clients and the mapper to use instead of those made
	// from Config.
	Dynamic dynamic.Interface
	Reviews SubjectAccessReviewer
	Mapper  meta.RESTMapper
}

// SubjectAccessReviewer creates SubjectAccessReviews (the typed client's
// AuthorizationV1().SubjectAccessReviews()).
type SubjectAccessReviewer interface {
	Create(ctx context.Context, sar *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// Cluster is a Backend on a real API server. Reads come from informers
// (watch caches), started on first use and kept: one per kind and
// namespace that get and list_resources_by_namespace ask about, one over
// all namespaces for list_resources_all and cluster-scoped kinds. So a
// policy that reads one namespace's ConfigMaps needs list and watch there
// only, and a module that declares kinds but does not use them (its
// settings off) needs no access at all. can_i asks SubjectAccessReviews,
// each answer kept for ReviewTTL.
type Cluster struct {
	opts     ClusterOptions
	dynamic  dynamic.Interface
	reviews  SubjectAccessReviewer
	mapper   meta.RESTMapper
	declared map[Resource]bool
	specs    map[Resource]CacheSpec
	indexes  map[Resource][]IndexSpec
	indexOf  map[string]Resource
	kinds    map[Resource]kindInfo
	unmapped map[Resource]time.Time // kinds not served at that time
	runCtx   context.Context
	stop     context.CancelFunc
	mu       sync.Mutex
	scopes   map[scopeKey]*scope
	answered map[string]reviewAnswer
}

type kindInfo struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// scopeKey names one informer: a kind in a namespace, or in all ("").
type scopeKey struct {
	r  Resource
	ns string
}

// scope is one informer: its store is usable once synced is closed and err
// is nil. A scope that has not synced within SyncTimeout holds that error,
// so that admissions fail fast instead of each waiting, until it syncs.
type scope struct {
	store  *watchCache
	synced chan struct{}
	err    error
}

// failedScopeRetry is how long a kind the API server did not serve is
// taken as unserved before discovery is asked again.
const failedScopeRetry = 30 * time.Second

type reviewAnswer struct {
	status  Status
	expires time.Time
}

// NewCluster maps each resource to its API resource; informers start on
// first use. A declared kind that the API server does not serve (an
// operator's CRD not installed, or not yet) is logged, and mapped again
// when the policy first asks for it: a module declares every kind its
// settings may read, and the cluster serves those its settings use.
func NewCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = 30 * time.Second
	}
	if opts.ReviewTTL <= 0 {
		opts.ReviewTTL = 5 * time.Second
	}
	if opts.MaxReviews <= 0 {
		opts.MaxReviews = 10000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{opts: opts, dynamic: opts.Dynamic, reviews: opts.Reviews, kinds: map[Resource]kindInfo{},
		declared: map[Resource]bool{}, specs: map[Resource]CacheSpec{}, unmapped: map[Resource]time.Time{},
		indexes: map[Resource][]IndexSpec{}, indexOf: map[string]Resource{},
		scopes: map[scopeKey]*scope{}, answered: map[string]reviewAnswer{}}
	mapper := opts.Mapper
	if c.dynamic == nil || c.reviews == nil || mapper == nil {
		if opts.Config == nil {
			return nil, errors.New("kubernetes capabilities: no API server configuration")
		}
		var err error
		if c.dynamic == nil {
			if c.dynamic, err = dynamic.NewForConfig(opts.Config); err != nil {
				return nil, fmt.Errorf("kubernetes capabilities: dynamic client: %w", err)
			}
		}
		if c.reviews == nil {
			cs, err := kubernetes.NewForConfig(opts.Config)
			if err != nil {
				return nil, fmt.Errorf("kubernetes capabilities: client: %w", err)
			}
			c.reviews = cs.AuthorizationV1().SubjectAccessReviews()
		}
		if mapper == nil {
			dc, err := discovery.NewDiscoveryClientForConfig(opts.Config)
			if err != nil {
				return nil, fmt.Errorf("kubernetes capabilities: discovery client: %w", err)
			}
			mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
		}
	}
	c.mapper = mapper
	for _, s := range opts.Cache {
		c.specs[s.resource()] = s
	}
	for _, r := range opts.Resources {
		if _, err := schema.ParseGroupVersion(r.APIVersion); err != nil {
			return nil, fmt.Errorf("kubernetes capabilities: %s: %w", r, err)
		}
		c.declared[r] = true
		if _, err := c.mapKind(r); err != nil {
			opts.Logger.Info("a kind the module may read is not served by the API server (yet); reads of it fail until it is",
				"resource", r.String(), "error", err)
		}
	}
	for i, ix := range opts.Indexes {
		at := fmt.Sprintf("kubernetes capabilities: index %d (%q)", i, ix.Name)
		switch _, dup := c.indexOf[ix.Name]; {
		case ix.Name == "" || ix.Func == nil:
			return nil, fmt.Errorf("%s: a name and a function are required", at)
		case dup:
			return nil, fmt.Errorf("%s: registered twice", at)
		case !c.declared[ix.Resource]:
			return nil, fmt.Errorf("%s: %s is not among the resources", at, ix.Resource)
		case ix.Linger < 0:
			return nil, fmt.Errorf("%s: negative linger %s", at, ix.Linger)
		}
		c.indexOf[ix.Name] = ix.Resource
		c.indexes[ix.Resource] = append(c.indexes[ix.Resource], ix)
	}
	c.runCtx, c.stop = context.WithCancel(context.WithoutCancel(ctx))
	return c, nil
}

// StartIndexes starts the watches that keep the indexes, without waiting
// for them: an index sees every deletion from then on, which a watch
// started by the first query would miss. A kind not served yet is
// started by its first query.
func (c *Cluster) StartIndexes() {
	for r := range c.indexes {
		k, err := c.kind(r)
		if err != nil {
			c.opts.Logger.Warn("cannot keep an index yet", "resource", r.String(), "error", err)
			continue
		}
		c.mu.Lock()
		if c.scopes[scopeKey{r, ""}] == nil {
			c.scopes[scopeKey{r, ""}] = c.startScope(r, k, "")
		}
		c.mu.Unlock()
	}
}

// IndexValues implements Indexer, from the watch over all namespaces of
// the index's kind.
func (c *Cluster) IndexValues(ctx context.Context, q IndexQuery) (IndexAnswer, error) {
	if err := q.check(); err != nil {
		return IndexAnswer{}, err
	}
	r, ok := c.indexOf[q.Index]
	if !ok {
		return IndexAnswer{}, fmt.Errorf("index %q: %w", q.Index, ErrNoIndex)
	}
	k, err := c.kind(r)
	if err != nil {
		return IndexAnswer{}, err
	}
	s, err := c.store(ctx, r, k, "")
	if err != nil {
		return IndexAnswer{}, err
	}
	return s.store.indexValues(q)
}

// Close stops the informers. Their caches still answer reads (the
// reviews in flight while serve stops); their memory goes with the
// Cluster.
func (c *Cluster) Close() { c.stop() }

func (c *Cluster) kind(r Resource) (kindInfo, error) {
	if !c.declared[r] {
		return kindInfo{}, fmt.Errorf("%s is not watched", r)
	}
	return c.mapKind(r)
}

// mapKind maps r to its API resource, asking discovery again (at most
// every failedScopeRetry) while the API server does not serve it.
func (c *Cluster) mapKind(r Resource) (kindInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.kinds[r]; ok {
		return k, nil
	}
	gv, _ := schema.ParseGroupVersion(r.APIVersion) // checked by NewCluster
	failed, seen := c.unmapped[r]
	mapping, err := c.mapper.RESTMapping(gv.WithKind(r.Kind).GroupKind(), gv.Version)
	if err != nil && seen && c.opts.Clock.Since(failed) >= failedScopeRetry {
		if reset, ok := c.mapper.(interface{ Reset() }); ok {
			reset.Reset() // forget the discovery answers, which predate the CRD
			mapping, err = c.mapper.RESTMapping(gv.WithKind(r.Kind).GroupKind(), gv.Version)
		}
		c.unmapped[r] = c.opts.Clock.Now()
	}
	if err != nil {
		if !seen {
			c.unmapped[r] = c.opts.Clock.Now()
		}
		return kindInfo{}, fmt.Errorf("%s is not served by the API server: %w", r, err)
	}
	delete(c.unmapped, r)
	k := kindInfo{gvr: mapping.Resource, namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace}
	c.kinds[r] = k
	return k, nil
}

// store returns a synced watch cache holding r's objects in namespace ns
// ("" for all), starting its informer if none covers it yet, and waiting
// for its first list at most until ctx ends. A kind watched cluster-wide
// has one informer for every namespace.
func (c *Cluster) store(ctx context.Context, r Resource, k kindInfo, ns string) (*scope, error) {
	if !k.namespaced || c.specs[r].Watch == WatchCluster {
		ns = ""
	}
	c.mu.Lock()
	s := c.scopes[scopeKey{r, ""}]
	if s == nil || s.err != nil {
		s = c.scopes[scopeKey{r, ns}]
	}
	if s == nil {
		s = c.startScope(r, k, ns)
		c.scopes[scopeKey{r, ns}] = s
	}
	c.mu.Unlock()
	select {
	case <-s.synced:
	case <-ctx.Done():
		return nil, fmt.Errorf("watch %s%s: not synced yet: %w", r, inNamespace(ns), ctx.Err())
	}
	c.mu.Lock()
	err := s.err
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s, nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

// startScope starts one informer; its first list is waited for in the
// background, bounded by SyncTimeout. c.mu is held.
func (c *Cluster) startScope(r Resource, k kindInfo, ns string) *scope {
	ctx := c.runCtx
	spec := c.specs[r]
	keep := keeperOf(r, spec)
	var ri dynamic.ResourceInterface = c.dynamic.Resource(k.gvr)
	if ns != "" {
		ri = c.dynamic.Resource(k.gvr).Namespace(ns)
	}
	var indexes []IndexSpec
	if ix := c.indexes[r]; ns == "" && len(ix) > 0 {
		// Only the watch over all namespaces keeps the indexes.
		indexes = ix
		keep.indexes, keep.now = ix, c.opts.Clock.Now
	}
	store := newWatchCache(newLabelIndex(spec.LabelIndex), indexes, c.opts.Clock.Now)
	// client-go's informer: each object is pruned by the transform before
	// it is queued (as each streamed event arrives, or page by page for a
	// list: pagedListWatch), and only the pruned object stays.
	indexer, inf := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(pagedListWatch(ri, keep), c.dynamic),
		ObjectType:    &unstructured.Unstructured{},
		Handler:       store.handler(),
		Indexers:      store.indexers(),
		Transform:     keep.transform,
	})
	store.indexer = indexer.(cache.Indexer)
	s := &scope{store: store, synced: make(chan struct{})}
	go inf.RunWithContext(ctx)
	began := time.Now()
	go func() {
		syncCtx, cancel := context.WithTimeout(ctx, c.opts.SyncTimeout)
		defer cancel()
		if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
			// Reads now fail at once, naming why, rather than each
			// waiting; the informer keeps listing (client-go retries with
			// backoff), so a large first list or access granted later
			// still ends in a synced cache.
			err := fmt.Errorf("watch %s%s: not synced within %s (are list and watch allowed for this account?)", r, inNamespace(ns), c.opts.SyncTimeout)
			c.mu.Lock()
			s.err = err
			c.mu.Unlock()
			close(s.synced)
			c.opts.Logger.Warn("cannot watch for the policy yet", "resource", r.String(), "namespace", ns, "error", err)
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				return
			}
			c.mu.Lock()
			s.err = nil
			c.mu.Unlock()
		} else {
			close(s.synced)
		}
		c.opts.Logger.Info("watching for the policy", "resource", r.String(), "namespace", ns,
			"objects", store.size(), "sync_ms", time.Since(began).Milliseconds())
	}()
	return s
}

// Warm starts the watches of rs over all namespaces and waits until each
// has synced or ctx ends, however long the first list takes (the
// informer keeps trying). serve calls it before /readyz turns 200, so
// that the first reviews read a synced cache.
func (c *Cluster) Warm(ctx context.Context, rs []Resource) error {
	for _, r := range rs {
		for tries := 0; ; tries++ {
			k, err := c.kind(r)
			if err == nil {
				_, err = c.store(ctx, r, k, "")
			}
			if err == nil {
				break
			}
			if tries%30 == 0 {
				c.opts.Logger.Warn("waiting for a watch the policy needs", "resource", r.String(), "error", err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("warm the cache of %s: %w", r, err)
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// Watches counts the informers running (each one watch on the API
// server).
func (c *Cluster) Watches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.scopes {
		if s.err == nil {
			n++
		}
	}
	return n
}

// Namespaced implements Backend.
func (c *Cluster) Namespaced(_ context.Context, r Resource) (bool, error) {
	k, err := c.kind(r)
	return k.namespaced, err
}

// Get implements Backend: from the watch cache (the declared fields), or
// with fresh the whole object from the API server.
func (c *Cluster) Get(ctx context.Context, r Resource, namespace, name string, fresh bool) (json.RawMessage, error) {
	k, err := c.kind(r)
	if err != nil {
		return nil, err
	}
	if fresh {
		var ri dynamic.ResourceInterface = c.dynamic.Resource(k.gvr)
		if k.namespaced {
			ri = c.dynamic.Resource(k.gvr).Namespace(namespace)
		}
		obj, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s %s/%s: %w", r, namespace, name, ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("get %s %s/%s: %w", r, namespace, name, err)
		}
		return obj.MarshalJSON()
	}
	s, err := c.store(ctx, r, k, namespace)
	if err != nil {
		return nil, err
	}
	if !k.namespaced {
		namespace = ""
	}
	raw, ok, err := s.store.get(namespace, name)
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", r, namespace, name, err)
	}
	if !ok {
		key := name
		if namespace != "" {
			key = namespace + "/" + name
		}
		return nil, fmt.Errorf("%s %s: %w", r, key, ErrNotFound)
	}
	return raw, nil
}

// List implements Backend, from the watch cache: the objects of the
// namespace's index, or of a required label value's, whichever is smaller.
func (c *Cluster) List(ctx context.Context, r Resource, namespace string, l labels.Selector, f fields.Selector) ([]json.RawMessage, error) {
	k, err := c.kind(r)
	if err != nil {
		return nil, err
	}
	if err := c.specs[r].checkSelector(l); err != nil {
		return nil, err
	}
	s, err := c.store(ctx, r, k, namespace)
	if err != nil {
		return nil, err
	}
	items, err := s.store.list(namespace, l, f)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(items))
	for i, raw := range items {
		out[i] = raw
	}
	return out, nil
}

// CanI implements Backend.
func (c *Cluster) CanI(ctx context.Context, review SubjectAccessReview, fresh bool) (Status, error) {
	key := review.key()
	now := c.opts.Clock.Now()
	if !fresh {
		c.mu.Lock()
		a, ok := c.answered[key]
		c.mu.Unlock()
		if ok && now.Before(a.expires) {
			return a.status, nil
		}
	}
	ra := review.ResourceAttributes
	sar, err := c.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   review.User,
		Groups: review.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ra.Namespace, Verb: ra.Verb, Group: ra.Group, Version: ra.Version,
			Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name,
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		return Status{}, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	st := Status{Allowed: sar.Status.Allowed, Denied: sar.Status.Denied, Reason: sar.Status.Reason, EvaluationError: sar.Status.EvaluationError}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.answered) >= c.opts.MaxReviews {
		for k, a := range c.answered {
			if now.After(a.expires) {
				delete(c.answered, k)
			}
		}
		if len(c.answered) >= c.opts.MaxReviews {
			clear(c.answered)
		}
	}
	c.answered[key] = reviewAnswer{status: st, expires: now.Add(c.opts.ReviewTTL)}
	return st, nil
}
