package kubecap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/metadata"
)

// Resource is a kind of object a policy may read: a contextAwareResources
// entry of its metadata.
type Resource struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func (r Resource) String() string { return r.APIVersion + "/" + r.Kind }

// Backend reads objects and answers access reviews.
type Backend interface {
	// Namespaced reports whether objects of the kind live in namespaces.
	Namespaced(ctx context.Context, r Resource) (bool, error)
	// Get returns one object, or an error wrapping ErrNotFound. namespace
	// is "" for a cluster-scoped kind; fresh asks for the API server's
	// current copy rather than a cached one.
	Get(ctx context.Context, r Resource, namespace, name string, fresh bool) (json.RawMessage, error)
	// List returns the objects of the kind in namespace ("": in all)
	// that match both selectors.
	List(ctx context.Context, r Resource, namespace string, l labels.Selector, f fields.Selector) ([]json.RawMessage, error)
	// CanI answers a SubjectAccessReview; fresh bypasses any cache.
	CanI(ctx context.Context, review SubjectAccessReview, fresh bool) (Status, error)
}

// Options configure HostCalls.
type Options struct {
	// Backend answers the capabilities. Required.
	Backend Backend
	// Resources are the kinds get and list may read (the module's
	// contextAwareResources); others are refused.
	Resources []Resource
	// Next answers every other capability. Default:
	// engine.KubewardenHostCalls(Logger).
	Next engine.HostCallHandler
	// Logger receives a debug line per call and the refusals. Default:
	// discard.
	Logger *slog.Logger
	// Timeout bounds one call, within the invocation's own deadline.
	// Default: 2s.
	Timeout time.Duration
	// Observe, if set, is told of every call: its operation, outcome
	// ("ok", "error" or "refused") and duration.
	Observe func(operation, outcome string, d time.Duration)
}

// HostCalls returns the engine.HostCallHandler that answers
// kubewarden/kubernetes/* with opts.Backend and hands everything else to
// opts.Next.
func HostCalls(opts Options) (engine.HostCallHandler, error) {
	if opts.Backend == nil {
		return nil, errors.New("kubernetes capabilities: a backend is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Next == nil {
		opts.Next = engine.KubewardenHostCalls(opts.Logger)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	h := &handler{opts: opts}
	return h.call, nil
}

type handler struct{ opts Options }

func (h *handler) call(ctx context.Context, binding, namespace, operation string, payload []byte) ([]byte, error) {
	index := binding == IndexBinding && namespace == IndexNamespace
	if !index && (binding != engine.BindingKubewarden || namespace != Namespace) {
		return h.opts.Next(ctx, binding, namespace, operation, payload)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	var out []byte
	var err error
	if index {
		out, err = h.answerIndex(ctx, operation, payload)
	} else {
		out, err = h.answer(ctx, operation, payload)
	}
	outcome := "ok"
	switch {
	case errors.Is(err, errRefused):
		outcome = "refused"
	case errors.Is(err, ErrNoIndex):
		outcome = "missed" // the policy lists instead, and says so
	case err != nil:
		outcome = "error"
	}
	if h.opts.Observe != nil {
		op := operation
		switch {
		case index && op == OpIndexValues:
			op = "index_values"
		case index || !slices.Contains([]string{OpGetResource, OpListResourcesByNamespace, OpListResourcesAll, OpCanI}, op):
			op = "other"
		}
		h.opts.Observe(op, outcome, time.Since(start))
	}
	level := slog.LevelDebug
	if outcome == "refused" {
		level = slog.LevelWarn
	}
	h.opts.Logger.Log(ctx, level, "host capability", "operation", namespace+"/"+operation, "outcome", outcome,
		"duration_ms", float64(time.Since(start).Microseconds())/1000, "error", errString(err))
	if err != nil {
		return nil, err
	}
	return out, nil
}

// errRefused marks the refusal of a resource the metadata does not grant.
var errRefused = errors.New("refused")

type refused struct{ err error }

func (r refused) Error() string        { return r.err.Error() }
func (r refused) Is(target error) bool { return target == errRefused }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// granted refuses a kind the metadata does not declare, as policy-server
// does.
func (h *handler) granted(apiVersion, kind string) error {
	if slices.Contains(h.opts.Resources, Resource{APIVersion: apiVersion, Kind: kind}) {
		return nil
	}
	return refused{errNotGranted(apiVersion, kind)}
}

func (h *handler) answer(ctx context.Context, operation string, payload []byte) ([]byte, error) {
	b := h.opts.Backend
	switch operation {
	case OpGetResource:
		var req GetRequest
		if err := decode(operation, payload, &req); err != nil {
			return nil, err
		}
		if err := h.granted(req.APIVersion, req.Kind); err != nil {
			return nil, err
		}
		r := Resource{req.APIVersion, req.Kind}
		namespaced, err := b.Namespaced(ctx, r)
		if err != nil {
			return nil, err
		}
		ns := ""
		if namespaced {
			if req.Namespace == nil {
				return nil, fmt.Errorf("Resource %s/%s is namespaced, but no namespace was provided", req.APIVersion, req.Kind)
			}
			ns = *req.Namespace
		}
		obj, err := b.Get(ctx, r, ns, req.Name, req.DisableCache)
		if errors.Is(err, ErrNotFound) {
			return nil, notFound(req.APIVersion, req.Kind, req.Name, req.Namespace)
		}
		if err != nil {
			return nil, err
		}
		return mask(obj, req.FieldMasks)
	case OpListResourcesByNamespace:
		var req ListByNamespaceRequest
		if err := decode(operation, payload, &req); err != nil {
			return nil, err
		}
		if req.Namespace == "" {
			return nil, fmt.Errorf("%s: namespace is required", operation)
		}
		return h.list(ctx, req.APIVersion, req.Kind, req.Namespace, req.LabelSelector, req.FieldSelector, req.FieldMasks)
	case OpListResourcesAll:
		var req ListAllRequest
		if err := decode(operation, payload, &req); err != nil {
			return nil, err
		}
		return h.list(ctx, req.APIVersion, req.Kind, "", req.LabelSelector, req.FieldSelector, req.FieldMasks)
	case OpCanI:
		req, err := decodeCanI(payload)
		if err != nil {
			return nil, err
		}
		st, err := b.CanI(ctx, req.SubjectAccessReview, req.DisableCache)
		if err != nil {
			return nil, err
		}
		return json.Marshal(st)
	}
	return nil, fmt.Errorf("unknown operation: %s", operation)
}

// answerIndex answers the index capability (IndexBinding): the backend
// answers for the indexes the host registered.
func (h *handler) answerIndex(ctx context.Context, operation string, payload []byte) ([]byte, error) {
	if operation != OpIndexValues {
		return nil, fmt.Errorf("unknown operation: %s", operation)
	}
	return answerIndex(ctx, h.opts.Backend, payload)
}

func (h *handler) list(ctx context.Context, apiVersion, kind, namespace string, labelSel, fieldSel *string, masks []string) ([]byte, error) {
	if err := h.granted(apiVersion, kind); err != nil {
		return nil, err
	}
	ls, fs := labels.Everything(), fields.Everything()
	var err error
	if labelSel != nil && *labelSel != "" {
		if ls, err = labels.Parse(*labelSel); err != nil {
			return nil, fmt.Errorf("label_selector: %w", err)
		}
	}
	if fieldSel != nil && *fieldSel != "" {
		if fs, err = fields.ParseSelector(*fieldSel); err != nil {
			return nil, fmt.Errorf("field_selector: %w", err)
		}
	}
	items, err := h.opts.Backend.List(ctx, Resource{apiVersion, kind}, namespace, ls, fs)
	if err != nil {
		return nil, err
	}
	for i := range items {
		if items[i], err = mask(items[i], masks); err != nil {
			return nil, err
		}
	}
	return listOf(apiVersion, kind, items)
}

// ResourcesOf converts a module's contextAwareResources, as its metadata
// declares them, to the Resources the handler grants.
func ResourcesOf(declared []metadata.ContextAwareResource) []Resource {
	out := make([]Resource, 0, len(declared))
	for _, r := range declared {
		out = append(out, Resource{APIVersion: r.APIVersion, Kind: r.Kind})
	}
	return out
}
