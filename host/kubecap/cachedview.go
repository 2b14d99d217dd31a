package kubecap

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// CachedView answers as Cluster's watch caches would over the objects of
// b: a get that is not fresh and every list see only what specs keep of
// each object (every field but metadata.managedFields of a kind not
// declared), and field selectors see those fields alone. Running a
// module's cases through it shows whether its cache declaration keeps
// every field the module reads.
func CachedView(b Backend, specs []CacheSpec) Backend {
	v := &cachedView{Backend: b, keepers: map[Resource]*keeper{}, specs: map[Resource]CacheSpec{}}
	for _, s := range specs {
		v.keepers[s.resource()] = keeperOf(s.resource(), s)
		v.specs[s.resource()] = s
	}
	return v
}

type cachedView struct {
	Backend
	keepers map[Resource]*keeper
	specs   map[Resource]CacheSpec
}

func (v *cachedView) prune(r Resource, raw json.RawMessage) (*cachedObject, error) {
	k := v.keepers[r]
	if k == nil {
		k = newKeeper(r, nil)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("cache %s: %w", r, err)
	}
	return k.compact(obj)
}

func (v *cachedView) Get(ctx context.Context, r Resource, namespace, name string, fresh bool) (json.RawMessage, error) {
	raw, err := v.Backend.Get(ctx, r, namespace, name, fresh)
	if err != nil || fresh {
		return raw, err
	}
	o, err := v.prune(r, raw)
	if err != nil {
		return nil, err
	}
	return o.raw, nil
}

func (v *cachedView) List(ctx context.Context, r Resource, namespace string, l labels.Selector, f fields.Selector) ([]json.RawMessage, error) {
	if err := v.specs[r].checkSelector(l); err != nil {
		return nil, err
	}
	items, err := v.Backend.List(ctx, r, namespace, labels.Everything(), fields.Everything())
	if err != nil {
		return nil, err
	}
	kept, err := matching(items, func(raw json.RawMessage) (*cachedObject, error) { return v.prune(r, raw) }, namespace, l, f)
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for _, raw := range kept {
		out = append(out, raw)
	}
	return out, nil
}

// IndexValues passes the index capability through to the backend viewed.
func (v *cachedView) IndexValues(ctx context.Context, q IndexQuery) (IndexAnswer, error) {
	ix, ok := v.Backend.(Indexer)
	if !ok {
		return IndexAnswer{}, fmt.Errorf("index %q: %w", q.Index, ErrNoIndex)
	}
	return ix.IndexValues(ctx, q)
}
