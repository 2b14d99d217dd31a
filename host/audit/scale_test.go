package audit

import (
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
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
