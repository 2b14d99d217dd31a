package audit

import (
	"fmt"
	"maps"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/yunikorn-userinfo/userinfo/policy/workloads"
)

// BenchmarkRun_100kPods audits 100,000 Pods served 500 a page, built on
// demand so that only the audit holds memory, and reports the largest live
// heap seen between pages (after a GC). Every tenth Pod has no user.info
// (a finding), every Pod has an application of its own (the worst case of
// the per-application aggregates) and a controller that is gone.
func BenchmarkRun_100kPods(b *testing.B) {
	const total = 100_000
	for b.Loop() {
		cs := fake.NewClientset()
		var peak uint64
		pages := 0
		cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			opts := a.(k8stesting.ListActionImpl).ListOptions
			if pages%20 == 0 {
				goruntime.GC()
				var ms goruntime.MemStats
				goruntime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
			pages++
			start := 0
			if opts.Continue != "" {
				start, _ = strconv.Atoi(opts.Continue)
			}
			end := min(start+int(opts.Limit), total)
			l := &corev1.PodList{Items: make([]corev1.Pod, 0, end-start)}
			for i := start; i < end; i++ {
				p := corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{
						Namespace: fmt.Sprintf("ns-%d", i%200), Name: fmt.Sprintf("pod-%06d", i), UID: types.UID(fmt.Sprintf("uid-%06d", i)),
						Labels:      map[string]string{"applicationId": fmt.Sprintf("app-%06d", i), "app": "x"},
						Annotations: map[string]string{AnnotationKey: `{"user":"user-` + strconv.Itoa(i%1000) + `","groups":["dev","system:authenticated"]}`, "other": strings.Repeat("x", 512)},
						OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("rs-%d", i/10),
							UID: types.UID(fmt.Sprintf("rs-%d", i/10)), Controller: ptr.To(true)}},
					},
					Spec: corev1.PodSpec{SchedulerName: "yunikorn", Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x:1",
						Env: []corev1.EnvVar{{Name: "A", Value: strings.Repeat("y", 1024)}}}}},
				}
				if i%10 == 0 {
					delete(p.Annotations, AnnotationKey)
				}
				l.Items = append(l.Items, p)
			}
			if end < total {
				l.Continue = strconv.Itoa(end)
				l.RemainingItemCount = ptr.To(int64(total - end))
			}
			return true, l, nil
		})
		r, err := Run(b.Context(), cs, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Scanned["Pod"] != total || len(r.Findings) != total/10 {
			b.Fatalf("scanned %d, %d findings", r.Scanned["Pod"], len(r.Findings))
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-live-MiB")
		b.ReportMetric(float64(pages), "pages")
	}
}

// BenchmarkRun_20kRayClusters audits 20,000 RayClusters of the kuberay
// preset (a head and four worker templates each, about 3 KiB), served
// 500 a page by the dynamic client and built on demand, and reports the
// largest live heap seen between pages (after a GC). Every tenth records
// no one (a finding).
func BenchmarkRun_20kRayClusters(b *testing.B) {
	const total = 20_000
	set, err := workloads.ParseSettings([]byte(`{"workloads":["kuberay"]}`))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cs := fake.NewClientset()
		cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "ray.io/v1",
			APIResources: []metav1.APIResource{{Name: "rayclusters", Kind: "RayCluster", Namespaced: true}}}}
		dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{rayClusterGVR: "RayClusterList"})
		var peak uint64
		pages := 0
		dyn.PrependReactor("list", "rayclusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
			opts := a.(k8stesting.ListActionImpl).ListOptions
			if pages%10 == 0 {
				goruntime.GC()
				var ms goruntime.MemStats
				goruntime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
			pages++
			start := 0
			if opts.Continue != "" {
				start, _ = strconv.Atoi(opts.Continue)
			}
			end := min(start+int(opts.Limit), total)
			l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayClusterList"}}
			for i := start; i < end; i++ {
				ann := map[string]any{AnnotationKey: `{"user":"user-` + strconv.Itoa(i%1000) + `","groups":["dev"]}`, "other": strings.Repeat("x", 256)}
				if i%10 == 0 {
					delete(ann, AnnotationKey)
				}
				tmpl := func() map[string]any {
					return map[string]any{"metadata": map[string]any{"annotations": maps.Clone(ann)},
						"spec": map[string]any{"containers": []any{map[string]any{"name": "ray", "image": "registry.invalid/ray:2", "args": strings.Repeat("y", 256)}}}}
				}
				workers := []any{}
				for range 4 {
					workers = append(workers, map[string]any{"groupName": "w", "template": tmpl()})
				}
				u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster",
					"metadata": map[string]any{"namespace": fmt.Sprintf("ns-%d", i%200), "name": fmt.Sprintf("rc-%06d", i), "uid": fmt.Sprintf("uid-%06d", i),
						"annotations": maps.Clone(ann)},
					"spec": map[string]any{"headGroupSpec": map[string]any{"template": tmpl()}, "workerGroupSpecs": workers}}}
				l.Items = append(l.Items, u)
			}
			if end < total {
				l.SetContinue(strconv.Itoa(end))
			}
			return true, l, nil
		})
		// A list of one namespace: the fake drops the options of a list of
		// every namespace (client-go testing.NewRootListActionWithOptions);
		// the reactor serves objects of every namespace all the same.
		r, err := Run(b.Context(), cs, Options{Workloads: set, Dynamic: dyn, Namespace: "any"})
		if err != nil {
			b.Fatal(err)
		}
		if r.Scanned["RayCluster.ray.io"] != total || len(r.Findings) != total/10 {
			b.Fatalf("scanned %d, %d findings", r.Scanned["RayCluster.ray.io"], len(r.Findings))
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-live-MiB")
		b.ReportMetric(float64(pages), "pages")
	}
}
