package audit

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func ui(user string, groups ...string) map[string]string {
	v := `{"user":"` + user + `"`
	if len(groups) > 0 {
		v += `,"groups":["` + strings.Join(groups, `","`) + `"]`
	}
	return map[string]string{AnnotationKey: v + "}"}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func pod(ns, name string, annotations, labels map[string]string, age int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Annotations: annotations, Labels: labels,
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Second))},
		Spec: corev1.PodSpec{SchedulerName: "yunikorn"},
	}
}

func gated(p *corev1.Pod) *corev1.Pod {
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	return p
}

// The application the shim resolves for a Pod of its own (x-<uid>),
// written by another user, is shared with it; a gated Pod is in no
// application, so it shares none.
func TestRun_resolvedAndGatedIDs(t *testing.T) {
	cs := fake.NewClientset(
		pod("gen", "g1", ui("gina"), nil, 1),
		pod("gen", "u1", ui("una"), map[string]string{"applicationId": "x-uniqueautogen"}, 2),
		pod("c", "joiner", ui("jo"), map[string]string{"applicationId": "x-gen-u1"}, 3),
		gated(pod("sq", "squat", ui("mal"), map[string]string{"applicationId": "yunikorn-gen-autogen"}, 4)),
	)
	r, err := Run(t.Context(), cs, Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"Pod c/joiner": RuleSharedAppID + ";"}, rule(r))
	require.Len(t, r.ClusterFindings, 1)
	assert.Equal(t, "x-gen-u1", r.ClusterFindings[0].AppID)
}

func rule(r *Report) map[string]string {
	got := map[string]string{}
	for _, f := range r.Findings {
		got[f.Resource.Kind+" "+f.Resource.Namespace+"/"+f.Resource.Name] += f.Rule + ";"
	}
	return got
}

// Every class of finding, and what is left alone: Pods of other
// schedulers, Pods without a readable controller, applications of one user.
func TestRun_findings(t *testing.T) {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-1", UID: "rs-uid"},
		Spec:       appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: ui("alice", "dev")}, Spec: corev1.PodSpec{SchedulerName: "yunikorn"}}},
	}
	owned := func(p *corev1.Pod, uid types.UID) *corev1.Pod {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: uid, Controller: ptr.To(true)}}
		return p
	}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "old", UID: "d-uid"},
		Spec:       appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: "yunikorn"}}},
	}
	other := pod("team", "default-sched", nil, nil, 0)
	other.Spec.SchedulerName = "default-scheduler"
	objs := []runtime.Object{rs, deploy, other,
		pod("team", "none", nil, map[string]string{"applicationId": "solo"}, 1),
		pod("team", "upper", map[string]string{AnnotationKey: `{"USER":"root"}`}, nil, 2),
		pod("team", "dup", map[string]string{AnnotationKey: `{"user":"bob","user":"root"}`}, nil, 3),
		owned(pod("team", "web-1-a", ui("alice", "dev"), map[string]string{"applicationId": "web"}, 4), "rs-uid"),
		owned(pod("team", "web-1-b", ui("mallory", "dev"), map[string]string{"applicationId": "web"}, 5), "rs-uid"),
		// A controller recreated under the same name is another object.
		owned(pod("team", "web-1-c", ui("carol"), map[string]string{"applicationId": "carols"}, 6), "stale-uid"),
		// Two users in one application, across namespaces and by each of
		// the shim's ID sources.
		pod("a", "first", ui("ann"), map[string]string{"yunikorn.apache.org/app-id": "shared"}, 7),
		pod("b", "second", ui("ben"), map[string]string{"spark-app-selector": "shared"}, 8),
		pod("b", "third", map[string]string{AnnotationKey: `{"user":"ann"}`, "yunikorn.apache.org/app-id": "shared"}, nil, 9),
		// No ID: the namespace's generated application.
		pod("gen", "g1", ui("gina"), nil, 10),
		pod("gen", "g2", ui("gus"), nil, 11),
		// Unique IDs are nobody else's.
		pod("gen", "u1", ui("una"), map[string]string{"applicationId": "x-uniqueautogen"}, 12),
	}
	cs := fake.NewClientset(objs...)
	r, err := Run(t.Context(), cs, Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"Deployment team/old": RuleMissing + ";",
		"Pod team/none":       RuleMissing + ";",
		"Pod team/upper":      RuleInvalid + ";",
		"Pod team/dup":        RuleInvalid + ";",
		"Pod team/web-1-b":    RuleSharedAppID + ";" + RuleOwnerMismatch + ";", // also the second user of application web
		"Pod b/second":        RuleSharedAppID + ";",
		"Pod gen/g2":          RuleSharedAppID + ";",
	}, rule(r))
	for _, f := range r.Findings {
		switch f.Resource.Name {
		case "second":
			assert.Equal(t, "shared", f.AppID)
			assert.Equal(t, "ben", f.User)
			assert.Contains(t, f.Message, `"ann" (2 pods, oldest a/first)`)
		case "g2":
			assert.Equal(t, "yunikorn-gen-autogen", f.AppID)
		case "web-1-b":
			if f.Rule != RuleOwnerMismatch {
				continue
			}
			assert.Contains(t, f.Message, `user "mallory"`)
			assert.Contains(t, f.Message, `ReplicaSet web-1 records user "alice"`)
		case "upper":
			assert.Contains(t, f.Message, `key "USER" must be written in lower case`)
		}
	}
	assert.Equal(t, 12, r.Audited["Pod"], "every YuniKorn Pod is audited, the other scheduler's is not")
	assert.Equal(t, 13, r.Scanned["Pod"])
	// Passed: team web-1-a, web-1-c; a first; b third; gen g1, u1.
	assert.Equal(t, map[string]int{"team": 3, "a": 1, "b": 1, "gen": 2}, r.Passed)

	// Application shared spans namespaces a and b: also one cluster-wide
	// finding naming both users and both namespaces. web and the generated
	// application are in one namespace each.
	assert.True(t, r.AllNamespaces)
	assert.Equal(t, 1, r.CrossNamespaceApps)
	require.Len(t, r.ClusterFindings, 1)
	cf := r.ClusterFindings[0]
	assert.Equal(t, RuleSharedAppID, cf.Rule)
	assert.Equal(t, "shared", cf.AppID)
	assert.Equal(t, []string{"a", "b"}, cf.Namespaces)
	require.Len(t, cf.Users, 2)
	assert.Equal(t, AppUser{User: "ann", Pods: 2, Namespaces: []string{"a", "b"},
		Oldest: Resource{APIVersion: "v1", Kind: "Pod", Namespace: "a", Name: "first", UID: "a-first"}}, cf.Users[0])
	assert.Equal(t, "ben", cf.Users[1].User)
	assert.Equal(t, []string{"b"}, cf.Users[1].Namespaces)
	assert.Equal(t, `application shared (YuniKorn's application IDs are cluster-wide) has Pods in namespaces a, b naming 2 users: `+
		`"ann" (owner: 2 pods in a, b, oldest a/first), "ben" (1 pods in b, oldest b/second)`, cf.Message)

	var table bytes.Buffer
	require.NoError(t, r.WriteTable(&table))
	assert.Contains(t, table.String(), "8 findings and 1 cluster-wide; audited")
	assert.Contains(t, table.String(), "(cluster)  Application  shared   application-id-shared     ann,ben")

	// One namespace: applications are not seen whole, nothing cluster-wide.
	r, err = Run(t.Context(), cs, Options{Namespace: "b"})
	require.NoError(t, err)
	assert.False(t, r.AllNamespaces)
	assert.Empty(t, r.ClusterFindings)
	assert.Nil(t, r.ClusterPolicyReport(WGPolicy, t0))
}

// The pager follows Continue tokens to the end, one request a page, with
// the page size asked for, and reports progress with the server's
// estimate of the total.
func TestRun_paging(t *testing.T) {
	const total, size = 23, 5
	cs := fake.NewClientset()
	var requests []metav1.ListOptions
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		requests = append(requests, opts)
		start := 0
		if opts.Continue != "" {
			start, _ = strconv.Atoi(strings.TrimPrefix(opts.Continue, "from-"))
		}
		end := min(start+int(opts.Limit), total)
		l := &corev1.PodList{}
		for i := start; i < end; i++ {
			l.Items = append(l.Items, *pod("ns", fmt.Sprintf("p%02d", i), nil, nil, i))
		}
		if end < total {
			l.Continue = fmt.Sprintf("from-%d", end)
			l.RemainingItemCount = ptr.To(int64(total - end))
		}
		return true, l, nil
	})
	var progress bytes.Buffer
	// Every 7: in the middle of a page, the total counts the rest of it.
	r, err := Run(t.Context(), cs, Options{PageSize: size, Progress: &progress, ProgressEvery: 7})
	require.NoError(t, err)
	require.Len(t, requests, 5)
	for i, o := range requests {
		assert.Equal(t, int64(size), o.Limit)
		if i > 0 {
			assert.Equal(t, fmt.Sprintf("from-%d", i*size), o.Continue)
		}
	}
	assert.Equal(t, total, r.Scanned["Pod"])
	assert.Len(t, r.Findings, total, "every Pod lacks user.info")
	assert.Contains(t, progress.String(), "audit: Pod: 7 of about 23 read, 7 findings so far\n")
	assert.Contains(t, progress.String(), "audit: Pod: 14 of about 23 read")
	assert.Contains(t, progress.String(), "audit: Pod: 21 read, 21 findings so far\n", "the last page has no estimate")
	assert.Contains(t, progress.String(), "audit: Pod: 23 read in 5 pages")
}

// A failing page names the kind and the page.
func TestRun_listError(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("forbidden")
	})
	_, err := Run(t.Context(), cs, Options{})
	require.ErrorContains(t, err, "list Job (page 1): forbidden")
}

// Owners are read once per controller, and the cache stays within its size.
func TestRun_ownerCache(t *testing.T) {
	var objs []runtime.Object
	for i := range 3 {
		uid := types.UID(fmt.Sprintf("rs%d", i))
		objs = append(objs, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: string(uid), UID: uid},
			Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: ui("u")}}}})
		for j := range 4 {
			p := pod("ns", fmt.Sprintf("%s-%d", uid, j), ui("u"), nil, j)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: string(uid), UID: uid, Controller: ptr.To(true)}}
			objs = append(objs, p)
		}
	}
	cs := fake.NewClientset(objs...)
	gets := 0
	cs.PrependReactor("get", "replicasets", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return false, nil, nil
	})
	r, err := Run(t.Context(), cs, Options{OwnerCacheSize: 2})
	require.NoError(t, err)
	assert.Empty(t, r.Findings)
	assert.Equal(t, 3, gets, "one read per controller: its Pods come together")

	c := newLRU(2)
	c.put("a", ownerInfo{known: true})
	c.put("b", ownerInfo{})
	c.get("a")
	c.put("c", ownerInfo{})
	_, hasB := c.get("b")
	_, hasA := c.get("a")
	assert.False(t, hasB, "the least recently used entry is evicted")
	assert.True(t, hasA)
	assert.Equal(t, 2, c.order.Len())
}

func TestPolicyReports(t *testing.T) {
	r := &Report{
		Findings: []Finding{
			{Rule: RuleMissing, Resource: Resource{APIVersion: "v1", Kind: "Pod", Namespace: "a", Name: "p", UID: "u1"}, Message: "m1"},
			{Rule: RuleSharedAppID, Resource: Resource{APIVersion: "v1", Kind: "Pod", Namespace: "a", Name: "q", UID: "u2"}, User: "bob", AppID: "x", Message: "m2"},
		},
		Passed: map[string]int{"a": 3, "b": 2},
	}
	reps := r.PolicyReports(WGPolicy, t0)
	require.Len(t, reps, 2)
	a := reps[0].Object
	assert.Equal(t, "wgpolicyk8s.io/v1alpha2", a["apiVersion"])
	assert.Equal(t, "PolicyReport", a["kind"])
	assert.Equal(t, map[string]any{"pass": int64(3), "fail": int64(2), "warn": int64(0), "error": int64(0), "skip": int64(0)}, a["summary"])
	res := a["results"].([]any)
	require.Len(t, res, 2)
	second := res[1].(map[string]any)
	assert.Equal(t, "yunikorn-user-info", second["policy"])
	assert.Equal(t, RuleSharedAppID, second["rule"])
	assert.Equal(t, "fail", second["result"])
	assert.Equal(t, "yunikorn-userinfo", second["source"])
	assert.Equal(t, map[string]any{"user": "bob", "applicationId": "x"}, second["properties"])
	assert.Equal(t, []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "q", "namespace": "a", "uid": "u2"}}, second["resources"])
	assert.Empty(t, reps[1].Object["results"])

	// Apply creates, then replaces, and deletes the reports of namespaces
	// with nothing audited any more (only its own: by name and label).
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{WGPolicy.GVR: "PolicyReportList"})
	foreign := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
		"metadata": map[string]any{"name": "polr-ns-b-kubewarden", "namespace": "b", "labels": map[string]any{"app.kubernetes.io/managed-by": "kubewarden"}}}}
	_, err := dyn.Resource(WGPolicy.GVR).Namespace("b").Create(t.Context(), foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	skipped, err := Apply(t.Context(), dyn, WGPolicy, "", reps)
	require.NoError(t, err)
	assert.Empty(t, skipped)
	r.Findings = r.Findings[:1]
	delete(r.Passed, "b")
	_, err = Apply(t.Context(), dyn, WGPolicy, "", r.PolicyReports(WGPolicy, t0))
	require.NoError(t, err)
	got, err := dyn.Resource(WGPolicy.GVR).Namespace("a").Get(t.Context(), ReportName, metav1.GetOptions{})
	require.NoError(t, err)
	results, _, _ := unstructured.NestedSlice(got.Object, "results")
	assert.Len(t, results, 1)
	_, err = dyn.Resource(WGPolicy.GVR).Namespace("b").Get(t.Context(), ReportName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the stale report is gone: %v", err)
	_, err = dyn.Resource(WGPolicy.GVR).Namespace("b").Get(t.Context(), foreign.GetName(), metav1.GetOptions{})
	assert.NoError(t, err, "another tool's report stays")
}

// A namespace deleted while the audit ran cannot take its report: it is
// skipped and named, the other reports are written, and any other refusal
// is still an error.
func TestApply_namespaceGone(t *testing.T) {
	rep := func(ns string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
			"metadata": map[string]any{"name": ReportName, "namespace": ns}}}
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{WGPolicy.GVR: "PolicyReportList"})
	dyn.PrependReactor("create", "policyreports", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetNamespace() {
		case "terminating":
			err := apierrors.NewForbidden(WGPolicy.GVR.GroupResource(), ReportName, fmt.Errorf("unable to create new content in namespace terminating because it is being terminated"))
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"}}
			return true, nil, err
		case "deleted":
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "deleted")
		case "forbidden":
			return true, nil, apierrors.NewForbidden(WGPolicy.GVR.GroupResource(), ReportName, fmt.Errorf("no"))
		}
		return false, nil, nil
	})
	skipped, err := Apply(t.Context(), dyn, WGPolicy, "", []*unstructured.Unstructured{rep("terminating"), rep("a"), rep("deleted")})
	require.NoError(t, err)
	assert.Equal(t, []string{"terminating", "deleted"}, skipped)
	_, err = dyn.Resource(WGPolicy.GVR).Namespace("a").Get(t.Context(), ReportName, metav1.GetOptions{})
	assert.NoError(t, err, "the other namespace's report is written")

	_, err = Apply(t.Context(), dyn, WGPolicy, "", []*unstructured.Unstructured{rep("forbidden")})
	assert.ErrorContains(t, err, "write PolicyReport forbidden/"+ReportName)
}

// A controller that cannot be read is counted, not silently passed over.
func TestRun_ownerUnread(t *testing.T) {
	p := pod("ns", "p", ui("u"), nil, 0)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "j", Controller: ptr.To(true)}}
	cs := fake.NewClientset(p)
	cs.PrependReactor("get", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("forbidden")
	})
	r, err := Run(t.Context(), cs, Options{})
	require.NoError(t, err)
	assert.Empty(t, r.Findings)
	assert.Equal(t, 1, r.OwnersUnread)
}

// The ClusterPolicyReport: a fail result per application that spans
// namespaces with several users, naming every user's oldest Pod; the
// applications across namespaces with one user count as pass. ApplyCluster
// creates, replaces, and deletes it when nothing cluster-wide is left
// (only its own).
func TestClusterPolicyReport(t *testing.T) {
	cs := fake.NewClientset(
		pod("a", "p1", ui("ann"), map[string]string{"applicationId": "x"}, 1),
		pod("b", "p2", ui("ben"), map[string]string{"applicationId": "x"}, 2),
		pod("c", "p3", ui("cy"), map[string]string{"applicationId": "x"}, 3),
		pod("a", "q1", ui("ann"), map[string]string{"applicationId": "y"}, 4),
		pod("b", "q2", ui("ann"), map[string]string{"applicationId": "y"}, 5),
	)
	r, err := Run(t.Context(), cs, Options{})
	require.NoError(t, err)
	assert.Equal(t, 2, r.CrossNamespaceApps)
	cpr := r.ClusterPolicyReport(WGPolicy, t0)
	require.NotNil(t, cpr)
	assert.Equal(t, "ClusterPolicyReport", cpr.GetKind())
	assert.Equal(t, "wgpolicyk8s.io/v1alpha2", cpr.GetAPIVersion())
	assert.Equal(t, ReportName, cpr.GetName())
	assert.Empty(t, cpr.GetNamespace())
	assert.Equal(t, map[string]string{"app.kubernetes.io/managed-by": ReportSource}, cpr.GetLabels())
	summary, _, _ := unstructured.NestedMap(cpr.Object, "summary")
	assert.Equal(t, map[string]any{"pass": int64(1), "fail": int64(1), "warn": int64(0), "error": int64(0), "skip": int64(0)}, summary)
	results, _, _ := unstructured.NestedSlice(cpr.Object, "results")
	require.Len(t, results, 1)
	res := results[0].(map[string]any)
	assert.Equal(t, RuleSharedAppID, res["rule"])
	assert.Equal(t, "fail", res["result"])
	assert.Equal(t, map[string]any{"applicationId": "x", "users": "ann,ben,cy", "namespaces": "a,b,c", "owner": "ann"}, res["properties"])
	assert.Equal(t, []any{
		map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "p1", "namespace": "a", "uid": "a-p1"},
		map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "p2", "namespace": "b", "uid": "b-p2"},
		map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "p3", "namespace": "c", "uid": "c-p3"},
	}, res["resources"])
	assert.Contains(t, res["message"], "has Pods in namespaces a, b, c naming 3 users")
	// Every result's properties are strings, as the CRD requires.
	for k, v := range res["properties"].(map[string]any) {
		assert.IsType(t, "", v, k)
	}
	// The namespaced reports still carry a finding per Pod of another user.
	var inB int
	for _, rep := range r.PolicyReports(WGPolicy, t0) {
		if rep.GetNamespace() == "b" {
			s, _, _ := unstructured.NestedMap(rep.Object, "summary")
			inB = int(s["fail"].(int64))
		}
	}
	assert.Equal(t, 1, inB)

	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		WGPolicy.GVR: "PolicyReportList", WGPolicy.ClusterGVR: "ClusterPolicyReportList"})
	require.NoError(t, ApplyCluster(t.Context(), dyn, WGPolicy, cpr))
	require.NoError(t, ApplyCluster(t.Context(), dyn, WGPolicy, cpr), "replaced")
	got, err := dyn.Resource(WGPolicy.ClusterGVR).Get(t.Context(), ReportName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, summary, got.Object["summary"])

	// Nothing across namespaces any more: no report, and the old one goes.
	r, err = Run(t.Context(), fake.NewClientset(pod("a", "p1", ui("ann"), nil, 1)), Options{})
	require.NoError(t, err)
	assert.Nil(t, r.ClusterPolicyReport(WGPolicy, t0))
	require.NoError(t, ApplyCluster(t.Context(), dyn, WGPolicy, nil))
	_, err = dyn.Resource(WGPolicy.ClusterGVR).Get(t.Context(), ReportName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	require.NoError(t, ApplyCluster(t.Context(), dyn, WGPolicy, nil), "nothing to delete")

	// Another tool's report of that name stays.
	foreign := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "ClusterPolicyReport",
		"metadata": map[string]any{"name": ReportName}}}
	_, err = dyn.Resource(WGPolicy.ClusterGVR).Create(t.Context(), foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, ApplyCluster(t.Context(), dyn, WGPolicy, nil))
	_, err = dyn.Resource(WGPolicy.ClusterGVR).Get(t.Context(), ReportName, metav1.GetOptions{})
	assert.NoError(t, err)
}

// The namespaces of a user of an application are all kept (up to a bound)
// whatever order its Pods are listed in; an application is across
// namespaces whichever user's Pods make it so.
func TestRun_appNamespaces(t *testing.T) {
	app := map[string]string{"applicationId": "z"}
	cs := fake.NewClientset(
		// Listed by namespace: ann's oldest Pod comes after a newer one.
		pod("a", "new", ui("ann"), app, 9),
		pod("b", "old", ui("ann"), app, 1),
		pod("c", "x", ui("ann"), app, 5),
		pod("d", "x", ui("ann"), app, 5),
		pod("e", "x", ui("ann"), app, 5),
		pod("e", "y", ui("bob"), app, 6),
	)
	r, err := Run(t.Context(), cs, Options{})
	require.NoError(t, err)
	require.Len(t, r.ClusterFindings, 1)
	ann := r.ClusterFindings[0].Users[0]
	assert.Equal(t, "old", ann.Oldest.Name)
	assert.Equal(t, 5, ann.Pods)
	assert.Equal(t, []string{"a", "b", "c", "d"}, ann.Namespaces, "four kept")
	assert.True(t, ann.MoreNamespaces)
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, r.ClusterFindings[0].Namespaces)
	assert.Contains(t, r.ClusterFindings[0].Message, `"ann" (owner: 5 pods in a, b, c, d, ..., oldest b/old)`)

	// Two users, each in one namespace of its own.
	cs = fake.NewClientset(pod("a", "p", ui("ann"), app, 1), pod("b", "q", ui("bob"), app, 2))
	r, err = Run(t.Context(), cs, Options{})
	require.NoError(t, err)
	require.Len(t, r.ClusterFindings, 1)
	assert.Equal(t, 1, r.CrossNamespaceApps)
}
