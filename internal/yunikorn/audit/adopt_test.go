package audit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Every object that records no owner and has no controller is listed with
// the command that adopts it: a bare Pod, a Deployment, a CronJob, a
// custom kind with no record at all. What adoption does not fix is not:
// a Pod or ReplicaSet with a controller (the controller is adopted), an
// object that records an owner, a custom kind whose record is partial.
func TestRun_adoptable(t *testing.T) {
	yk := corev1.PodSpec{SchedulerName: "yunikorn"}
	bare := pod("team", "bare", nil, map[string]string{legacyUserLabel: "alice"}, 1)
	bare.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-run", Operation: metav1.ManagedFieldsOperationUpdate}}
	ownedPod := pod("team", "web-1-x", nil, nil, 2)
	controlled(ownedPod, "apps/v1", "ReplicaSet", "web-1", "rs-1")
	owned := pod("team", "owned", ui("alice"), nil, 3)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "dep-1"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: yk}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-1", UID: "rs-1"},
		Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{Spec: yk}}}
	controlled(rs, "apps/v1", "Deployment", "web", "dep-1")
	cron := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nightly", UID: "cj-1"},
		Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: yk}}}}}
	custom := []runtime.Object{
		obj(t, "ray.io/v1", "RayCluster", "ml", "none", "rc-none", `{"headGroupSpec":{"template":{"spec":{}}}}`, nil),
		obj(t, "ray.io/v1", "RayCluster", "ml", "partial", "rc-partial",
			`{"headGroupSpec":{"template":`+tmplUI(`{"user":"alice"}`)+`},"workerGroupSpecs":[{"template":{}}]}`, ui("alice")),
	}
	cs, dyn := customCluster(t, []runtime.Object{bare, ownedPod, owned, dep, rs, cron}, custom...)
	r, err := Run(t.Context(), cs, Options{Workloads: customSettings(t), Dynamic: dyn})
	require.NoError(t, err)

	got := map[string]*Adoption{}
	missing := 0
	for _, f := range r.Findings {
		if f.Rule == RuleMissing {
			missing++
		}
		if f.Adopt != nil {
			assert.Equal(t, RuleMissing, f.Rule)
			got[f.Resource.Kind+" "+f.Resource.Namespace+"/"+f.Resource.Name] = f.Adopt
		}
	}
	assert.Equal(t, 7, missing, "the Pod and the ReplicaSet of a controller and the partial RayCluster are findings too: %v", rule(r))
	require.Len(t, got, 4, "%v", got)

	a := got["Pod team/bare"]
	require.NotNil(t, a)
	assert.Equal(t, `kubectl patch pod bare -n team --type=merge -p '{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"OWNER\",\"groups\":[\"GROUP\"]}"}}}'`, a.Command,
		"the legacy username label is no proof of the owner: the placeholder stays")
	assert.Contains(t, a.OwnerHint, `its label yunikorn.apache.org/username says "alice", which proves nothing`)
	assert.Contains(t, a.OwnerHint, "managedFields name only the client, kubectl-run")
	assert.Contains(t, a.OwnerHint, "at 2026-01-01T00:00:01Z")

	a = got["Deployment team/web"]
	require.NotNil(t, a)
	assert.NotContains(t, a.OwnerHint, "its label")
	assert.Equal(t, `kubectl patch deployment.apps web -n team --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"OWNER\",\"groups\":[\"GROUP\"]}"}}}}}'`, a.Command)
	assert.Contains(t, a.OwnerHint, "replace OWNER and GROUP")

	a = got["CronJob team/nightly"]
	require.NotNil(t, a)
	assert.Equal(t, map[string]any{"spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{AnnotationKey: OwnerPlaceholder}}}}}}}, decode(t, a.Patch))

	a = got["RayCluster ml/none"]
	require.NotNil(t, a)
	assert.Equal(t, `kubectl patch raycluster.ray.io none -n ml --type=merge -p '{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"OWNER\",\"groups\":[\"GROUP\"]}"}}}'`, a.Command,
		"a custom kind's own annotations: the policy copies them to its templates")
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return m
}

// Names and patches with quotes are quoted for a POSIX shell.
func TestAdoptionCommand_quoting(t *testing.T) {
	res := Resource{APIVersion: "batch/v1", Kind: "Job", Namespace: "it's", Name: "j"}
	patch := AdoptionPatch(`{"user":"o'brien"}`, AdoptionPath("batch", "Job"))
	assert.Equal(t, `kubectl patch job.batch j -n 'it'\''s' --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"o'\''brien\"}"}}}}}'`,
		AdoptionCommand(res, patch))
}

// -o adopt: a comment and the command per object, then the count; an
// empty list says so.
func TestWriteAdoptions(t *testing.T) {
	r := &Report{Findings: []Finding{
		{Rule: RuleMissing, Resource: Resource{Kind: "Pod", Namespace: "a", Name: "p"}, Adopt: &Adoption{Command: "kubectl patch pod p -n a ...", OwnerHint: "hint"}},
		{Rule: RuleInvalid, Resource: Resource{Kind: "Pod", Namespace: "a", Name: "q"}},
	}}
	var b strings.Builder
	require.NoError(t, r.WriteAdoptions(&b))
	assert.Equal(t, "# Pod a/p: hint\nkubectl patch pod p -n a ...\n# 1 objects to adopt\n", b.String())
	b.Reset()
	require.NoError(t, (&Report{}).WriteAdoptions(&b))
	assert.Contains(t, b.String(), "# no object to adopt")
}
