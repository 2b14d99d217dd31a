package kubecap

import (
	"fmt"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
)

// watchCache is what one informer keeps: client-go's indexer of the
// pruned objects (cachedObject, the kept JSON and the key), indexed by
// namespace and by each indexed label's key=value, and, for the watch
// over all namespaces of a kind with index functions (IndexSpec), the
// counts of their entries, kept by the informer's event handler.
type watchCache struct {
	labels  *labelIndex
	indexer cache.Indexer // set once the informer is built
	// indexes is nil without index functions.
	indexes *entryCounts
}

// The indexer's indexes.
const (
	namespaceIndex = "namespace"
	labelPairIndex = "label"
)

func newWatchCache(li *labelIndex, specs []IndexSpec, now func() time.Time) *watchCache {
	c := &watchCache{labels: li}
	if x := newObjectIndexes(specs); x != nil {
		c.indexes = &entryCounts{x: x, now: now, live: map[string]*holder{}}
	}
	return c
}

// indexers are the informer's Indexers.
func (c *watchCache) indexers() cache.Indexers {
	ix := cache.Indexers{namespaceIndex: func(obj any) ([]string, error) {
		o, err := cachedOf(obj)
		if err != nil {
			return nil, err
		}
		return []string{o.namespace}, nil
	}}
	if c.labels != nil {
		ix[labelPairIndex] = func(obj any) ([]string, error) {
			o, err := cachedOf(obj)
			if err != nil {
				return nil, err
			}
			var pairs []string
			gjson.GetBytes(o.raw, "metadata.labels").ForEach(func(k, v gjson.Result) bool {
				if v.Type == gjson.String && c.labels.covers(k.Str) {
					pairs = append(pairs, k.Str+"="+v.Str)
				}
				return true
			})
			return pairs, nil
		}
	}
	return ix
}

// handler is the informer's event handler: it keeps the entry counts.
func (c *watchCache) handler() cache.ResourceEventHandler {
	if c.indexes == nil {
		return cache.ResourceEventHandlerFuncs{}
	}
	return c.indexes
}

// cachedOf is the cachedObject obj stands for (a tombstone's, too).
func cachedOf(obj any) (*cachedObject, error) {
	switch o := obj.(type) {
	case *cachedObject:
		return o, nil
	case cache.DeletedFinalStateUnknown:
		if c, ok := o.Obj.(*cachedObject); ok {
			return c, nil
		}
		ns, name, err := cache.SplitMetaNamespaceKey(o.Key)
		if err != nil {
			return nil, err
		}
		return &cachedObject{namespace: ns, name: name}, nil
	}
	return nil, fmt.Errorf("watch cache: %T is not a cached object", obj)
}

// objectKey is the indexer's key of namespace/name.
func objectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// get is the kept JSON of namespace/name (never written to).
func (c *watchCache) get(namespace, name string) ([]byte, bool, error) {
	obj, ok, err := c.indexer.GetByKey(objectKey(namespace, name))
	if err != nil || !ok {
		return nil, false, err
	}
	o, err := cachedOf(obj)
	if err != nil {
		return nil, false, err
	}
	return o.raw, true, nil
}

// list is the kept JSON of the objects in namespace ("": all) that match
// both selectors, read from the objects of a required value of an
// indexed label, else of the namespace, else all.
func (c *watchCache) list(namespace string, l labels.Selector, f fields.Selector) ([][]byte, error) {
	return matching(c.candidates(namespace, l), cachedOf, namespace, l, f)
}

// candidates are the objects every match is among: those of the smallest
// set of values an indexed label is required to have (=, ==, in), else
// the namespace's, else all. A label's bucket is read before the
// namespace's, which may hold every object.
func (c *watchCache) candidates(namespace string, l labels.Selector) []any {
	var best []any
	found := false
	if c.labels != nil {
		reqs, _ := l.Requirements()
		for _, r := range reqs {
			switch r.Operator() {
			case selection.Equals, selection.DoubleEquals, selection.In:
			default:
				continue
			}
			if !c.labels.covers(r.Key()) {
				continue
			}
			var set []any
			for v := range r.Values() {
				items, _ := c.indexer.ByIndex(labelPairIndex, r.Key()+"="+v)
				set = append(set, items...)
			}
			if !found || len(set) < len(best) {
				best, found = set, true
			}
		}
	}
	if found {
		return best
	}
	if namespace != "" {
		items, _ := c.indexer.ByIndex(namespaceIndex, namespace)
		return items
	}
	return c.indexer.List()
}

// size is the number of objects.
func (c *watchCache) size() int { return len(c.indexer.ListKeys()) }

// indexValues answers an index query from the entry counts.
func (c *watchCache) indexValues(q IndexQuery) (IndexAnswer, error) {
	if c.indexes == nil {
		return IndexAnswer{}, fmt.Errorf("index %q: %w", q.Index, ErrNoIndex)
	}
	return c.indexes.values(q)
}

// entryCounts are the index entries of one watch's objects: the counts,
// and the holder of each live object's entries (an update gives it a new
// one; a deletion lets its entries linger). The informer calls its
// handler right after each change to its indexer.
type entryCounts struct {
	mu   sync.Mutex
	x    *objectIndexes
	now  func() time.Time
	live map[string]*holder // by the indexer's key; objects with entries only
}

func (e *entryCounts) OnAdd(obj any, _ bool) { e.put(obj) }

func (e *entryCounts) OnUpdate(_, obj any) { e.put(obj) }

func (e *entryCounts) put(obj any) {
	o, err := cachedOf(obj)
	if err != nil {
		return
	}
	key := objectKey(o.namespace, o.name)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.x.expire(now)
	h := e.live[key]
	if sameEntries(h, o.entries) {
		return
	}
	e.x.drop(h)
	e.keep(key, e.x.add(o.entries, now))
}

func (e *entryCounts) keep(key string, h *holder) {
	if h == nil {
		delete(e.live, key)
		return
	}
	e.live[key] = h
}

// OnDelete lets the entries of the object's final state linger (the
// deleted object as the watch last sent it, or the tombstone's).
func (e *entryCounts) OnDelete(obj any) {
	final, err := cachedOf(obj)
	if err != nil {
		return
	}
	key := objectKey(final.namespace, final.name)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.x.expire(now)
	h := e.live[key]
	if final.indexed && !sameEntries(h, final.entries) {
		e.x.drop(h)
		h = e.x.add(final.entries, now)
	}
	e.x.linger(h, now)
	delete(e.live, key)
}

func (e *entryCounts) values(q IndexQuery) (IndexAnswer, error) {
	e.mu.Lock() // expiring changes the counts
	defer e.mu.Unlock()
	var self *holder
	if q.Exclude != nil {
		self = e.live[objectKey(q.Exclude.Namespace, q.Exclude.Name)]
	}
	return e.x.values(q, self, e.now())
}

// sameEntries reports whether a holder holds exactly entries.
func sameEntries(h *holder, entries []heldEntry) bool {
	if h == nil {
		return len(entries) == 0
	}
	if len(h.entries) != len(entries) {
		return false
	}
	for i, e := range entries {
		if g := h.entries[i]; g.idx != e.idx || g.key != e.key || g.value != e.value || !g.until.Equal(e.until) {
			return false
		}
	}
	return true
}
