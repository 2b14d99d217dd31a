package audit

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

var (
	rayClusterGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
	rayJobGVR     = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}
	trainerGVR    = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "trainers"}
)

func obj(t *testing.T, apiVersion, kind, ns, name, uid, spec string, annotations map[string]string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(spec), &m))
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "spec": m}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}

// tmplUI is a template's metadata with user.info value v, as JSON.
func tmplUI(v string) string {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationKey: v}}})
	return string(b)
}

func controlled(u metav1.Object, apiVersion, kind, name, uid string) {
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}})
}

// customCluster is a cluster serving ray.io/v1 RayClusters and RayJobs and
// example.com/v2 Trainers (a custom entry without a version: the group's
// preferred one is used), but not the spark preset's kinds.
func customCluster(t *testing.T, core []runtime.Object, custom ...runtime.Object) (*fake.Clientset, *dynfake.FakeDynamicClient) {
	t.Helper()
	cs := fake.NewClientset(core...)
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "ray.io/v1", APIResources: []metav1.APIResource{
			{Name: "rayclusters", Kind: "RayCluster", Namespaced: true}, {Name: "rayclusters/status", Kind: "RayCluster", Namespaced: true},
			{Name: "rayjobs", Kind: "RayJob", Namespaced: true}}},
		{GroupVersion: "example.com/v2", APIResources: []metav1.APIResource{{Name: "trainers", Kind: "Trainer", Namespaced: true}}},
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		rayClusterGVR: "RayClusterList", rayJobGVR: "RayJobList", trainerGVR: "TrainerList"}, custom...)
	return cs, dyn
}

func customSettings(t *testing.T) *workloads.Set {
	t.Helper()
	set, err := workloads.ParseSettings([]byte(`{"workloads":["kuberay","spark",
		{"group":"example.com","kind":"Trainer","paths":["spec.workers[*].template.metadata.annotations"],"owners":["Pod"]}]}`))
	require.NoError(t, err)
	return set
}

// Custom kinds: their templates and own annotations are audited with the
// rules of the built-in ones, what their operators make is compared with
// them, and a kind the server does not serve is skipped once.
func TestRun_customKinds(t *testing.T) {
	alice, mallory := `{"user":"alice"}`, `{"user":"mallory"}`
	custom := []runtime.Object{
		// Recorded everywhere, as the policy stamps it.
		obj(t, "ray.io/v1", "RayCluster", "ml", "good", "rc-good",
			`{"headGroupSpec":{"template":`+tmplUI(alice)+`},"workerGroupSpecs":[{"template":`+tmplUI(alice)+`}]}`, ui("alice")),
		// Made before the policy: nothing recorded.
		obj(t, "ray.io/v1", "RayCluster", "ml", "none", "rc-none",
			`{"headGroupSpec":{"template":{"spec":{}}},"workerGroupSpecs":[{"template":{}}]}`, nil),
		// A forged value YuniKorn would read as root.
		obj(t, "ray.io/v1", "RayCluster", "ml", "forged", "rc-forged",
			`{"headGroupSpec":{"template":`+tmplUI(`{"user":"bob","User":"root"}`)+`}}`, nil),
		// Two submitters in one object.
		obj(t, "ray.io/v1", "RayCluster", "ml", "split", "rc-split",
			`{"headGroupSpec":{"template":`+tmplUI(alice)+`},"workerGroupSpecs":[{"template":`+tmplUI(mallory)+`}]}`, nil),
		// A worker group added without one: its Pods carry none.
		obj(t, "ray.io/v1", "RayCluster", "ml", "partial", "rc-partial",
			`{"headGroupSpec":{"template":`+tmplUI(alice)+`},"workerGroupSpecs":[{"template":`+tmplUI(alice)+`},{"template":{}}]}`, ui("alice")),
		// Not YuniKorn's: every template names another scheduler.
		obj(t, "ray.io/v1", "RayCluster", "ml", "other", "rc-other",
			`{"headGroupSpec":{"template":{"spec":{"schedulerName":"default-scheduler"}}}}`, nil),
		// Malformed at a path.
		obj(t, "ray.io/v1", "RayCluster", "ml", "bad", "rc-bad", `{"workerGroupSpecs":{"a":1}}`, nil),
		// A RayJob on an existing cluster records its submitter in its own
		// annotations only.
		obj(t, "ray.io/v1", "RayJob", "ml", "job", "rj-1", `{"clusterSelector":{"a":"b"}}`, ui("alice")),
		obj(t, "example.com/v2", "Trainer", "ml", "tr", "tr-1", `{"workers":[{"template":`+tmplUI(alice)+`}]}`, nil),
	}
	// The RayCluster a RayJob made records another user than the RayJob.
	made := obj(t, "ray.io/v1", "RayCluster", "ml", "job-cluster", "rc-made", `{"headGroupSpec":{"template":`+tmplUI(mallory)+`}}`, ui("mallory"))
	controlled(made, "ray.io/v1", "RayJob", "job", "rj-1")
	custom = append(custom, made)

	podOf := func(name, value, apiVersion, kind, owner, uid string) *corev1.Pod {
		p := pod("ml", name, map[string]string{AnnotationKey: value}, map[string]string{"applicationId": name}, 0)
		controlled(p, apiVersion, kind, owner, uid)
		return p
	}
	// A Job made by an operator of an owner kind (Trainer) is compared with
	// it; a Deployment's ReplicaSet is not compared with the Deployment.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "tr-job", UID: "job-1"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: ui("mallory")}, Spec: corev1.PodSpec{SchedulerName: "yunikorn"}}}}
	controlled(job, "example.com/v2", "Trainer", "tr", "tr-1")
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "rs", UID: "rs-1"},
		Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: ui("x")}, Spec: corev1.PodSpec{SchedulerName: "yunikorn"}}}}
	controlled(rs, "apps/v1", "Deployment", "d", "d-1")
	leader := pod("ml", "leader", ui("alice"), map[string]string{"applicationId": "leader"}, 0)
	core := []runtime.Object{job, rs, leader,
		podOf("good-head", alice, "ray.io/v1", "RayCluster", "good", "rc-good"),
		podOf("good-evil", mallory, "ray.io/v1", "RayCluster", "good", "rc-good"),
		// The owner is gone, recreated, or records no one: not compared.
		podOf("gone", mallory, "ray.io/v1", "RayCluster", "gone", "rc-gone"),
		podOf("recreated", mallory, "ray.io/v1", "RayCluster", "good", "rc-old"),
		podOf("orphan", mallory, "ray.io/v1", "RayCluster", "none", "rc-none"),
		// Owned by a Pod (the Trainer entry's extra owner kind).
		podOf("worker", mallory, "v1", "Pod", "leader", "ml-leader"),
		// A kind the settings do not name is not read.
		podOf("foreign", mallory, "example.org/v1", "Thing", "t", "t-1"),
	}
	cs, dyn := customCluster(t, core, custom...)
	var progress []byte
	w := writerFunc(func(p []byte) (int, error) { progress = append(progress, p...); return len(p), nil })
	r, err := Run(t.Context(), cs, Options{Workloads: customSettings(t), Dynamic: dyn, Progress: w})
	require.NoError(t, err)

	got := map[string]string{}
	msgs := map[string]string{}
	for _, f := range r.Findings {
		key := f.Resource.Kind + " " + f.Resource.Name
		got[key] += f.Rule + ";"
		msgs[key] += f.Message
	}
	assert.Equal(t, map[string]string{
		"RayCluster none":        RuleMissing + ";",
		"RayCluster forged":      RuleInvalid + ";",
		"RayCluster split":       RuleInvalid + ";",
		"RayCluster partial":     RuleMissing + ";",
		"RayCluster bad":         RuleInvalid + ";",
		"RayCluster job-cluster": RuleOwnerMismatch + ";",
		"Job tr-job":             RuleOwnerMismatch + ";",
		"Pod good-evil":          RuleOwnerMismatch + ";",
		"Pod worker":             RuleOwnerMismatch + ";",
	}, got)
	assert.Equal(t, "no pod template nor the object's own metadata has an yunikorn.apache.org/user.info annotation: YuniKorn does not know who submitted it", msgs["RayCluster none"])
	assert.Contains(t, msgs["RayCluster forged"], `spec.headGroupSpec.template.metadata.annotations has an invalid yunikorn.apache.org/user.info annotation: key "User" must be written in lower case`)
	assert.Equal(t, "yunikorn.apache.org/user.info differs between spec.headGroupSpec.template.metadata.annotations and spec.workerGroupSpecs[0].template.metadata.annotations: every pod template must record the same submitter", msgs["RayCluster split"])
	assert.Equal(t, `spec.workerGroupSpecs[1].template.metadata.annotations has no yunikorn.apache.org/user.info annotation, while spec.headGroupSpec.template.metadata.annotations records user "alice": the Pods made from it carry none`, msgs["RayCluster partial"])
	assert.Equal(t, "the object's templates cannot be read at the paths of preset kuberay: spec.workerGroupSpecs: must be an array, got object", msgs["RayCluster bad"])
	assert.Equal(t, `the object names user "mallory", but its controller RayJob job records user "alice" (in its pod templates and own annotations)`, msgs["RayCluster job-cluster"])
	assert.Equal(t, `the Pod template (spec.template) names user "mallory", but its controller Trainer tr records user "alice" (in its pod templates and own annotations)`, msgs["Job tr-job"])
	assert.Equal(t, `the Pod names user "mallory", but its controller Pod leader records user "alice" (in its own annotations)`, msgs["Pod worker"])

	assert.Equal(t, 8, r.Scanned["RayCluster.ray.io"])
	assert.Equal(t, 7, r.Audited["RayCluster.ray.io"], "the other scheduler's is read, not audited")
	assert.Equal(t, 1, r.Audited["RayJob.ray.io"])
	assert.Equal(t, 1, r.Audited["Trainer.example.com"])
	assert.Zero(t, r.Scanned["RayService.ray.io"])
	var skipped []string
	for _, k := range r.Skipped {
		skipped = append(skipped, k.Kind+"@"+k.Version+": "+k.Reason)
	}
	assert.Equal(t, []string{
		"RayService@v1: the API server serves ray.io/v1 but no kind RayService in it",
		"ScheduledSparkApplication@v1beta2: the API server does not serve sparkoperator.k8s.io/v1beta2 (is its CRD installed?)",
		"SparkApplication@v1beta2: the API server does not serve sparkoperator.k8s.io/v1beta2 (is its CRD installed?)",
	}, skipped, "sorted by group, then kind")
	assert.Contains(t, string(progress), "audit: SparkApplication.sparkoperator.k8s.io (preset spark): not audited: the API server does not serve sparkoperator.k8s.io/v1beta2 (is its CRD installed?)\n")
	assert.Contains(t, string(progress), "audit: RayCluster.ray.io: 8 read in 1 pages, 7 audited")

	// The skipped kinds are skip results of the ClusterPolicyReport.
	cpr := r.ClusterPolicyReport(WGPolicy, t0)
	require.NotNil(t, cpr)
	summary, _, _ := unstructured.NestedMap(cpr.Object, "summary")
	assert.Equal(t, map[string]any{"pass": int64(0), "fail": int64(0), "warn": int64(0), "error": int64(0), "skip": int64(3)}, summary)
	results, _, _ := unstructured.NestedSlice(cpr.Object, "results")
	require.Len(t, results, 3)
	first := results[0].(map[string]any)
	assert.Equal(t, RuleKindNotServed, first["rule"])
	assert.Equal(t, "skip", first["result"])
	assert.Equal(t, map[string]any{"group": "ray.io", "kind": "RayService", "version": "v1", "entry": "preset kuberay"}, first["properties"])
	assert.NotContains(t, first, "resources", "the result is about the report's scope, the cluster")
}

// Custom kinds are listed in pages with Continue, like the built-in ones,
// and a failing page names the kind.
func TestRun_customKindsPaging(t *testing.T) {
	var objs []runtime.Object
	for i := range 7 {
		objs = append(objs, obj(t, "ray.io/v1", "RayJob", "ml", fmt.Sprintf("j%d", i), fmt.Sprintf("u%d", i), `{}`, nil))
	}
	cs, dyn := customCluster(t, nil, objs...)
	var limits []string
	dyn.PrependReactor("list", "rayjobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o := a.(k8stesting.ListActionImpl).ListOptions
		limits = append(limits, fmt.Sprintf("%d/%s", o.Limit, o.Continue))
		if len(limits) > 10 {
			t.Fatalf("looping: %v", limits)
		}
		start := 0
		fmt.Sscan(o.Continue, &start)
		l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayJobList"}}
		end := min(start+int(o.Limit), len(objs))
		for _, x := range objs[start:end] {
			l.Items = append(l.Items, *x.(*unstructured.Unstructured))
		}
		if end < len(objs) {
			l.SetContinue(fmt.Sprint(end))
		}
		return true, l, nil
	})
	set, err := workloads.ParseSettings([]byte(`{"workloads":["kuberay"]}`))
	require.NoError(t, err)
	// In one namespace: the fake drops the options of a list of every
	// namespace (client-go testing.NewRootListActionWithOptions).
	r, err := Run(t.Context(), cs, Options{Namespace: "ml", Workloads: set, Dynamic: dyn, PageSize: 3})
	require.NoError(t, err)
	assert.Equal(t, []string{"3/", "3/3", "3/6"}, limits)
	assert.Equal(t, 7, r.Scanned["RayJob.ray.io"])
	assert.Len(t, r.Findings, 7, "no RayJob records anyone")

	dyn.PrependReactor("list", "rayclusters", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(rayClusterGVR.GroupResource(), "", fmt.Errorf("no"))
	})
	_, err = Run(t.Context(), cs, Options{Workloads: set, Dynamic: dyn})
	require.ErrorContains(t, err, "list RayCluster.ray.io (page 1): rayclusters.ray.io is forbidden")

	_, err = Run(t.Context(), cs, Options{Workloads: set})
	require.ErrorContains(t, err, "custom workload kinds need a dynamic client")
}

// Discovery failing otherwise than not found stops the audit.
func TestRun_customKindsDiscoveryError(t *testing.T) {
	cs, dyn := customCluster(t, nil)
	cs.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("connection refused")
	})
	set, err := workloads.ParseSettings([]byte(`{"workloads":["jobset"]}`))
	require.NoError(t, err)
	_, err = Run(t.Context(), cs, Options{Workloads: set, Dynamic: dyn})
	require.ErrorContains(t, err, "discover the resource of JobSet.jobset.x-k8s.io in jobset.x-k8s.io/v1alpha2: connection refused")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
