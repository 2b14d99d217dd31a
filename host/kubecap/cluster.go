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
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
)

// ClusterOptions configure NewCluster.
type ClusterOptions struct {
	// Config reaches the API server (in-cluster, or from a kubeconfig).
	// Required unless Dynamic, Reviews and Mapper are all set.
	Config *rest.Config
	// Resources are the kinds to watch: the module's contextAwareResources.
	Resources []Resource
	// SyncTimeout bounds the first list of every watched kind. Default: 30s.
	SyncTimeout time.Duration
	// ReviewTTL is how long a SubjectAccessReview answer is reused, as
	// policy-server caches can_i for 5 seconds. Default: 5s.
	ReviewTTL time.Duration
	// MaxReviews bounds the answers kept. Default: 10000.
	MaxReviews int
	// Logger. Default: discard.
	Logger *slog.Logger

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

// Cluster is a Backend on a real API server: one informer per declared
// kind, started by NewCluster and synced before it returns, so get and
// list read a watch cache; can_i asks SubjectAccessReviews, each answer
// kept for ReviewTTL.
type Cluster struct {
	opts     ClusterOptions
	dynamic  dynamic.Interface
	reviews  SubjectAccessReviewer
	kinds    map[Resource]watched
	stop     context.CancelFunc
	mu       sync.Mutex
	answered map[string]reviewAnswer
}

type watched struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	store      cache.Indexer
}

type reviewAnswer struct {
	status  Status
	expires time.Time
}

// NewCluster maps each resource to its API resource, starts its informer
// and waits until every informer has listed its objects; an error names
// the kind that could not be watched (not served, or not allowed).
func NewCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
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
	c := &Cluster{opts: opts, dynamic: opts.Dynamic, reviews: opts.Reviews, kinds: map[Resource]watched{}, answered: map[string]reviewAnswer{}}
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
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	c.stop = stop
	factory := dynamicinformer.NewDynamicSharedInformerFactory(c.dynamic, 0)
	informers := map[Resource]cache.SharedIndexInformer{}
	for _, r := range opts.Resources {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			stop()
			return nil, fmt.Errorf("kubernetes capabilities: %s: %w", r, err)
		}
		mapping, err := mapper.RESTMapping(gv.WithKind(r.Kind).GroupKind(), gv.Version)
		if err != nil {
			stop()
			return nil, fmt.Errorf("kubernetes capabilities: %s is not served by the API server: %w", r, err)
		}
		inf := factory.ForResource(mapping.Resource).Informer()
		informers[r] = inf
		c.kinds[r] = watched{gvr: mapping.Resource, namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace, store: inf.GetIndexer()}
	}
	factory.Start(runCtx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, opts.SyncTimeout)
	defer cancel()
	for r, inf := range informers {
		if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
			stop()
			return nil, fmt.Errorf("kubernetes capabilities: watch %s: not synced within %s (is list/watch allowed for this service account?)", r, opts.SyncTimeout)
		}
		opts.Logger.InfoContext(ctx, "watching for the policy", "resource", r.String(), "objects", len(inf.GetIndexer().ListKeys()))
	}
	return c, nil
}

// Close stops the informers.
func (c *Cluster) Close() { c.stop() }

func (c *Cluster) kind(r Resource) (watched, error) {
	w, ok := c.kinds[r]
	if !ok {
		return watched{}, fmt.Errorf("%s is not watched", r)
	}
	return w, nil
}

// Namespaced implements Backend.
func (c *Cluster) Namespaced(_ context.Context, r Resource) (bool, error) {
	w, err := c.kind(r)
	return w.namespaced, err
}

// Get implements Backend: from the watch cache, or with fresh from the API
// server.
func (c *Cluster) Get(ctx context.Context, r Resource, namespace, name string, fresh bool) (json.RawMessage, error) {
	w, err := c.kind(r)
	if err != nil {
		return nil, err
	}
	if fresh {
		var ri dynamic.ResourceInterface = c.dynamic.Resource(w.gvr)
		if w.namespaced {
			ri = c.dynamic.Resource(w.gvr).Namespace(namespace)
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
	key := name
	if w.namespaced {
		key = namespace + "/" + name
	}
	item, ok, err := w.store.GetByKey(key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", r, key, ErrNotFound)
	}
	return item.(*unstructured.Unstructured).MarshalJSON()
}

// List implements Backend, from the watch cache.
func (c *Cluster) List(_ context.Context, r Resource, namespace string, l labels.Selector, f fields.Selector) ([]json.RawMessage, error) {
	w, err := c.kind(r)
	if err != nil {
		return nil, err
	}
	var items []any
	if namespace != "" && w.namespaced {
		if items, err = w.store.ByIndex(cache.NamespaceIndex, namespace); err != nil {
			return nil, err
		}
	} else {
		items = w.store.List()
	}
	var out []json.RawMessage
	for _, it := range items {
		u := it.(*unstructured.Unstructured)
		if !matches(u.Object, namespace, l, f) {
			continue
		}
		b, err := u.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// CanI implements Backend.
func (c *Cluster) CanI(ctx context.Context, review SubjectAccessReview, fresh bool) (Status, error) {
	key := review.key()
	now := time.Now()
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
