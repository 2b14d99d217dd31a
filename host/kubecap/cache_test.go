package kubecap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
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
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

var podResource = Resource{"v1", "Pod"}

// podFields are the fields of a Pod the embedded policy reads.
var podFields = []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations",
	"metadata.ownerReferences.apiVersion", "metadata.ownerReferences.kind", "metadata.ownerReferences.name",
	"metadata.ownerReferences.uid", "metadata.ownerReferences.controller", "metadata.creationTimestamp",
	"spec.schedulerName", "spec.serviceAccountName", "status.phase"}

// bigPod is a Pod with everything a real one carries around the fields the
// policy reads, padded to about pad bytes in fields nobody declares.
func bigPod(ns, name string, lbls map[string]any, pad int) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": name, "namespace": ns, "uid": "uid-" + name, "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z",
			"labels":          lbls,
			"annotations":     map[string]any{"yunikorn.apache.org/user.info": `{"user":"alice"}`},
			"ownerReferences": []any{map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true, "blockOwnerDeletion": true}},
			"managedFields":   []any{map[string]any{"manager": "kubectl", "fieldsV1": map[string]any{"f:metadata": strings.Repeat("x", pad/4)}}},
			"finalizers":      []any{"example.com/f"},
		},
		"spec": map[string]any{
			"schedulerName": "yunikorn", "serviceAccountName": "default", "nodeName": "node-1",
			"containers": []any{map[string]any{"name": "main", "image": "busybox",
				"env": []any{map[string]any{"name": "BLOB", "value": strings.Repeat("y", pad/2)}}}},
		},
		"status": map[string]any{"phase": "Pending", "message": strings.Repeat("z", pad/4)},
	}
}

// TestKeeper_keepsDeclaredFields: a cached object holds the declared
// fields and nothing else (managedFields, status, containers, finalizers
// go), so its size follows what is kept, not what the object weighs: a
// 1 MB Pod costs under 1 KiB. An array keeps the path below it in each
// element; a kind declared with no fields keeps all but managedFields.
func TestKeeper_keepsDeclaredFields(t *testing.T) {
	pod := bigPod("ns", "p", map[string]any{"applicationId": "app-1"}, 1<<20)
	full, err := json.Marshal(pod)
	require.NoError(t, err)
	require.Greater(t, len(full), 1<<20)

	o, err := newKeeper(podResource, podFields).compact(pod)
	require.NoError(t, err)
	assert.Equal(t, "ns", o.namespace)
	assert.Equal(t, "p", o.name)
	assert.Less(t, len(o.raw), 1024, "a 1 MB Pod keeps its few declared fields")
	var got map[string]any
	require.NoError(t, json.Unmarshal(o.raw, &got))
	assert.Equal(t, map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": "p", "namespace": "ns", "uid": "uid-p", "creationTimestamp": "2026-01-01T00:00:00Z",
			"labels":          map[string]any{"applicationId": "app-1"},
			"annotations":     map[string]any{"yunikorn.apache.org/user.info": `{"user":"alice"}`},
			"ownerReferences": []any{map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}},
		},
		"spec":   map[string]any{"schedulerName": "yunikorn", "serviceAccountName": "default"},
		"status": map[string]any{"phase": "Pending"},
	}, got)

	// What is kept is what costs: a declared 1 MB annotation stays.
	pod = bigPod("ns", "p", nil, 1<<10)
	pod["metadata"].(map[string]any)["annotations"] = map[string]any{"big": strings.Repeat("a", 1<<20)}
	o, err = newKeeper(podResource, podFields).compact(pod)
	require.NoError(t, err)
	assert.InDelta(t, 1<<20, len(o.raw), 2048)

	// Paths through arrays keep the member in every element.
	o, err = newKeeper(podResource, []string{"spec.containers.name"}).compact(bigPod("ns", "p", nil, 4096))
	require.NoError(t, err)
	assert.JSONEq(t, `{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"main"}]}}`, string(o.raw))

	// Undeclared: whole, but managedFields; items of a list get their kind.
	pod = bigPod("ns", "p", nil, 64)
	delete(pod, "apiVersion")
	delete(pod, "kind")
	o, err = newKeeper(podResource, nil).compact(pod)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(o.raw, &got))
	assert.NotContains(t, got["metadata"], "managedFields")
	assert.Contains(t, got, "status")
	assert.Equal(t, "Pod", got["kind"])
	assert.Equal(t, "v1", got["apiVersion"])

	// The transform may see its own output again (a relist): unchanged.
	again, err := newKeeper(podResource, podFields).transform(o)
	require.NoError(t, err)
	assert.Same(t, o, again)
}

// scaleCluster is a Cluster on the fake dynamic client holding objs, with
// the Pod and ConfigMap kinds declared as specs say.
func scaleCluster(t *testing.T, specs []CacheSpec, objs ...runtime.Object) (*Cluster, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "pods"}:       "PodList",
		{Version: "v1", Resource: "configmaps"}: "ConfigMapList",
	}, objs...)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	c, err := NewCluster(t.Context(), ClusterOptions{Resources: []Resource{podResource, {"v1", "ConfigMap"}}, Cache: specs,
		Dynamic: dyn, Reviews: &countingReviewer{}, Mapper: mapper, SyncTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, dyn
}

var podSpec = CacheSpec{APIVersion: "v1", Kind: "Pod", Watch: WatchCluster, Fields: podFields,
	LabelIndex: []string{"applicationId", "yunikorn.apache.org/app-id"}}

// TestCluster_labelIndexAnswersLikeScan: for random Pods and random
// selectors of every operator (=, ==, !=, in, notin, exists, !key, and
// their conjunctions), in one namespace and in all, the indexed list
// returns exactly the Pods a scan of the full objects matches; with "*"
// every label is indexed, with no index every list scans, and all agree.
func TestCluster_labelIndexAnswersLikeScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"applicationId", "yunikorn.apache.org/app-id", "spark-app-selector", "team"}
	values := []string{"a", "b", "c", "d"}
	namespaces := []string{"ns-0", "ns-1", "ns-2"}
	var objs []runtime.Object
	var full []map[string]any
	for i := range 400 {
		lbls := map[string]any{}
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				lbls[k] = values[rng.IntN(len(values))]
			}
		}
		p := bigPod(namespaces[rng.IntN(len(namespaces))], fmt.Sprintf("p-%d", i), lbls, 256)
		full = append(full, p)
		u := &unstructured.Unstructured{Object: p}
		objs = append(objs, u.DeepCopy())
	}
	var selectors []string
	for range 300 {
		var parts []string
		for range 1 + rng.IntN(3) {
			k, v, w := keys[rng.IntN(len(keys))], values[rng.IntN(len(values))], values[rng.IntN(len(values))]
			parts = append(parts, []string{k + "=" + v, k + "==" + v, k + "!=" + v, k + " in (" + v + "," + w + ")",
				k + " notin (" + v + ")", k, "!" + k}[rng.IntN(7)])
		}
		selectors = append(selectors, strings.Join(parts, ","))
	}
	for _, variant := range []struct {
		name  string
		index []string
	}{{"declared keys", podSpec.LabelIndex}, {"every label", []string{"*"}}, {"no index", nil}} {
		t.Run(variant.name, func(t *testing.T) {
			spec := podSpec
			spec.LabelIndex = variant.index
			c, _ := scaleCluster(t, []CacheSpec{spec}, objs...)
			_, err := c.List(t.Context(), podResource, "", labels.Everything(), fields.Everything())
			require.NoError(t, err)
			s := c.scopes[scopeKey{podResource, ""}]
			read := len(s.store.candidates("", labels.SelectorFromSet(labels.Set{"applicationId": "a"})))
			if variant.index == nil {
				assert.Equal(t, len(full), read, "no index: a scan")
			} else {
				assert.Less(t, read, len(full)/3, "an equality on an indexed key reads its bucket only")
			}
			for _, sel := range selectors {
				l, err := labels.Parse(sel)
				require.NoError(t, err, sel)
				for _, ns := range append([]string{""}, namespaces...) {
					var want []string
					for _, p := range full {
						if matches(p, ns, l, fields.Everything()) {
							want = append(want, p["metadata"].(map[string]any)["name"].(string))
						}
					}
					items, err := c.List(t.Context(), podResource, ns, l, fields.Everything())
					require.NoError(t, err)
					var got []string
					for _, it := range items {
						var m map[string]any
						require.NoError(t, json.Unmarshal(it, &m))
						got = append(got, m["metadata"].(map[string]any)["name"].(string))
					}
					slices.Sort(want)
					slices.Sort(got)
					require.Equal(t, want, got, "selector %q in namespace %q", sel, ns)
				}
			}
		})
	}
}

// TestCluster_oneWatchPerResource: a kind declared cluster-wide is listed
// and watched once, over all namespaces, whatever namespaces its gets and
// lists name; a kind watched per namespace gets one per namespace read.
func TestCluster_oneWatchPerResource(t *testing.T) {
	var objs []runtime.Object
	for i := range 30 {
		objs = append(objs, &unstructured.Unstructured{Object: bigPod(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("p-%d", i),
			map[string]any{"applicationId": fmt.Sprintf("app-%d", i%3)}, 128)})
	}
	c, dyn := scaleCluster(t, []CacheSpec{podSpec}, objs...)
	for i := range 10 {
		_, err := c.Get(t.Context(), podResource, fmt.Sprintf("ns-%d", i), fmt.Sprintf("p-%d", i), false)
		require.NoError(t, err)
		items, err := c.List(t.Context(), podResource, fmt.Sprintf("ns-%d", i), labels.SelectorFromSet(labels.Set{"applicationId": "app-1"}), fields.Everything())
		require.NoError(t, err)
		assert.Len(t, items, 1)
	}
	items, err := c.List(t.Context(), podResource, "", labels.SelectorFromSet(labels.Set{"applicationId": "app-1"}), fields.Everything())
	require.NoError(t, err)
	assert.Len(t, items, 10)
	for _, ns := range []string{"a", "b"} {
		_, err = c.Get(t.Context(), Resource{"v1", "ConfigMap"}, ns, "x", false)
		require.ErrorIs(t, err, ErrNotFound)
	}
	assert.Equal(t, []string{"pods in ", "configmaps in a", "configmaps in b"}, listActions(dyn))
	var watches []string
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "watch" {
			watches = append(watches, a.GetResource().Resource+" in "+a.GetNamespace())
		}
	}
	assert.ElementsMatch(t, []string{"pods in ", "configmaps in a", "configmaps in b"}, watches)
	assert.Equal(t, 3, c.Watches())

	// An object that arrives through the watch is pruned as a listed one.
	late := &unstructured.Unstructured{Object: bigPod("ns-3", "late", map[string]any{"applicationId": "app-1"}, 4096)}
	_, err = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace("ns-3").Create(t.Context(), late, metav1.CreateOptions{})
	require.NoError(t, err)
	var got json.RawMessage
	require.Eventually(t, func() bool {
		got, err = c.Get(t.Context(), podResource, "ns-3", "late", false)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	assert.NotContains(t, string(got), "message")
	assert.NotContains(t, string(got), "managedFields")
	assert.Less(t, len(got), 1024)
	items, err = c.List(t.Context(), podResource, "", labels.SelectorFromSet(labels.Set{"applicationId": "app-1"}), fields.Everything())
	require.NoError(t, err)
	assert.Len(t, items, 11, "and indexed")
	assert.Equal(t, []string{"pods in ", "configmaps in a", "configmaps in b"}, listActions(dyn), "still one list")
}

// TestCluster_warm: Warm syncs the kinds before the first read, and waits,
// retrying, while the API server refuses the list, until its context ends.
func TestCluster_warm(t *testing.T) {
	c, dyn := scaleCluster(t, []CacheSpec{podSpec}, &unstructured.Unstructured{Object: bigPod("ns", "p", nil, 64)})
	require.NoError(t, c.Warm(t.Context(), []Resource{podResource}))
	assert.Equal(t, []string{"pods in "}, listActions(dyn))
	_, err := c.Get(t.Context(), podResource, "ns", "p", false)
	require.NoError(t, err)
	assert.Equal(t, []string{"pods in "}, listActions(dyn), "the read is served from the synced cache")

	c, dyn = scaleCluster(t, []CacheSpec{{APIVersion: "v1", Kind: "ConfigMap", Watch: WatchCluster}})
	c.opts.SyncTimeout = 200 * time.Millisecond
	var refuse atomic.Bool
	refuse.Store(true)
	dyn.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	err = c.Warm(ctx, []Resource{{"v1", "ConfigMap"}})
	require.ErrorContains(t, err, "warm the cache of v1/ConfigMap")
	assert.ErrorContains(t, err, "not synced within 200ms")
	lists := len(listActions(dyn))
	err = answered(t, func(ctx context.Context) error {
		_, err := c.Get(ctx, Resource{"v1", "ConfigMap"}, "ns", "x", false)
		return err
	})
	assert.ErrorContains(t, err, "not synced within 200ms", "an unsynced watch answers its error, with no deadline of its own to wait for")
	assert.LessOrEqual(t, len(listActions(dyn)), lists+1, "and starts no second informer (the first retries on its own)")

	// The informer was not given up: once the API server answers, the
	// same watch syncs (a first list longer than SyncTimeout, or access
	// granted later), with no second list started by the host.
	refuse.Store(false)
	require.NoError(t, c.Warm(t.Context(), []Resource{{"v1", "ConfigMap"}}))
	_, err = c.Get(t.Context(), Resource{"v1", "ConfigMap"}, "ns", "x", false)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.Equal(t, 1, c.Watches())
}

// answered runs f with a context that never ends and returns its error.
// It fails the test if f has not returned within a minute: f must answer
// from what it holds, not wait on the context. The bound is generous on
// purpose (a liveness check, not a speed one: benchmarks measure speed).
func answered(t *testing.T, f func(context.Context) error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f(context.WithoutCancel(t.Context())) }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("no answer: the call waited instead of answering from what it holds")
		return nil
	}
}

// TestHostCalls_apiServerSlowOrUnreachable: against an API server that
// accepts connections and never answers, every capability answers an
// error within the handler's timeout, naming what failed, and never hangs
// the evaluation: a cached get or list whose watch has not synced, a
// fresh get, and can_i. A watch that synced before keeps answering from
// its cache while the API server fails.
func TestHostCalls_apiServerSlowOrUnreachable(t *testing.T) {
	hung := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hung:
		}
	}))
	defer srv.Close()
	defer close(hung)
	cfg := &rest.Config{Host: srv.URL}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	resources := []Resource{podResource, {"v1", "ConfigMap"}}
	c, err := NewCluster(t.Context(), ClusterOptions{Resources: resources, Cache: []CacheSpec{podSpec},
		Dynamic: dyn, Reviews: cs.AuthorizationV1().SubjectAccessReviews(), Mapper: mapper})
	require.NoError(t, err)
	defer c.Close()
	h, err := HostCalls(Options{Backend: c, Resources: resources, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	for _, tc := range []struct{ op, payload, err string }{
		{OpGetResource, `{"api_version":"v1","kind":"ConfigMap","name":"yunikorn-configs","namespace":"yunikorn","disable_cache":false}`,
			"watch v1/ConfigMap in namespace yunikorn: not synced yet: context deadline exceeded"},
		{OpListResourcesByNamespace, `{"api_version":"v1","kind":"Pod","namespace":"ns","label_selector":"applicationId=a"}`,
			"watch v1/Pod: not synced yet: context deadline exceeded"},
		{OpListResourcesAll, `{"api_version":"v1","kind":"Pod","label_selector":"applicationId=a"}`,
			"watch v1/Pod: not synced yet: context deadline exceeded"},
		{OpGetResource, `{"api_version":"v1","kind":"Pod","name":"p","namespace":"ns","disable_cache":true}`,
			"get v1/Pod ns/p: "},
		{OpCanI, `{"subject_access_review":{"groups":null,"resource_attributes":{"resource":"userinfos","verb":"set"},"user":"u"},"disable_cache":false}`,
			"SubjectAccessReview: "},
	} {
		// The guard is far longer than the call's timeout: a call that
		// returns before it was stopped by its own timeout (or failed at
		// once), not left to hang.
		guard, cancel := context.WithTimeout(t.Context(), time.Minute)
		_, err := h(guard, "kubewarden", Namespace, tc.op, []byte(tc.payload))
		assert.NoError(t, guard.Err(), "%s answers within the call's timeout, not the guard's", tc.op)
		cancel()
		require.Error(t, err, tc.op)
		assert.Contains(t, err.Error(), tc.err, tc.op)
	}

	// Synced before the outage: still answered, from the cache.
	fc, fdyn := scaleCluster(t, []CacheSpec{podSpec}, &unstructured.Unstructured{Object: bigPod("ns", "p", nil, 64)})
	require.NoError(t, fc.Warm(t.Context(), []Resource{podResource}))
	fdyn.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	})
	fh, err := HostCalls(Options{Backend: fc, Resources: resources, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	out, err := fh(t.Context(), "kubewarden", Namespace, OpListResourcesAll, []byte(`{"api_version":"v1","kind":"Pod","label_selector":"!applicationId"}`))
	require.NoError(t, err, "a synced cache still answers")
	assert.Contains(t, string(out), `"name":"p"`)
	_, err = fh(t.Context(), "kubewarden", Namespace, OpGetResource, []byte(`{"api_version":"v1","kind":"Pod","name":"p","namespace":"ns","disable_cache":true}`))
	assert.ErrorContains(t, err, "connection refused", "a fresh read does not fall back to the cache")
}

func TestParseCacheSpecs(t *testing.T) {
	specs, err := ParseCacheSpecs([]byte(`[{"apiVersion":"v1","kind":"Pod","watch":"cluster","fields":["metadata.name"],"labelIndex":["a"]}]`))
	require.NoError(t, err)
	assert.Equal(t, []CacheSpec{{APIVersion: "v1", Kind: "Pod", Watch: WatchCluster, Fields: []string{"metadata.name"}, LabelIndex: []string{"a"}}}, specs)
	for in, want := range map[string]string{
		`[{"apiVersion":"v1","kind":"Pod","field":["x"]}]`:                    `unknown field "field"`,
		`[{"apiVersion":"v1","kind":"Pod","watch":"node"}]`:                   `cache declaration[0].watch: "node" is neither`,
		`[{"apiVersion":"v1","kind":"Pod","fields":["metadata..name"]}]`:      `cache declaration[0].fields[0]: "metadata..name" is not a dotted path`,
		`[{"apiVersion":"v1","kind":"Pod","labelIndex":["a=b"]}]`:             `cache declaration[0].labelIndex[0]`,
		`[{"apiVersion":"v1","kind":"Pod"},{"apiVersion":"v1","kind":"Pod"}]`: `cache declaration[1]: v1/Pod declared twice`,
		`[{"kind":"Pod"}]`:                                                            `cache declaration[0]: apiVersion and kind are required`,
		`{"apiVersion":"v1","kind":"Pod"}`:                                            `cache declaration: json: cannot unmarshal object`,
		`[{"apiVersion":"v1","kind":"Pod"}] []`:                                       `more than one JSON value`,
		`[{"apiVersion":"a/b/c","kind":"Pod"}]`:                                       `apiVersion and kind are required`,
		`[{"apiVersion":"v1","kind":"Pod","fields":[""],"labelIndex":[]}]`:            `fields[0]`,
		`[{"apiVersion":"v1","kind":"Pod","watch":"cluster","labelIndex":[""]}, 1]`:   `cannot unmarshal number`,
		`[{"apiVersion":"v1","kind":"Pod","watch":"cluster","labelIndex":["ok",""]}]`: `labelIndex[1]`,
	} {
		_, err := ParseCacheSpecs([]byte(in))
		assert.ErrorContains(t, err, want, in)
	}
	merged := MergeCacheSpecs([]CacheSpec{{APIVersion: "v1", Kind: "Pod"}, {APIVersion: "v1", Kind: "Namespace"}},
		[]CacheSpec{{APIVersion: "v1", Kind: "Pod", Watch: WatchCluster}, {APIVersion: "v1", Kind: "ConfigMap"}})
	assert.Equal(t, []CacheSpec{{APIVersion: "v1", Kind: "Pod", Watch: WatchCluster}, {APIVersion: "v1", Kind: "Namespace"},
		{APIVersion: "v1", Kind: "ConfigMap"}}, merged)
}

// TestPagedListWatch_compactsEachPage: a list is read in pages, each
// object pruned as its page arrives, and a page that fails fails the list.
func TestPagedListWatch_compactsEachPage(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "pods"}: "PodList"})
	pods := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	page := func(cont string, names ...string) *unstructured.UnstructuredList {
		l := &unstructured.UnstructuredList{}
		l.SetResourceVersion("10")
		l.SetContinue(cont)
		for _, n := range names {
			l.Items = append(l.Items, unstructured.Unstructured{Object: bigPod("ns", n, map[string]any{"applicationId": "a"}, 256)})
		}
		return l
	}
	// The fake client does not record the continue token: pages alternate
	// by call, the second call of the first list failing.
	var calls atomic.Int32
	dyn.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		switch n := calls.Add(1); {
		case n == 2:
			return true, nil, errors.New("connection reset")
		case n%2 == 1:
			return true, page("more", "p-0", "p-1"), nil
		default:
			return true, page("", "p-2"), nil
		}
	})
	lw := pagedListWatch(pods, newKeeper(podResource, podFields))
	_, err := lw.ListWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	require.ErrorContains(t, err, "connection reset")

	got, err := lw.ListWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	require.NoError(t, err)
	items := got.(*cachedList).Items
	require.Len(t, items, 3)
	for _, it := range items {
		o := it.(*cachedObject)
		assert.Contains(t, string(o.raw), `"applicationId":"a"`)
		assert.NotContains(t, string(o.raw), "managedFields", "pruned to the declaration")
	}
}
