package kubecap

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// countingReviewer answers every review with allowed = (verb == "set") and
// counts the reviews it was asked.
type countingReviewer struct{ calls atomic.Int32 }

func (c *countingReviewer) Create(_ context.Context, sar *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	c.calls.Add(1)
	out := sar.DeepCopy()
	out.Status.Allowed = sar.Spec.ResourceAttributes.Verb == "set"
	out.Status.Reason = "fake"
	return out, nil
}

// fakeCluster is a Cluster on client-go's fake dynamic client holding the
// objects of testdata/cluster, with a RESTMapper for the three kinds.
func fakeCluster(t *testing.T, reviewTTL time.Duration) (*Cluster, *countingReviewer) {
	c, rev, _ := fakeClusterDyn(t, reviewTTL, 10*time.Second)
	return c, rev
}

func fakeClusterDyn(t *testing.T, reviewTTL, syncTimeout time.Duration) (*Cluster, *countingReviewer, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	replay, err := LoadReplay("testdata/cluster")
	require.NoError(t, err)
	var objs []runtime.Object
	for _, list := range replay.objects {
		for _, o := range list {
			objs = append(objs, &unstructured.Unstructured{Object: o})
		}
	}
	gvrs := map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "pods"}:       "PodList",
		{Version: "v1", Resource: "configmaps"}: "ConfigMapList",
		{Version: "v1", Resource: "namespaces"}: "NamespaceList",
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), gvrs, objs...)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	rev := &countingReviewer{}
	c, err := NewCluster(t.Context(), ClusterOptions{Resources: granted, Dynamic: dyn, Reviews: rev, Mapper: mapper,
		SyncTimeout: syncTimeout, ReviewTTL: reviewTTL})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, rev, dyn
}

// TestCluster_watchesOnlyWhatIsRead: nothing is listed until a policy
// reads; a get in one namespace lists that namespace only; a kind that
// cannot be listed (RBAC) fails within the sync timeout, and then fails at
// once until it is retried.
func TestCluster_watchesOnlyWhatIsRead(t *testing.T) {
	c, _, dyn := fakeClusterDyn(t, time.Minute, 300*time.Millisecond)
	dyn.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", errors.New("RBAC: not allowed"))
	})
	assert.Empty(t, listActions(dyn), "no informer before the first read")

	_, err := c.Get(t.Context(), Resource{"v1", "ConfigMap"}, "yunikorn", "yunikorn-configs", false)
	require.NoError(t, err)
	assert.Equal(t, []string{"configmaps in yunikorn"}, listActions(dyn), "one namespace listed")

	_, err = c.Get(t.Context(), Resource{"v1", "Namespace"}, "", "spark", false)
	require.ErrorContains(t, err, "watch v1/Namespace: not synced within 300ms (are list and watch allowed for this account?)")
	lists := len(listActions(dyn))
	err = answered(t, func(ctx context.Context) error {
		_, err := c.Get(ctx, Resource{"v1", "Namespace"}, "", "spark", false)
		return err
	})
	require.ErrorContains(t, err, "not synced within 300ms", "a failed watch answers its error until its retry time")
	assert.LessOrEqual(t, len(listActions(dyn)), lists+1, "and no second informer is started for it")
}

func listActions(dyn *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "list" {
			out = append(out, a.GetResource().Resource+" in "+a.GetNamespace())
		}
	}
	return out
}

// TestCluster_answersLikeReplay: on the same objects, the informer-backed
// backend gives every answer of the capability table (can_i aside, which
// the fake reviewer answers its own way).
func TestCluster_answersLikeReplay(t *testing.T) {
	c, _ := fakeCluster(t, time.Minute)
	h, err := HostCalls(Options{Backend: c, Resources: granted})
	require.NoError(t, err)
	checkCapabilityCases(t, h, true)
}

// TestCluster_watchFollowsChanges: an object created after the start is
// seen by the next list, through the watch.
func TestCluster_watchFollowsChanges(t *testing.T) {
	c, _ := fakeCluster(t, time.Minute)
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "late", "namespace": "default"}}}
	_, err := c.dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace("default").
		Create(t.Context(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.Get(t.Context(), Resource{"v1", "Pod"}, "default", "late", false)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	fresh, err := c.Get(t.Context(), Resource{"v1", "Pod"}, "default", "late", true)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(fresh, &got))
	assert.Equal(t, "late", got["metadata"].(map[string]any)["name"])
	_, err = c.Get(t.Context(), Resource{"v1", "Pod"}, "default", "never", true)
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestCluster_canICache: an answer is reused within the TTL unless the
// policy asks with disable_cache, and asked again after it.
func TestCluster_canICache(t *testing.T) {
	c, rev := fakeCluster(t, 200*time.Millisecond)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c.opts.Clock = clk
	review := SubjectAccessReview{User: "u", ResourceAttributes: ResourceAttributes{Namespace: "spark", Verb: "set", Group: "yunikorn.apache.org", Resource: "userinfos", Name: "alice"}}
	for range 3 {
		st, err := c.CanI(t.Context(), review, false)
		require.NoError(t, err)
		assert.True(t, st.Allowed)
	}
	assert.EqualValues(t, 1, rev.calls.Load(), "cached within the TTL")
	_, err := c.CanI(t.Context(), review, true)
	require.NoError(t, err)
	assert.EqualValues(t, 2, rev.calls.Load(), "disable_cache asks again")
	clk.SetTime(clk.Now().Add(199 * time.Millisecond))
	_, err = c.CanI(t.Context(), review, false)
	require.NoError(t, err)
	assert.EqualValues(t, 2, rev.calls.Load(), "still within the TTL")
	clk.SetTime(clk.Now().Add(time.Millisecond))
	_, err = c.CanI(t.Context(), review, false)
	require.NoError(t, err)
	assert.EqualValues(t, 3, rev.calls.Load(), "asked again after the TTL")
	other := review
	other.ResourceAttributes.Verb = "get"
	st, err := c.CanI(t.Context(), other, false)
	require.NoError(t, err)
	assert.False(t, st.Allowed)
}

// TestNewCluster_unservedKind: a declared kind the API server does not
// serve (an operator not installed) does not stop the start; reading it
// fails, naming it, and works once the API server serves it.
func TestNewCluster_unservedKind(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	spark := Resource{"sparkoperator.k8s.io/v1beta2", "SparkApplication"}
	c, err := NewCluster(t.Context(), ClusterOptions{Resources: []Resource{spark},
		Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Reviews: &countingReviewer{}, Mapper: mapper})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Get(t.Context(), spark, "ns", "pi", false)
	assert.ErrorContains(t, err, "sparkoperator.k8s.io/v1beta2/SparkApplication is not served by the API server")
	_, err = c.Get(t.Context(), Resource{"v1", "Secret"}, "ns", "x", false)
	assert.ErrorContains(t, err, "v1/Secret is not watched", "only declared kinds")

	gvk := schema.GroupVersionKind{Group: "sparkoperator.k8s.io", Version: "v1beta2", Kind: "SparkApplication"}
	mapper.Add(gvk, meta.RESTScopeNamespace) // the CRD is installed
	c.mu.Lock()
	c.unmapped[spark] = c.opts.Clock.Now().Add(-failedScopeRetry) // and the retry is due
	c.mu.Unlock()
	k, err := c.kind(spark)
	require.NoError(t, err)
	assert.Equal(t, "sparkapplications", k.gvr.Resource)
	assert.True(t, k.namespaced)
}
