package scenarios

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// A user's Pod carries exactly that user's identity, whether or not the Pod
// had annotations of its own (the two shapes of the patch).
func TestUserPod(t *testing.T) {
	start(t)
	ns := newNamespace(t, webhookMain)
	want := e2e.identity[alice].annotation()
	tests := []struct {
		name        string
		annotations map[string]string
	}{
		{name: "no-annotations", annotations: nil},
		{name: "other-annotations", annotations: map[string]string{"example.com/note": "kept"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client(alice).CoreV1().Pods(ns).Create(t.Context(), newPod(tc.name, tc.annotations), metav1.CreateOptions{})
			require.NoError(t, err, "alice creates a pod")
			stored, err := client(admin).CoreV1().Pods(ns).Get(t.Context(), tc.name, metav1.GetOptions{})
			require.NoError(t, err)
			wantAnnotations := map[string]string{annotationKey: want}
			for k, v := range tc.annotations {
				wantAnnotations[k] = v
			}
			assert.Equal(t, wantAnnotations, stored.Annotations)
		})
	}
}

// A user's Deployment: the template is annotated; the controller-made
// ReplicaSet is admitted unchanged (it already carries the copied value); the
// controller-made Pods keep the user's identity, not the controller's; and
// the number of ReplicaSets stays at one (no YUNIKORN-1627 recreate loop).
func TestDeployment(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	want := e2e.identity[alice].annotation()

	_, err := client(alice).AppsV1().Deployments(ns).Create(ctx, newDeployment("web", 2, nil), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a deployment")
	d, err := client(admin).AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, d.Spec.Template.Annotations[annotationKey], "deployment template")
	assert.NotContains(t, d.Annotations, annotationKey, "the deployment's own metadata is not where the policy writes")

	pods := waitPods(t, ns, "app=web", 2)
	for _, p := range pods {
		assert.Equalf(t, want, p.Annotations[annotationKey], "pod %s", p.Name)
	}
	rss, err := client(admin).AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, rss.Items, 1)
	assert.Equal(t, want, rss.Items[0].Spec.Template.Annotations[annotationKey], "replicaset template")

	// The webhook's log says who asked: the controllers, each under its own
	// service account, and it let their objects through unchanged.
	logs := admissionsFor(t, e2e.webhook, ns)
	// At least: a controller may retry a create that failed after admission.
	assert.GreaterOrEqual(t, countAdmissions(logs, "ReplicaSet", "CREATE", deploymentController, "allowed"), 1, "replicaset created by the deployment controller, admitted unchanged: %+v", logs)
	assert.GreaterOrEqual(t, countAdmissions(logs, "Pod", "CREATE", replicaSetController, "allowed"), 2, "pods created by the replicaset controller, admitted unchanged")
	assert.Zero(t, countAdmissions(logs, "ReplicaSet", "CREATE", "", "mutated"), "no replicaset was patched")
	assert.Zero(t, countAdmissions(logs, "Pod", "CREATE", replicaSetController, "mutated"), "no controller-made pod was patched")
	// The validating twin judged the ReplicaSet; the controller's Pods,
	// which carry alice's record in the canonical form from a trusted
	// controller, the API server judged itself (the twin's match
	// condition, docs/BEHAVIOUR.md §4.9).
	var validated []cluster.AdmissionLog
	for _, a := range logs {
		if a.Stage == "validate" {
			validated = append(validated, a)
		}
	}
	assert.GreaterOrEqual(t, countAdmissions(validated, "ReplicaSet", "CREATE", deploymentController, ""), 1, "the twin judged the replicaset")
	assert.Zero(t, countAdmissions(validated, "Pod", "CREATE", replicaSetController, ""), "the twin was called for the controller's pods")

	// A recreate loop shows within seconds; watch for a while.
	observeStable(t, 10*time.Second, func(ctx context.Context) error {
		rss, err := client(admin).AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return nil // a failed list is no evidence either way
		}
		if len(rss.Items) != 1 {
			return fmt.Errorf("%d replicasets, want 1", len(rss.Items))
		}
		return nil
	})
}

// observeStable checks cond once a second for d; any error fails the test.
func observeStable(t *testing.T, d time.Duration, cond func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		require.NoError(t, cond(t.Context()))
		select {
		case <-t.Context().Done():
			t.Fatal("test context ended during the observation")
		case <-time.After(time.Second):
		}
	}
}

// newCronJob returns a CronJob whose Jobs run one Pod each.
func newCronJob(name, schedule string, suspend bool) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.CronJobSpec{
			Schedule:          schedule,
			Suspend:           ptr.To(suspend),
			ConcurrencyPolicy: batchv1.ForbidConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cron": name}},
				Spec: batchv1.JobSpec{
					BackoffLimit: ptr.To[int32](0),
					Template:     podTemplate(name, nil, corev1.RestartPolicyNever),
				},
			},
		},
	}
}

// A Job that the CronJob controller makes on the one-minute schedule, and
// that Job's Pods, carry the identity of the user who created the CronJob.
func TestCronJobScheduledJob(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	want := e2e.identity[alice].annotation()

	_, err := client(alice).BatchV1().CronJobs(ns).Create(ctx, newCronJob("every-minute", "* * * * *", false), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a cronjob")
	// Once one Job exists, stop the schedule: later runs prove nothing more.
	t.Cleanup(func() {
		_, _ = client(admin).BatchV1().CronJobs(ns).Patch(context.WithoutCancel(ctx), "every-minute",
			types.MergePatchType, []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{})
	})
	cj, err := client(admin).BatchV1().CronJobs(ns).Get(ctx, "every-minute", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, cj.Spec.JobTemplate.Spec.Template.Annotations[annotationKey], "cronjob job template")

	// The next minute boundary is at most 60s away; the controller then
	// acts within seconds. 150s leaves room for a busy machine.
	var job batchv1.Job
	err = cluster.Poll(ctx, 150*time.Second, time.Second, func(ctx context.Context) (bool, error) {
		jobs, err := client(admin).BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "cron=every-minute"})
		if err != nil || len(jobs.Items) == 0 {
			return false, nil
		}
		job = jobs.Items[0]
		return true, nil
	})
	require.NoError(t, err, "wait for the cronjob controller to create a job")
	require.Len(t, job.OwnerReferences, 1)
	assert.Equal(t, cj.UID, job.OwnerReferences[0].UID, "the job belongs to the cronjob")
	assert.Equal(t, want, job.Spec.Template.Annotations[annotationKey], "scheduled job template")

	pods := waitPods(t, ns, "batch.kubernetes.io/job-name="+job.Name, 1)
	assert.Equal(t, want, pods[0].Annotations[annotationKey], "pod of the scheduled job")

	logs := admissionsFor(t, e2e.webhook, ns)
	assert.GreaterOrEqual(t, countAdmissions(logs, "Job", "CREATE", cronJobController, "allowed"), 1, "job created by the cronjob controller, admitted unchanged")
	assert.GreaterOrEqual(t, countAdmissions(logs, "Pod", "CREATE", jobController, "allowed"), 1, "pod created by the job controller, admitted unchanged")
}

// jobFromCronJob builds the Job that `kubectl create job NAME
// --from=cronjob/CJ` sends (k8s.io/kubectl create_job.go): the job
// template's metadata and spec, the annotation
// cronjob.kubernetes.io/instantiate=manual, and a controller reference to
// the CronJob without blockOwnerDeletion.
func jobFromCronJob(name string, cj *batchv1.CronJob) *batchv1.Job {
	annotations := map[string]string{"cronjob.kubernetes.io/instantiate": "manual"}
	for k, v := range cj.Spec.JobTemplate.Annotations {
		annotations[k] = v
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: annotations,
			Labels:      cj.Spec.JobTemplate.Labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: batchv1.SchemeGroupVersion.String(),
				Kind:       "CronJob",
				Name:       cj.Name,
				UID:        cj.UID,
				Controller: ptr.To(true),
			}},
		},
		Spec: cj.Spec.JobTemplate.Spec,
	}
}

// `kubectl create job --from=cronjob/...` by the CronJob's owner: the Job
// arrives with the owner's value already in its template, exactly what the
// policy would write for them, so it is accepted, and its Pods carry the
// identity. Another user doing the same is refused: the value is not theirs.
func TestCreateJobFromCronJob(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	want := e2e.identity[alice].annotation()

	// Suspended: only the manual Job runs.
	_, err := client(alice).BatchV1().CronJobs(ns).Create(ctx, newCronJob("nightly", "0 3 * * *", true), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a cronjob")
	cj, err := client(alice).BatchV1().CronJobs(ns).Get(ctx, "nightly", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, want, cj.Spec.JobTemplate.Spec.Template.Annotations[annotationKey], "cronjob job template")

	_, err = client(alice).BatchV1().Jobs(ns).Create(ctx, jobFromCronJob("nightly-manual", cj), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a job from her cronjob")
	job, err := client(admin).BatchV1().Jobs(ns).Get(ctx, "nightly-manual", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, job.Spec.Template.Annotations[annotationKey], "manual job template")
	assert.Equal(t, "manual", job.Annotations["cronjob.kubernetes.io/instantiate"])
	pods := waitPods(t, ns, "batch.kubernetes.io/job-name=nightly-manual", 1)
	assert.Equal(t, want, pods[0].Annotations[annotationKey], "pod of the manual job")

	_, err = client(bob).BatchV1().Jobs(ns).Create(ctx, jobFromCronJob("nightly-by-bob", cj), metav1.CreateOptions{})
	requireRefused(t, err, workloadsWebhook, e2e.identity[bob].notAllowed())
	_, err = client(admin).BatchV1().Jobs(ns).Get(ctx, "nightly-by-bob", metav1.GetOptions{})
	assert.Truef(t, apierrors.IsNotFound(err), "the refused job is not stored: %v", err)
}

// A StatefulSet's Pods, made by the StatefulSet controller, carry the
// submitter's identity. Parallel pod management: with no kubelet no Pod
// ever becomes Ready, and OrderedReady would stop after the first.
func TestStatefulSetPods(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	want := e2e.identity[alice].annotation()

	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](2),
			ServiceName:         "db",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template:            podTemplate("db", nil, corev1.RestartPolicyAlways),
		},
	}
	_, err := client(alice).AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a statefulset")
	stored, err := client(admin).AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, stored.Spec.Template.Annotations[annotationKey], "statefulset template")

	pods := waitPods(t, ns, "app=db", 2)
	for _, p := range pods {
		assert.Equalf(t, want, p.Annotations[annotationKey], "pod %s", p.Name)
	}
	logs := admissionsFor(t, e2e.webhook, ns)
	assert.GreaterOrEqual(t, countAdmissions(logs, "Pod", "CREATE", statefulSetController, "allowed"), 2, "pods created by the statefulset controller, admitted unchanged")
	assert.Zero(t, countAdmissions(logs, "Pod", "CREATE", statefulSetController, "mutated"), "no controller-made pod was patched")
}

// kubectl rollout restart patches the template's restartedAt annotation: the
// update is accepted, user.info is unchanged, and the new ReplicaSet's Pods
// still carry the identity.
func TestRolloutRestart(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	want := e2e.identity[alice].annotation()

	_, err := client(alice).AppsV1().Deployments(ns).Create(ctx, newDeployment("web", 1, nil), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a deployment")
	waitPods(t, ns, "app=web", 1)

	restartedAt := time.Now().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, restartedAt)
	_, err = client(alice).AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err, "alice restarts the rollout")
	d, err := client(admin).AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, d.Spec.Template.Annotations[annotationKey], "user.info after the restart")
	assert.Equal(t, restartedAt, d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"])

	// The new ReplicaSet has the restartedAt template; with maxSurge 25%
	// (rounded up to 1) it gets one Pod while the old one stays, since no
	// Pod ever becomes ready.
	var newRS *appsv1.ReplicaSet
	err = cluster.Poll(ctx, controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		rss, err := client(admin).AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, nil
		}
		for i := range rss.Items {
			if rss.Items[i].Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == restartedAt {
				newRS = &rss.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "wait for the new replicaset")
	assert.Equal(t, want, newRS.Spec.Template.Annotations[annotationKey], "new replicaset template")
	pods := waitPods(t, ns, "app=web,pod-template-hash="+newRS.Labels["pod-template-hash"], 1)
	assert.Equal(t, want, pods[0].Annotations[annotationKey], "pod of the new replicaset")
}
