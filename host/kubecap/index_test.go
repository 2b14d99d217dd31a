package kubecap

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// ownerIndex is a test index: key "app" label, value "user" label, until
// the "until" annotation (RFC 3339) when it has one.
func ownerIndex(linger time.Duration) IndexSpec {
	return IndexSpec{Name: "owners", Resource: Resource{"v1", "Pod"}, Linger: linger,
		Func: func(obj map[string]any, _ time.Time) []IndexEntry {
			u := unstructured.Unstructured{Object: obj}
			l := u.GetLabels()
			if l["app"] == "" {
				return nil
			}
			e := IndexEntry{Key: l["app"], Value: l["user"]}
			if s := u.GetAnnotations()["until"]; s != "" {
				e.Until, _ = time.Parse(time.RFC3339, s)
			}
			return []IndexEntry{e}
		}}
}

func indexPod(ns, name, app, user, until string) map[string]any {
	meta := map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": app, "user": user}}
	if until != "" {
		meta["annotations"] = map[string]any{"until": until}
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": map[string]any{"big": "dropped"}}
}

// testStore is an indexed watch cache of Pods, pruned to metadata.name
// and namespace (what the index reads is dropped), on a fake clock;
// changes reach it as client-go's informer applies them (processDeltas:
// the indexer first, then the handler).
func testStore(t *testing.T, linger time.Duration) (*watchCache, *keeper, *clocktesting.FakePassiveClock) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	specs := []IndexSpec{ownerIndex(linger)}
	k := newKeeper(Resource{"v1", "Pod"}, []string{"metadata.name", "metadata.namespace"})
	k.indexes, k.now = specs, clk.Now
	s := newWatchCache(nil, specs, clk.Now)
	s.indexer = cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, s.indexers())
	return s, k, clk
}

// update is an Added, Updated or Replaced delta.
func update(t *testing.T, s *watchCache, o *cachedObject) {
	t.Helper()
	old, exists, err := s.indexer.Get(o)
	require.NoError(t, err)
	if exists {
		require.NoError(t, s.indexer.Update(o))
		s.handler().OnUpdate(old, o)
		return
	}
	require.NoError(t, s.indexer.Add(o))
	s.handler().OnAdd(o, false)
}

// remove is a Deleted delta (obj: the final state, or a tombstone).
func remove(t *testing.T, s *watchCache, obj any) {
	t.Helper()
	require.NoError(t, s.indexer.Delete(obj))
	s.handler().OnDelete(obj)
}

func putPod(t *testing.T, s *watchCache, k *keeper, obj map[string]any) {
	t.Helper()
	o, err := k.compact(obj)
	require.NoError(t, err)
	update(t, s, o)
}

func values(t *testing.T, s *watchCache, key, except string, limit int, exclude *ObjectRef) IndexAnswer {
	t.Helper()
	ans, err := s.indexValues(IndexQuery{Index: "owners", Key: key, Except: except, Limit: limit, Exclude: exclude})
	require.NoError(t, err)
	return ans
}

// The index answers from entries computed on the whole object, though the
// store keeps only the name: other values than the one excepted, at most
// the limit, and follows updates.
func TestIndex_valuesFollowUpdates(t *testing.T) {
	s, k, _ := testStore(t, 0)
	putPod(t, s, k, indexPod("a", "p1", "etl", "alice", ""))
	putPod(t, s, k, indexPod("b", "p2", "etl", "alice", ""))
	putPod(t, s, k, indexPod("b", "p3", "etl", "bob", ""))
	putPod(t, s, k, indexPod("c", "p4", "etl", "carol", ""))
	raw, _, err := s.get("a", "p1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","namespace":"a"}}`, string(raw), "the cache keeps the declared fields only")

	assert.Equal(t, IndexAnswer{Values: []string{"bob", "carol"}}, values(t, s, "etl", "alice", 4, nil))
	assert.Equal(t, IndexAnswer{Values: []string{"alice", "bob", "carol"}}, values(t, s, "etl", "", 4, nil))
	got := values(t, s, "etl", "", 2, nil)
	assert.Len(t, got.Values, 2)
	assert.True(t, got.More, "the limit bounds the answer")
	assert.Equal(t, IndexAnswer{Values: []string{}}, values(t, s, "other", "", 4, nil))

	putPod(t, s, k, indexPod("b", "p3", "report", "bob", "")) // relabelled
	assert.Equal(t, IndexAnswer{Values: []string{"carol"}}, values(t, s, "etl", "alice", 4, nil))
	assert.Equal(t, IndexAnswer{Values: []string{"bob"}}, values(t, s, "report", "", 4, nil))
	putPod(t, s, k, indexPod("c", "p4", "", "carol", "")) // no entry any more
	assert.Equal(t, IndexAnswer{Values: []string{}}, values(t, s, "etl", "alice", 4, nil))
	assert.Equal(t, 2, s.indexes.x.size())

	_, err = s.indexValues(IndexQuery{Index: "nope", Key: "etl", Limit: 1})
	assert.ErrorIs(t, err, ErrNoIndex)
}

// An object's own entries do not count when the query excludes it; a
// namesake's or another holder's of the same value still do.
func TestIndex_exclude(t *testing.T) {
	s, k, _ := testStore(t, 0)
	putPod(t, s, k, indexPod("a", "self", "etl", "bob", ""))
	self := &ObjectRef{Namespace: "a", Name: "self"}
	assert.Equal(t, IndexAnswer{Values: []string{}}, values(t, s, "etl", "alice", 1, self))
	assert.Equal(t, IndexAnswer{Values: []string{"bob"}}, values(t, s, "etl", "alice", 1, &ObjectRef{Namespace: "b", Name: "self"}))
	putPod(t, s, k, indexPod("b", "other", "etl", "bob", ""))
	assert.Equal(t, IndexAnswer{Values: []string{"bob"}}, values(t, s, "etl", "alice", 1, self))
}

// Timed entries stop counting at their end; the entries of a deleted
// object linger until the earlier of their end and the deletion plus the
// linger; a namesake created meanwhile does not cut them short.
func TestIndex_expiryAndLinger(t *testing.T) {
	s, k, clk := testStore(t, 30*time.Second)
	t0 := clk.Now()
	putPod(t, s, k, indexPod("a", "done", "etl", "alice", t0.Add(10*time.Second).Format(time.RFC3339)))
	putPod(t, s, k, indexPod("a", "running", "report", "bob", ""))
	putPod(t, s, k, indexPod("a", "past", "old", "carol", t0.Add(-time.Second).Format(time.RFC3339)))
	assert.Equal(t, []string{"alice"}, values(t, s, "etl", "", 4, nil).Values)
	assert.Empty(t, values(t, s, "old", "", 4, nil).Values, "an entry already ended never counts")

	remove(t, s, &cachedObject{namespace: "a", name: "running"})
	remove(t, s, cache.DeletedFinalStateUnknown{Key: "a/done"})
	_, found, _ := s.get("a", "running")
	assert.False(t, found)
	putPod(t, s, k, indexPod("a", "running", "other", "dave", "")) // a namesake

	clk.SetTime(t0.Add(9 * time.Second))
	assert.Equal(t, []string{"alice"}, values(t, s, "etl", "", 4, nil).Values)
	assert.Equal(t, []string{"bob"}, values(t, s, "report", "", 4, nil).Values, "a deleted object's entries linger")
	clk.SetTime(t0.Add(10 * time.Second))
	assert.Empty(t, values(t, s, "etl", "", 4, nil).Values, "its own end comes before the linger's")
	clk.SetTime(t0.Add(29 * time.Second))
	assert.Equal(t, []string{"bob"}, values(t, s, "report", "", 4, nil).Values)
	clk.SetTime(t0.Add(30 * time.Second))
	assert.Empty(t, values(t, s, "report", "", 4, nil).Values, "gone once the linger is over")
	assert.Equal(t, []string{"dave"}, values(t, s, "other", "", 4, nil).Values)
	assert.Empty(t, s.indexes.x.expires, "nothing left to expire")
}

// The final state of a deleted object is what lingers: a watch's Deleted
// event carries it.
func TestIndex_lingersFinalState(t *testing.T) {
	s, k, _ := testStore(t, time.Minute)
	putPod(t, s, k, indexPod("a", "p", "etl", "alice", ""))
	final, err := k.compact(indexPod("a", "p", "report", "alice", ""))
	require.NoError(t, err)
	remove(t, s, final)
	assert.Empty(t, values(t, s, "etl", "", 4, nil).Values)
	assert.Equal(t, []string{"alice"}, values(t, s, "report", "", 4, nil).Values)
}

// Without a linger, a deleted object's entries go at once. A relist
// counts each listed object from its listed state (a Replaced delta) and
// lingers those it no longer has (a tombstone with their last state).
func TestIndex_replace(t *testing.T) {
	s, k, clk := testStore(t, time.Minute)
	putPod(t, s, k, indexPod("a", "kept", "etl", "alice", ""))
	putPod(t, s, k, indexPod("a", "gone", "report", "bob", ""))
	kept, err := k.compact(indexPod("a", "kept", "etl", "carol", ""))
	require.NoError(t, err)
	update(t, s, kept)
	gone, found, err := s.indexer.GetByKey("a/gone")
	require.NoError(t, err)
	require.True(t, found)
	remove(t, s, cache.DeletedFinalStateUnknown{Key: "a/gone", Obj: gone})
	assert.Equal(t, []string{"carol"}, values(t, s, "etl", "", 4, nil).Values)
	assert.Equal(t, []string{"bob"}, values(t, s, "report", "", 4, nil).Values, "deleted while the watch was down: lingers")
	clk.SetTime(clk.Now().Add(time.Minute))
	assert.Empty(t, values(t, s, "report", "", 4, nil).Values)

	s0, k0, _ := testStore(t, 0)
	putPod(t, s0, k0, indexPod("a", "p", "etl", "alice", ""))
	remove(t, s0, &cachedObject{namespace: "a", name: "p"})
	assert.Empty(t, values(t, s0, "etl", "", 4, nil).Values)
}

// The capability: a query through HostCalls, its checks, and a host or
// backend without the index.
func TestIndex_capability(t *testing.T) {
	replay, err := LoadReplay("testdata/cluster")
	require.NoError(t, err)
	spec := IndexSpec{Name: "by-namespace", Resource: Resource{"v1", "Pod"}, Func: func(obj map[string]any, _ time.Time) []IndexEntry {
		u := unstructured.Unstructured{Object: obj}
		return []IndexEntry{{Key: u.GetNamespace(), Value: u.GetName()}}
	}}
	call := func(b Backend, payload string) (string, error) {
		h, err := HostCalls(Options{Backend: b, Resources: granted})
		require.NoError(t, err)
		out, err := h(context.Background(), IndexBinding, IndexNamespace, OpIndexValues, []byte(payload))
		return string(out), err
	}
	raw, err := replay.List(t.Context(), Resource{"v1", "Pod"}, "", labels.Everything(), fields.Everything())
	require.NoError(t, err)
	require.NotEmpty(t, raw)
	var first map[string]any
	require.NoError(t, json.Unmarshal(raw[0], &first))
	u := unstructured.Unstructured{Object: first}

	out, err := call(replay.WithIndexes(nil, spec), `{"index":"by-namespace","key":"`+u.GetNamespace()+`","limit":16}`)
	require.NoError(t, err)
	assert.Contains(t, out, `"`+u.GetName()+`"`)
	out, err = call(replay.WithIndexes(nil, spec), `{"index":"by-namespace","key":"`+u.GetNamespace()+`","except":"`+u.GetName()+`","limit":16,"exclude":{"namespace":"x","name":"y"}}`)
	require.NoError(t, err)
	assert.NotContains(t, out, `"`+u.GetName()+`"`)

	_, err = call(replay, `{"index":"by-namespace","key":"a","limit":1}`)
	assert.ErrorIs(t, err, ErrNoIndex)
	_, err = call(replay.WithIndexes(nil, spec), `{"index":"other","key":"a","limit":1}`)
	assert.ErrorIs(t, err, ErrNoIndex)
	_, err = call(replay.WithIndexes(nil, spec), `{"index":"by-namespace","key":"a","limit":17}`)
	assert.ErrorContains(t, err, "values: invalid request: limit: 17 is not between 1 and 16")
	_, err = call(replay.WithIndexes(nil, spec), `{"index":"by-namespace","key":"a","limit":"1"}`)
	assert.ErrorContains(t, err, "values: invalid request")
	h, err := HostCalls(Options{Backend: replay.WithIndexes(nil, spec), Resources: granted})
	require.NoError(t, err)
	_, err = h(context.Background(), IndexBinding, IndexNamespace, "other", nil)
	assert.EqualError(t, err, "unknown operation: other")
}

// Through a Cluster: the watch over all namespaces keeps the index from
// the whole objects, deletions linger, and a query waits for the sync.
func TestCluster_index(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "PodList"},
		&unstructured.Unstructured{Object: indexPod("a", "p1", "etl", "alice", "")},
		&unstructured.Unstructured{Object: indexPod("b", "p2", "etl", "bob", "")})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	pods := Resource{"v1", "Pod"}
	_, err := NewCluster(t.Context(), ClusterOptions{Resources: []Resource{pods}, Dynamic: dyn, Reviews: &countingReviewer{}, Mapper: mapper,
		Indexes: []IndexSpec{ownerIndex(time.Minute), ownerIndex(0)}})
	assert.ErrorContains(t, err, `index 1 ("owners"): registered twice`)
	_, err = NewCluster(t.Context(), ClusterOptions{Resources: nil, Dynamic: dyn, Reviews: &countingReviewer{}, Mapper: mapper,
		Indexes: []IndexSpec{ownerIndex(time.Minute)}})
	assert.ErrorContains(t, err, "v1/Pod is not among the resources")
	c, err := NewCluster(t.Context(), ClusterOptions{Resources: []Resource{pods}, Dynamic: dyn, Reviews: &countingReviewer{}, Mapper: mapper,
		Cache:   []CacheSpec{{APIVersion: "v1", Kind: "Pod", Watch: WatchCluster, Fields: []string{"metadata.name", "metadata.namespace"}}},
		Indexes: []IndexSpec{ownerIndex(time.Minute)}, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	c.StartIndexes()
	assert.Equal(t, 1, c.Watches())
	q := IndexQuery{Index: "owners", Key: "etl", Except: "alice", Limit: 4}
	ans, err := c.IndexValues(t.Context(), q)
	require.NoError(t, err)
	assert.Equal(t, []string{"bob"}, ans.Values)

	require.NoError(t, dyn.Resource(gvr).Namespace("b").Delete(t.Context(), "p2", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := c.Get(t.Context(), pods, "b", "p2", false)
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
	ans, err = c.IndexValues(t.Context(), q)
	require.NoError(t, err)
	assert.Equal(t, []string{"bob"}, ans.Values, "a deleted Pod's entries linger")
	clk.SetTime(clk.Now().Add(time.Minute))
	ans, err = c.IndexValues(t.Context(), q)
	require.NoError(t, err)
	assert.Empty(t, ans.Values)
	_, err = c.IndexValues(t.Context(), IndexQuery{Index: "nope", Key: "etl", Limit: 1})
	assert.ErrorIs(t, err, ErrNoIndex)
}

// Keys keep only the listed keys of a map: a Pod stuffed with labels costs
// the cache the ones kept; a list selecting on a label not kept is
// refused, one on a kept label answered.
func TestCacheSpec_keys(t *testing.T) {
	specs, err := ParseCacheSpecs([]byte(`[{"apiVersion":"v1","kind":"Pod","watch":"cluster",
		"fields":["metadata.name","metadata.namespace","metadata.labels","metadata.annotations"],
		"keys":{"metadata.labels":["app"],"metadata.annotations":["until"]},"labelIndex":["app"]}]`))
	require.NoError(t, err)
	p := indexPod("a", "p", "etl", "alice", "2026-01-01T00:00:00Z")
	stuffed := p["metadata"].(map[string]any)["labels"].(map[string]any)
	for i := range 16000 {
		stuffed[fmt.Sprintf("stuffing-%05d", i)] = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	}
	o, err := newKeeper(specs[0].resource(), specs[0].Fields).withKeys(specs[0].Keys).compact(p)
	require.NoError(t, err)
	assert.JSONEq(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a","labels":{"app":"etl"},"annotations":{"until":"2026-01-01T00:00:00Z"}}}`, string(o.raw))

	replay, err := LoadReplay("testdata/cluster")
	require.NoError(t, err)
	view := CachedView(replay, specs)
	_, err = view.List(t.Context(), Resource{"v1", "Pod"}, "", labels.SelectorFromSet(labels.Set{"user": "alice"}), fields.Everything())
	assert.EqualError(t, err, `label_selector: the host's cache of v1/Pod keeps only the labels app, not "user"`)
	_, err = view.List(t.Context(), Resource{"v1", "Pod"}, "", labels.SelectorFromSet(labels.Set{"app": "etl"}), fields.Everything())
	assert.NoError(t, err)

	for decl, want := range map[string]string{
		`[{"apiVersion":"v1","kind":"Pod","keys":{"metadata.labels":["app"]},"labelIndex":["user"]}]`:                      `labelIndex[0]: "user" is not among the labels kept`,
		`[{"apiVersion":"v1","kind":"Pod","fields":["metadata.name"],"keys":{"metadata.labels":["app"]}}]`:                 `keys: "metadata.labels" is not a kept field`,
		`[{"apiVersion":"v1","kind":"Pod","keys":{"metadata..labels":["app"]}}]`:                                           `keys: "metadata..labels" is not a dotted path`,
		`[{"apiVersion":"v1","kind":"Pod","fields":["metadata"],"keys":{"metadata.labels":["app"]},"labelIndex":["app"]}]`: ``,
	} {
		_, err := ParseCacheSpecs([]byte(decl))
		if want == "" {
			assert.NoError(t, err, decl)
		} else {
			assert.ErrorContains(t, err, want, decl)
		}
	}
}

// MaxValueBytes keeps a bounded key's value longer than its bound as
// TooLongValue: a Pod carrying 255 KiB under a bounded annotation costs the
// cache a few hundred bytes, the same as one with a short value; shorter
// values and other keys are kept as they are.
func TestCacheSpec_maxValueBytes(t *testing.T) {
	specs, err := ParseCacheSpecs([]byte(`[{"apiVersion":"v1","kind":"Pod","watch":"cluster",
		"fields":["metadata.name","metadata.namespace","metadata.labels","metadata.annotations"],
		"keys":{"metadata.annotations":["id","until"]},
		"maxValueBytes":{"metadata.annotations":{"id":64},"metadata.labels":{"app":64}}}]`))
	require.NoError(t, err)
	p := indexPod("a", "p", "etl", "alice", "2026-01-01T00:00:00Z")
	huge := strings.Repeat("x", 255<<10)
	p["metadata"].(map[string]any)["annotations"].(map[string]any)["id"] = huge
	o, err := keeperOf(specs[0].resource(), specs[0]).compact(p)
	require.NoError(t, err)
	assert.JSONEq(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a","labels":{"app":"etl","user":"alice"},
		"annotations":{"id":"`+TooLongValue+`","until":"2026-01-01T00:00:00Z"}}}`, string(o.raw))
	assert.Less(t, len(o.raw), 1<<10, "bytes kept of a Pod with a 255 KiB value")

	exact := indexPod("a", "q", strings.Repeat("y", 64), "alice", "")
	exact["metadata"].(map[string]any)["annotations"] = map[string]any{"id": strings.Repeat("z", 64)}
	o, err = keeperOf(specs[0].resource(), specs[0]).compact(exact)
	require.NoError(t, err)
	assert.Contains(t, string(o.raw), strings.Repeat("y", 64), "a value of the bound is kept")
	assert.Contains(t, string(o.raw), strings.Repeat("z", 64), "a value of the bound is kept")

	for decl, want := range map[string]string{
		`[{"apiVersion":"v1","kind":"Pod","fields":["metadata.name"],"maxValueBytes":{"metadata.labels":{"app":64}}}]`: `maxValueBytes: "metadata.labels" is not a kept field`,
		`[{"apiVersion":"v1","kind":"Pod","maxValueBytes":{"metadata.labels":{"app":8}}}]`:                             `the bound of "app", 8, is less than the 25 bytes of the marker`,
		`[{"apiVersion":"v1","kind":"Pod","maxValueBytes":{"metadata.labels":{"app":1024}}}]`:                          ``,
	} {
		_, err := ParseCacheSpecs([]byte(decl))
		if want == "" {
			assert.NoError(t, err, decl)
		} else {
			assert.ErrorContains(t, err, want, decl)
		}
	}
}
