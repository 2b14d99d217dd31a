package kubecap

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkCachedPodMemory is the heap a watch cache keeps per Pod of
// about 5 KiB of JSON (managedFields in), 10 Pods per application in
// 1,000 namespaces: as unstructured objects (what the informers kept
// before), and as the declared fields' JSON with the namespace and label
// indexes (what they keep now). It also times a list by an indexed label
// over all namespaces, and in one namespace with a !key selector.
func BenchmarkCachedPodMemory(b *testing.B) {
	const pods = 20000
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
	for _, v := range []struct {
		name    string
		compact bool
	}{{"unstructured", false}, {"declared-fields", true}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
				li := newLabelIndex(spec.LabelIndex)
				if v.compact {
					indexers[labelIndexName] = li.index
				}
				before := heap()
				store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
				keep := newKeeper(podResource, spec.Fields)
				for i := range pods {
					var obj any = make(i)
					if v.compact {
						obj, _ = keep.transform(obj)
					}
					_ = store.Add(obj)
				}
				b.ReportMetric(float64(heap()-before)/pods, "B/pod")
				if v.compact {
					sel := labels.SelectorFromSet(labels.Set{"applicationId": "app-77"})
					items, _ := candidates(store, li, "", sel)
					if len(items) != 10 {
						b.Fatalf("%d candidates for one application", len(items))
					}
					notKey, _ := labels.Parse("!spark-app-selector")
					for _, it := range items {
						if ok, _ := matchCached(it.(*cachedObject), "", notKey, fields.Everything()); !ok {
							b.Fatal("no match")
						}
					}
				}
				runtime.KeepAlive(store)
			}
		})
	}
}
