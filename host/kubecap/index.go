package kubecap

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// An index maps keys to the distinct values that the objects of one
// watched kind give them, kept up to date by the kind's watch cache and
// answered in time bounded by the answer's size, whatever the number of
// objects (the index capability, IndexBinding). The caller registers it
// with a function of a whole object, run on every watch event before the
// object is pruned to its declared fields: what the function reads costs
// nothing in the cache.

// IndexEntry is one key and value an object gives an index. A non-zero
// Until is when the entry stops counting; zero counts while the object
// exists.
type IndexEntry struct {
	Key, Value string
	Until      time.Time
}

// IndexFunc returns the entries of obj (a whole object, decoded JSON, as
// the API server sent it) at time now. It must not keep or change obj.
type IndexFunc func(obj map[string]any, now time.Time) []IndexEntry

// IndexSpec registers an index over a watched kind.
type IndexSpec struct {
	// Name is what a query names; it should say what Func computes and
	// from which parameters, so that a caller with other parameters finds
	// no index rather than a wrong one.
	Name     string
	Resource Resource
	Func     IndexFunc
	// Linger is how long the entries of a deleted object still count
	// (each until the earlier of its own Until and the deletion plus
	// Linger). Zero: they go with the object.
	Linger time.Duration
}

// The index capability: binding, namespace and operation.
const (
	IndexBinding   = "io.yunikorn-userinfo.host"
	IndexNamespace = "index"
	OpIndexValues  = "values"
)

// MaxIndexLimit bounds the values one query returns.
const MaxIndexLimit = 16

// IndexQuery is the payload of OpIndexValues: the distinct values of Key
// in index Index other than Except, at most Limit (1 to MaxIndexLimit).
// Exclude, if set, names a live object whose own entries do not count.
type IndexQuery struct {
	Index   string     `json:"index"`
	Key     string     `json:"key"`
	Except  string     `json:"except"`
	Limit   int        `json:"limit"`
	Exclude *ObjectRef `json:"exclude,omitempty"`
}

// ObjectRef names an object; Namespace is "" for a cluster-scoped one.
type ObjectRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// IndexAnswer answers an IndexQuery: the values found, sorted, and
// whether more were left out.
type IndexAnswer struct {
	Values []string `json:"values"`
	More   bool     `json:"more"`
}

// Indexer is a Backend that answers the index capability.
type Indexer interface {
	IndexValues(ctx context.Context, q IndexQuery) (IndexAnswer, error)
}

// ErrNoIndex is returned for a query naming an index that is not
// registered: the caller reads the objects some other way.
var ErrNoIndex = errors.New("no such index")

func (q IndexQuery) check() error {
	switch {
	case q.Index == "":
		return errors.New("index: missing")
	case q.Limit < 1 || q.Limit > MaxIndexLimit:
		return fmt.Errorf("limit: %d is not between 1 and %d", q.Limit, MaxIndexLimit)
	}
	return nil
}

// decodeIndexQuery reads an OpIndexValues payload.
func decodeIndexQuery(payload []byte) (IndexQuery, error) {
	var q IndexQuery
	if err := decode(OpIndexValues, payload, &q); err != nil {
		return q, err
	}
	if err := q.check(); err != nil {
		return q, fmt.Errorf("%s: invalid request: %w", OpIndexValues, err)
	}
	return q, nil
}

// heldEntry is an entry as an index holds it: idx is the index's
// position among the store's; counted is false once it has expired.
type heldEntry struct {
	idx        int
	key, value string
	until      time.Time
	counted    bool
}

// holder holds the entries of one object, live or deleted and lingering.
// An update gives the object a new holder and drops the old one.
type holder struct {
	entries []heldEntry
	dropped bool
}

// indexKey is a key of one index.
type indexKey struct {
	idx int
	key string
}

// expiry is a timed entry of a holder, in the index's heap.
type expiry struct {
	until time.Time
	h     *holder
	i     int
}

type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// objectIndexes are the indexes of one store: how many holders give each
// key each value, and when their timed entries expire. The store's lock
// guards it.
type objectIndexes struct {
	specs   []IndexSpec
	byName  map[string]int
	counts  map[indexKey]map[string]int
	expires expiryHeap
}

func newObjectIndexes(specs []IndexSpec) *objectIndexes {
	if len(specs) == 0 {
		return nil
	}
	x := &objectIndexes{specs: specs, byName: map[string]int{}, counts: map[indexKey]map[string]int{}}
	for i, s := range specs {
		x.byName[s.Name] = i
	}
	return x
}

// entriesOf runs every index's function on obj.
func entriesOf(specs []IndexSpec, obj map[string]any, now time.Time) []heldEntry {
	var out []heldEntry
	for i, s := range specs {
		for _, e := range s.Func(obj, now) {
			out = append(out, heldEntry{idx: i, key: e.Key, value: e.Value, until: e.Until})
		}
	}
	return out
}

// add counts the entries of a new holder that have not expired at now.
func (x *objectIndexes) add(entries []heldEntry, now time.Time) *holder {
	if len(entries) == 0 {
		return nil
	}
	h := &holder{entries: slices.Clone(entries)}
	for i := range h.entries {
		e := &h.entries[i]
		if !e.until.IsZero() && !e.until.After(now) {
			continue
		}
		x.count(e, 1)
		if !e.until.IsZero() {
			heap.Push(&x.expires, expiry{until: e.until, h: h, i: i})
		}
	}
	return h
}

func (x *objectIndexes) count(e *heldEntry, n int) {
	k := indexKey{e.idx, e.key}
	m := x.counts[k]
	if m == nil {
		m = map[string]int{}
		x.counts[k] = m
	}
	m[e.value] += n
	if m[e.value] <= 0 {
		delete(m, e.value)
		if len(m) == 0 {
			delete(x.counts, k)
		}
	}
	e.counted = n > 0
}

// drop uncounts a holder at once (its object changed).
func (x *objectIndexes) drop(h *holder) {
	if h == nil || h.dropped {
		return
	}
	h.dropped = true
	for i := range h.entries {
		if e := &h.entries[i]; e.counted {
			x.count(e, -1)
		}
	}
}

// linger uncounts a deleted object's holder: each entry still counts
// until the earlier of its own end and now plus its index's Linger.
func (x *objectIndexes) linger(h *holder, now time.Time) {
	if h == nil || h.dropped {
		return
	}
	for i := range h.entries {
		e := &h.entries[i]
		if !e.counted {
			continue
		}
		end := now.Add(x.specs[e.idx].Linger)
		if !end.After(now) {
			x.count(e, -1)
			continue
		}
		if e.until.IsZero() || end.Before(e.until) {
			e.until = end
			heap.Push(&x.expires, expiry{until: end, h: h, i: i})
		}
	}
}

// expire uncounts the entries whose end has come.
func (x *objectIndexes) expire(now time.Time) {
	for len(x.expires) > 0 && !x.expires[0].until.After(now) {
		it := heap.Pop(&x.expires).(expiry)
		if it.h.dropped {
			continue
		}
		if e := &it.h.entries[it.i]; e.counted && e.until.Equal(it.until) {
			x.count(e, -1)
		}
	}
}

// values answers q; self is the holder of the object q excludes, if any.
func (x *objectIndexes) values(q IndexQuery, self *holder, now time.Time) (IndexAnswer, error) {
	idx, ok := x.byName[q.Index]
	if !ok {
		return IndexAnswer{}, fmt.Errorf("index %q: %w", q.Index, ErrNoIndex)
	}
	x.expire(now)
	ans := IndexAnswer{Values: []string{}}
	for v, n := range x.counts[indexKey{idx, q.Key}] {
		if v == q.Except {
			continue
		}
		if self != nil && !self.dropped {
			for _, e := range self.entries {
				if e.counted && e.idx == idx && e.key == q.Key && e.value == v {
					n--
				}
			}
		}
		if n <= 0 {
			continue
		}
		if len(ans.Values) == q.Limit {
			ans.More = true
			break
		}
		ans.Values = append(ans.Values, v)
	}
	slices.Sort(ans.Values)
	return ans, nil
}

// size is the number of keys held (for tests and metrics).
func (x *objectIndexes) size() int { return len(x.counts) }

// answerIndex answers OpIndexValues with the backend b.
func answerIndex(ctx context.Context, b Backend, payload []byte) ([]byte, error) {
	q, err := decodeIndexQuery(payload)
	if err != nil {
		return nil, err
	}
	ix, ok := b.(Indexer)
	if !ok {
		return nil, fmt.Errorf("index %q: %w (this host answers from no watch cache)", q.Index, ErrNoIndex)
	}
	ans, err := ix.IndexValues(ctx, q)
	if err != nil {
		return nil, err
	}
	return json.Marshal(ans)
}
