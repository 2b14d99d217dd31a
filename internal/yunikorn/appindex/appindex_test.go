package appindex

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/yunikorn-userinfo/userinfo/host/kubecap"
	"github.com/yunikorn-userinfo/userinfo/policy/appowners"
)

const uid = "3f2a9c1e-5b7d-4e21-a8c3-6d9f0b2e4a17"

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// pod is a Pod of the yunikorn scheduler in ns; edits change it.
func pod(ns string, edits ...func(p map[string]any)) map[string]any {
	p := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": ns, "uid": uid,
			"labels": map[string]any{}, "annotations": map[string]any{"yunikorn.apache.org/user.info": `{"user":"alice","groups":["dev"]}`}},
		"spec":   map[string]any{"schedulerName": "yunikorn"},
		"status": map[string]any{"phase": "Running"}}
	for _, e := range edits {
		e(p)
	}
	return p
}

func label(k, v string) func(map[string]any) {
	return func(p map[string]any) { p["metadata"].(map[string]any)["labels"].(map[string]any)[k] = v }
}

func annotation(k, v string) func(map[string]any) {
	return func(p map[string]any) { p["metadata"].(map[string]any)["annotations"].(map[string]any)[k] = v }
}

func finished(phase string, at ...string) func(map[string]any) {
	return func(p map[string]any) {
		var cs []any
		for _, t := range at {
			cs = append(cs, map[string]any{"name": "c", "state": map[string]any{"terminated": map[string]any{"exitCode": int64(0), "finishedAt": t}}})
		}
		p["status"] = map[string]any{"phase": phase, "containerStatuses": cs}
	}
}

func TestEntries(t *testing.T) {
	o := appowners.Options{SchedulerName: "yunikorn", CompletingTimeout: 30 * time.Second, UserLabelKey: "yunikorn.apache.org/username"}
	unique := o
	unique.UniqueAppIDs = true
	noTimeout := o
	noTimeout.CompletingTimeout = 0
	long := "a-namespace-whose-name-is-long-enough-to-be-cut-by-the-shim-x"
	entry := func(key, value string, until ...time.Time) []kubecap.IndexEntry {
		e := kubecap.IndexEntry{Key: key, Value: value}
		if len(until) > 0 {
			e.Until = until[0]
		}
		return []kubecap.IndexEntry{e}
	}
	for _, tc := range []struct {
		name string
		o    appowners.Options
		pod  map[string]any
		want []kubecap.IndexEntry
	}{
		{"explicit label", o, pod("a", label("applicationId", "etl")), entry("etl", "alice")},
		{"canonical label before annotation and legacy label", o,
			pod("a", label("applicationId", "x"), annotation("yunikorn.apache.org/app-id", "y"), label("yunikorn.apache.org/app-id", "etl")), entry("etl", "alice")},
		{"annotation before legacy label", o, pod("a", label("applicationId", "x"), annotation("yunikorn.apache.org/app-id", "etl")), entry("etl", "alice")},
		{"spark label", o, pod("a", label("spark-app-selector", "spark-1")), entry("spark-1", "alice")},
		{"generated per namespace", o, pod("team-a"), entry("yunikorn-team-a-autogen", "alice")},
		{"generated, cut to 63 characters", o, pod(long), entry(("yunikorn-" + long)[:63], "alice")},
		{"unique suffix", o, pod("a", label("applicationId", "job-uniqueautogen")), entry("job-"+uid, "alice")},
		{"unique generated", unique, pod(long), entry(long[:26]+"-"+uid, "alice")},
		{"unique generated without a uid yet", unique, pod("a", func(p map[string]any) { delete(p["metadata"].(map[string]any), "uid") }), nil},
		{"another scheduler", o, pod("a", func(p map[string]any) { p["spec"] = map[string]any{"schedulerName": "default-scheduler"} }), nil},
		{"no scheduler name", o, pod("a", func(p map[string]any) { p["spec"] = map[string]any{} }), nil},
		{"gated: owns nothing", o, pod("a", label("applicationId", "etl"), func(p map[string]any) {
			p["spec"].(map[string]any)["schedulingGates"] = []any{map[string]any{"name": "g"}}
		}), nil},
		{"empty gate list: attached", o, pod("a", label("applicationId", "etl"), func(p map[string]any) {
			p["spec"].(map[string]any)["schedulingGates"] = []any{}
		}), entry("etl", "alice")},
		{"the legacy label is no owner: nobody", o, pod("a", label("applicationId", "etl"), label("yunikorn.apache.org/username", "bob"),
			func(p map[string]any) { delete(p["metadata"].(map[string]any), "annotations") }), entry("etl", "nobody")},
		{"user.info before the legacy label", o, pod("a", label("applicationId", "etl"), label("yunikorn.apache.org/username", "bob")), entry("etl", "alice")},
		{"user.info not JSON: nobody", o, pod("a", label("applicationId", "etl"), annotation("yunikorn.apache.org/user.info", "{")), entry("etl", "nobody")},
		{"no user: nobody", o, pod("a", label("applicationId", "etl"), func(p map[string]any) { delete(p["metadata"].(map[string]any), "annotations") }), entry("etl", "nobody")},
		{"finished 10s ago: until 20s and the margin from now", o, pod("a", label("applicationId", "etl"),
			finished("Succeeded", now.Add(-20*time.Second).Format(time.RFC3339), now.Add(-10*time.Second).Format(time.RFC3339))),
			entry("etl", "alice", now.Add(20*time.Second+appowners.FinishMargin))},
		{"failed 30s and the margin ago: over", o, pod("a", label("applicationId", "etl"), finished("Failed", now.Add(-30*time.Second-appowners.FinishMargin).Format(time.RFC3339))), nil},
		{"failed 30s ago: within the margin", o, pod("a", label("applicationId", "etl"), finished("Failed", now.Add(-30*time.Second).Format(time.RFC3339))),
			entry("etl", "alice", now.Add(appowners.FinishMargin))},
		{"finished with no finish time: now", o, pod("a", label("applicationId", "etl"), finished("Succeeded")), entry("etl", "alice", now.Add(o.Window()))},
		{"finished in the future: now", o, pod("a", label("applicationId", "etl"), finished("Succeeded", now.Add(time.Hour).Format(time.RFC3339))),
			entry("etl", "alice", now.Add(o.Window()))},
		{"finished, no completing timeout", noTimeout, pod("a", label("applicationId", "etl"), finished("Succeeded")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Entries(tc.o, tc.pod, now))
		})
	}
}

// Through a watch cache: a deleted Pod's application stays its user's
// for completingTimeout and the margin after the deletion; a Pod that
// finished before it was deleted, that long after it finished.
func TestSpec_deletedPodsLinger(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(now)
	o := appowners.Options{SchedulerName: "yunikorn", CompletingTimeout: 30 * time.Second}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	running := pod("a", label("applicationId", "etl"))
	done := pod("b", label("applicationId", "report"), finished("Succeeded", now.Add(-20*time.Second).Format(time.RFC3339)))
	done["metadata"].(map[string]any)["name"] = "done"
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "PodList"},
		&unstructured.Unstructured{Object: running}, &unstructured.Unstructured{Object: done})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	pods := kubecap.Resource{APIVersion: "v1", Kind: "Pod"}
	c, err := kubecap.NewCluster(t.Context(), kubecap.ClusterOptions{Resources: []kubecap.Resource{pods}, Dynamic: dyn, Mapper: mapper,
		Reviews: noReviews{}, Indexes: []kubecap.IndexSpec{Spec(o)}, Clock: clk,
		Cache: []kubecap.CacheSpec{{APIVersion: "v1", Kind: "Pod", Watch: kubecap.WatchCluster, Fields: []string{"metadata.name", "metadata.namespace"}}}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	c.StartIndexes()
	owners := func(app string) []string {
		ans, err := c.IndexValues(t.Context(), kubecap.IndexQuery{Index: o.IndexName(), Key: app, Except: "bob", Limit: 1})
		require.NoError(t, err)
		return ans.Values
	}
	assert.Equal(t, []string{"alice"}, owners("etl"))
	assert.Equal(t, []string{"alice"}, owners("report"))
	for _, p := range []struct{ ns, name string }{{"a", "p"}, {"b", "done"}} {
		require.NoError(t, dyn.Resource(gvr).Namespace(p.ns).Delete(t.Context(), p.name, metav1.DeleteOptions{}))
	}
	require.Eventually(t, func() bool {
		_, e1 := c.Get(t.Context(), pods, "a", "p", false)
		_, e2 := c.Get(t.Context(), pods, "b", "done", false)
		return e1 != nil && e2 != nil
	}, 10*time.Second, 10*time.Millisecond)
	m := appowners.FinishMargin
	clk.SetTime(now.Add(9*time.Second + m))
	assert.Equal(t, []string{"alice"}, owners("etl"), "deleted, still held")
	assert.Equal(t, []string{"alice"}, owners("report"))
	clk.SetTime(now.Add(10*time.Second + m))
	assert.Empty(t, owners("report"), "finished 30s and the margin ago")
	assert.Equal(t, []string{"alice"}, owners("etl"))
	clk.SetTime(now.Add(30*time.Second + m))
	assert.Empty(t, owners("etl"), "completingTimeout and the margin after the deletion")
}

// noReviews is a SubjectAccessReviewer the test never asks.
type noReviews struct{}

func (noReviews) Create(context.Context, *authorizationv1.SubjectAccessReview, metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	return nil, errors.New("not asked")
}
