package kubecap

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
)

// objectStore is the watch cache of one informer: the kept JSON of each
// object packed into large chunks (an arena), found by namespace and name,
// by namespace, and by indexed label pair. It is the informer's store
// (cache.Store, and the queue's KnownObjects) and answers get and list.
//
// What an object costs here is its kept JSON plus about a hundred bytes:
// one slot in a slice, its name, one entry in the key map and one in each
// set it belongs to (its namespace's, each indexed label pair's).
// Namespaces and label pairs are stored once, however many objects share
// them, and forgotten with the last of those. client-go's indexer took
// about three times that per object (the key string, the items map, a
// string set per index value), and one heap allocation per object's JSON,
// rounded up to a size class and scattered among the garbage of the sync.
type objectStore struct {
	labels *labelIndex
	// indexes, if any, are kept from the entries each object brings
	// (IndexSpec); now is their clock.
	indexes *objectIndexes
	now     func() time.Time

	mu      sync.RWMutex
	slots   []slot   // by object id
	free    []uint32 // ids of empty slots
	byKey   map[objectKey]uint32
	spaces  map[string]*namespaceEntry
	byLabel map[string]idSet // "key=value" of an indexed label
	// arena holds the kept JSON; its chunks are given back by close, or
	// once the store is unreachable (nothing else refers to them).
	arena  *arena
	closed bool // the arena is given back; changes are ignored
}

// slot is one object; ns is nil in an empty slot. holder holds its
// index entries (nil: none).
type slot struct {
	ns     *namespaceEntry
	name   string
	raw    arenaRef
	holder *holder
}

type objectKey struct {
	ns   *namespaceEntry
	name string
}

// namespaceEntry is one namespace ("" for cluster-scoped objects) and the
// ids of its objects.
type namespaceEntry struct {
	name string
	objs idSet
}

type idSet map[uint32]struct{}

func newObjectStore(li *labelIndex) *objectStore {
	s := &objectStore{labels: li, byKey: map[objectKey]uint32{}, spaces: map[string]*namespaceEntry{}, byLabel: map[string]idSet{},
		arena: &arena{}}
	runtime.AddCleanup(s, func(a *arena) { a.close() }, s.arena)
	return s
}

// newIndexedStore is a store that keeps the indexes of specs, timed by
// now.
func newIndexedStore(li *labelIndex, specs []IndexSpec, now func() time.Time) *objectStore {
	s := newObjectStore(li)
	s.indexes, s.now = newObjectIndexes(specs), now
	return s
}

// holderOf makes the holder of o's entries: counted in the store's
// indexes, or (a store without them, being built by Replace) not yet.
// s.mu is held.
func (s *objectStore) holderOf(o *cachedObject) *holder {
	if len(o.entries) == 0 {
		return nil
	}
	if s.indexes == nil {
		return &holder{entries: o.entries}
	}
	return s.indexes.add(o.entries, s.now())
}

// sameEntries reports whether a slot's holder holds exactly entries.
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

// storeKey is the informer's key of a cached object: namespace/name, or
// name for a cluster-scoped one (cache.MetaNamespaceKeyFunc's), without
// building its ObjectMeta.
func storeKey(obj any) (string, error) {
	switch o := obj.(type) {
	case *cachedObject:
		if o.namespace == "" {
			return o.name, nil
		}
		return o.namespace + "/" + o.name, nil
	case cache.DeletedFinalStateUnknown:
		return o.Key, nil
	}
	return cache.MetaNamespaceKeyFunc(obj)
}

// cachedOf is the cachedObject obj stands for (a tombstone's, too).
func cachedOf(obj any) (*cachedObject, error) {
	switch o := obj.(type) {
	case *cachedObject:
		return o, nil
	case cache.DeletedFinalStateUnknown:
		ns, name, err := cache.SplitMetaNamespaceKey(o.Key)
		if err != nil {
			return nil, err
		}
		return &cachedObject{namespace: ns, name: name}, nil
	}
	return nil, fmt.Errorf("watch cache: %T is not a cached object", obj)
}

// lookup is the id of namespace/name. s.mu is held.
func (s *objectStore) lookup(namespace, name string) (uint32, bool) {
	ns := s.spaces[namespace]
	if ns == nil {
		return 0, false
	}
	id, ok := s.byKey[objectKey{ns, name}]
	return id, ok
}

// object is slot id as a cachedObject, with a copy of its JSON. s.mu is
// held.
func (s *objectStore) object(id uint32) *cachedObject {
	sl := &s.slots[id]
	return &cachedObject{namespace: sl.ns.name, name: sl.name, raw: slices.Clone(s.arena.bytes(sl.raw))}
}

// put adds o, or replaces the object of its key.
func (s *objectStore) put(o *cachedObject) {
	if o.stored {
		return // written by the first list already
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.indexes != nil {
		s.indexes.expire(s.now())
	}
	if id, ok := s.lookup(o.namespace, o.name); ok {
		sl := &s.slots[id]
		if !sameEntries(sl.holder, o.entries) {
			if s.indexes != nil {
				s.indexes.drop(sl.holder)
			}
			sl.holder = s.holderOf(o)
		}
		old := s.arena.bytes(sl.raw)
		if string(old) == string(o.raw) {
			return // an update of fields not kept
		}
		s.unindexLabels(id, old)
		s.arena.release(sl.raw)
		sl.raw = s.arena.put(o.raw)
		s.indexLabels(id, o.raw)
		s.compact()
		return
	}
	ns := s.spaces[o.namespace]
	if ns == nil {
		ns = &namespaceEntry{name: o.namespace, objs: idSet{}}
		s.spaces[o.namespace] = ns
	}
	var id uint32
	if n := len(s.free); n > 0 {
		id, s.free = s.free[n-1], s.free[:n-1]
	} else {
		id = uint32(len(s.slots))
		s.slots = append(s.slots, slot{})
	}
	s.slots[id] = slot{ns: ns, name: o.name, raw: s.arena.put(o.raw), holder: s.holderOf(o)}
	s.byKey[objectKey{ns, o.name}] = id
	ns.objs[id] = struct{}{}
	s.indexLabels(id, o.raw)
}

// remove drops the object of namespace/name, if any; its index entries
// linger (IndexSpec.Linger), those of its final state when final (the
// deleted object as the watch last sent it) carries them.
func (s *objectStore) remove(namespace, name string, final *cachedObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	id, ok := s.lookup(namespace, name)
	if !ok {
		return
	}
	sl := &s.slots[id]
	if s.indexes != nil {
		s.indexes.expire(s.now())
		if final != nil && final.indexed && !sameEntries(sl.holder, final.entries) {
			s.indexes.drop(sl.holder)
			sl.holder = s.holderOf(final)
		}
		s.indexes.linger(sl.holder, s.now())
	}
	s.unindexLabels(id, s.arena.bytes(sl.raw))
	s.arena.release(sl.raw)
	delete(s.byKey, objectKey{sl.ns, name})
	delete(sl.ns.objs, id)
	if len(sl.ns.objs) == 0 {
		delete(s.spaces, sl.ns.name)
	}
	*sl = slot{}
	s.free = append(s.free, id)
	s.compact()
}

// labelPairs calls f with each indexed label's key=value of raw.
func (s *objectStore) labelPairs(raw []byte, f func(pair string)) {
	if s.labels == nil {
		return
	}
	gjson.GetBytes(raw, "metadata.labels").ForEach(func(k, v gjson.Result) bool {
		if v.Type == gjson.String && s.labels.covers(k.Str) {
			f(k.Str + "=" + v.Str)
		}
		return true
	})
}

func (s *objectStore) indexLabels(id uint32, raw []byte) {
	s.labelPairs(raw, func(pair string) {
		set := s.byLabel[pair]
		if set == nil {
			set = idSet{}
			s.byLabel[pair] = set
		}
		set[id] = struct{}{}
	})
}

func (s *objectStore) unindexLabels(id uint32, raw []byte) {
	s.labelPairs(raw, func(pair string) {
		if set := s.byLabel[pair]; set != nil {
			delete(set, id)
			if len(set) == 0 {
				delete(s.byLabel, pair)
			}
		}
	})
}

// compact moves the objects of mostly empty chunks together once the
// bytes freed in them outweigh half of those in use. s.mu is held.
func (s *objectStore) compact() {
	if !s.arena.wasteful() {
		return
	}
	s.arena.startCompaction()
	for id := range s.slots {
		if sl := &s.slots[id]; sl.ns != nil {
			sl.raw = s.arena.move(sl.raw)
		}
	}
	s.arena.endCompaction()
}

// close gives the arena back at once; the store is empty, ignores
// changes after (the informer may still be stopping) and fails reads.
// Cluster.Close does not call it: reviews still in flight while serve
// stops read the cache as it was.
func (s *objectStore) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arena.close()
	s.slots, s.free, s.byKey, s.spaces, s.byLabel, s.closed = nil, nil, map[objectKey]uint32{}, map[string]*namespaceEntry{}, map[string]idSet{}, true
}

// errStoreClosed answers reads after Close: an empty cache would answer
// that nothing exists.
var errStoreClosed = errors.New("the watch cache is closed (the process is stopping)")

// get is a copy of the kept JSON of namespace/name.
func (s *objectStore) get(namespace, name string) ([]byte, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, false, errStoreClosed
	}
	id, ok := s.lookup(namespace, name)
	if !ok {
		return nil, false, nil
	}
	return slices.Clone(s.arena.bytes(s.slots[id].raw)), true, nil
}

// list is a copy of the kept JSON of the objects in namespace ("": all) that match
// both selectors, read from the smallest set every match must be in: a
// required value of an indexed label, or the namespace.
func (s *objectStore) list(namespace string, l labels.Selector, f fields.Selector) ([][]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errStoreClosed
	}
	var out [][]byte
	visit := func(id uint32) error {
		sl := &s.slots[id]
		o := cachedObject{namespace: sl.ns.name, name: sl.name, raw: s.arena.bytes(sl.raw)}
		ok, err := matchCached(&o, namespace, l, f)
		if ok {
			out = append(out, slices.Clone(o.raw))
		}
		return err
	}
	sets := s.candidates(namespace, l)
	if sets == nil {
		for id := range s.slots {
			if s.slots[id].ns != nil {
				if err := visit(uint32(id)); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	}
	for _, set := range sets {
		for id := range set {
			if err := visit(id); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// candidates are the sets of ids that hold every match (disjoint: the
// values of one label, or one namespace), nil for all objects. s.mu is
// held.
func (s *objectStore) candidates(namespace string, l labels.Selector) []idSet {
	var best []idSet
	bestSize := -1
	if namespace != "" {
		best, bestSize = []idSet{nil}, 0
		if ns := s.spaces[namespace]; ns != nil {
			best, bestSize = []idSet{ns.objs}, len(ns.objs)
		}
	}
	if s.labels == nil {
		return best
	}
	reqs, _ := l.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		if !s.labels.covers(r.Key()) {
			continue
		}
		var sets []idSet
		size := 0
		for v := range r.Values() {
			if set := s.byLabel[r.Key()+"="+v]; set != nil {
				sets = append(sets, set)
				size += len(set)
			}
		}
		if bestSize < 0 || size < bestSize {
			best, bestSize = sets, size
			if best == nil {
				best = []idSet{}
			}
		}
	}
	return best
}

// size is the number of objects.
func (s *objectStore) size() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byKey)
}

// cache.Store, as the informer uses it (and its queue, to find the objects
// a relist no longer has).

func (s *objectStore) Add(obj any) error    { return s.Update(obj) }
func (s *objectStore) Update(obj any) error { return s.putAny(obj) }

func (s *objectStore) putAny(obj any) error {
	o, ok := obj.(*cachedObject)
	if !ok {
		return fmt.Errorf("watch cache: %T is not a cached object", obj)
	}
	s.put(o)
	return nil
}

func (s *objectStore) Delete(obj any) error {
	o, err := cachedOf(obj)
	if err != nil {
		return err
	}
	s.remove(o.namespace, o.name, o)
	return nil
}

func (s *objectStore) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, len(s.byKey))
	for id := range s.slots {
		if s.slots[id].ns != nil {
			out = append(out, s.object(uint32(id)))
		}
	}
	return out
}

func (s *objectStore) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.byKey))
	for id := range s.slots {
		if sl := &s.slots[id]; sl.ns != nil {
			k, _ := storeKey(&cachedObject{namespace: sl.ns.name, name: sl.name})
			out = append(out, k)
		}
	}
	return out
}

func (s *objectStore) Get(obj any) (any, bool, error) {
	k, err := storeKey(obj)
	if err != nil {
		return nil, false, err
	}
	return s.GetByKey(k)
}

func (s *objectStore) GetByKey(key string) (any, bool, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.lookup(ns, name)
	if !ok {
		return nil, false, nil
	}
	return s.object(id), true, nil
}

func (s *objectStore) Replace(list []any, _ string) error {
	fresh := newObjectStore(s.labels)
	for _, obj := range list {
		if err := fresh.putAny(obj); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		fresh.arena.close()
		return nil
	}
	if x := s.indexes; x != nil {
		// An object the list no longer has was deleted: its entries
		// linger. The others count from their listed state.
		now := s.now()
		for id := range s.slots {
			sl := &s.slots[id]
			if sl.ns == nil {
				continue
			}
			if _, ok := fresh.lookup(sl.ns.name, sl.name); ok {
				x.drop(sl.holder)
			} else {
				x.linger(sl.holder, now)
			}
		}
		for id := range fresh.slots {
			if sl := &fresh.slots[id]; sl.holder != nil {
				sl.holder = x.add(sl.holder.entries, now)
			}
		}
	}
	s.arena.close()
	s.arena.released.Store(false)
	a, f := s.arena, fresh.arena
	a.chunks, a.freeIDs, a.cur, a.curID, a.used, a.waste, a.mapped = f.chunks, f.freeIDs, f.cur, f.curID, f.used, f.waste, f.mapped
	f.chunks, f.freeIDs, f.cur, f.mapped = nil, nil, nil, 0
	s.slots, s.free, s.byKey, s.spaces, s.byLabel = fresh.slots, fresh.free, fresh.byKey, fresh.spaces, fresh.byLabel
	return nil
}

func (s *objectStore) Resync() error { return nil }

var _ cache.Store = (*objectStore)(nil)

// candidateCount is how many objects a list in namespace with selector l
// reads before matching (for tests).
func (s *objectStore) candidateCount(namespace string, l labels.Selector) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sets := s.candidates(namespace, l)
	if sets == nil {
		return len(s.byKey)
	}
	n := 0
	for _, set := range sets {
		n += len(set)
	}
	return n
}

// indexValues answers an index query from the store's indexes.
func (s *objectStore) indexValues(q IndexQuery) (IndexAnswer, error) {
	s.mu.Lock() // expiring changes the counts
	defer s.mu.Unlock()
	if s.closed {
		return IndexAnswer{}, errStoreClosed
	}
	if s.indexes == nil {
		return IndexAnswer{}, fmt.Errorf("index %q: %w", q.Index, ErrNoIndex)
	}
	var self *holder
	if q.Exclude != nil {
		if id, ok := s.lookup(q.Exclude.Namespace, q.Exclude.Name); ok {
			self = s.slots[id].holder
		}
	}
	return s.indexes.values(q, self, s.now())
}
