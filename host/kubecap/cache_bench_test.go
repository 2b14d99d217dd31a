package kubecap

import (
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

var cachedPods = flag.Int("cachedpods", 20000, "BenchmarkCachedPodMemory: the Pods cached")

// BenchmarkCachedPodMemory is the heap a watch cache keeps per Pod of
// about 5 KiB of JSON (managedFields in), 10 Pods per application in
// 1,000 namespaces (-cachedpods of them): as unstructured objects in
// client-go's indexer (what the informers kept first), and as the
// declared fields' JSON in the same indexer with the watch cache's
// indexes (what they keep now; kept-B/pod is the JSON alone). It also
// lists by an indexed label over all namespaces, and in one namespace
// with a !key selector.
func BenchmarkCachedPodMemory(b *testing.B) {
	pods := *cachedPods
	spec := podSpec
	make := func(i int) *unstructured.Unstructured {
		app := i / 10
		p := bigPod(fmt.Sprintf("ns-%04d", app%1000), fmt.Sprintf("p-%d", i), map[string]any{
			"applicationId": fmt.Sprintf("app-%d", app), "queue": "root.default", "app.kubernetes.io/name": "bench",
			"app.kubernetes.io/instance": fmt.Sprintf("app-%d", app), "pod-template-hash": "5d8f7c9b4"}, 3800)
		return &unstructured.Unstructured{Object: p}
	}
	raw, _ := json.Marshal(make(0).Object)
	b.Logf("one Pod: %d bytes of JSON", len(raw))
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	b.Run("unstructured", func(b *testing.B) {
		for b.Loop() {
			before := heap()
			store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for i := range pods {
				_ = store.Add(make(i))
			}
			b.ReportMetric(float64(heap()-before)/float64(pods), "B/pod")
			runtime.KeepAlive(store)
		}
	})
	b.Run("declared-fields", func(b *testing.B) {
		for b.Loop() {
			before := heap()
			store := newWatchCache(newLabelIndex(spec.LabelIndex), nil, nil)
			store.indexer = cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, store.indexers())
			keep := newKeeper(podResource, spec.Fields)
			kept := 0
			for i := range pods {
				obj, err := keep.transform(make(i))
				if err != nil {
					b.Fatal(err)
				}
				kept += len(obj.(*cachedObject).raw)
				if err := store.indexer.Add(obj); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(heap()-before)/float64(pods), "B/pod")
			b.ReportMetric(float64(kept)/float64(pods), "kept-B/pod")
			sel := labels.SelectorFromSet(labels.Set{"applicationId": "app-77"})
			items, err := store.list("", sel, fields.Everything())
			if err != nil || len(items) != 10 {
				b.Fatalf("%d Pods of one application (%v)", len(items), err)
			}
			if n := len(store.candidates("", sel)); n != 10 {
				b.Fatalf("%d candidates for one application", n)
			}
			notKey, _ := labels.Parse("!spark-app-selector")
			items, err = store.list("ns-0077", notKey, fields.Everything())
			if err != nil || len(items) != pods/1000 {
				b.Fatalf("%d Pods in one namespace (%v)", len(items), err)
			}
			runtime.KeepAlive(store)
		}
	})
}
