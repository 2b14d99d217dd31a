package scenarios

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// How long YuniKorn may take to see a Pod, place its application and bind
// it (it schedules in cycles of about a second).
const scheduleTimeout = 60 * time.Second

// ykPod is a Pod for the YuniKorn scheduler, in an application of its own.
func ykPod(name, appID string, annotations map[string]string) *corev1.Pod {
	p := newPod(name, annotations)
	p.Labels = map[string]string{appIDLabel: appID}
	p.Spec.SchedulerName = schedulerName
	return p
}

// waitScheduled waits until YuniKorn has bound the Pod to the suite's node
// and reports its application with an allocation, and returns the
// application.
func waitScheduled(t *testing.T, ns, pod, appID string) cluster.Application {
	t.Helper()
	var app cluster.Application
	var nodeName string
	err := cluster.Poll(t.Context(), scheduleTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		p, err := client(admin).CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		nodeName = p.Spec.NodeName
		if nodeName == "" {
			return false, nil
		}
		app, err = e2e.scheduler.Application(ctx, appID)
		return err == nil && len(app.Allocations) > 0, nil
	})
	require.NoErrorf(t, err, "YuniKorn schedules pod %s/%s (node %q, application %+v)", ns, pod, nodeName, app)
	assert.Equal(t, yunikornNode, nodeName)
	return app
}

// A user's own Pod: YuniKorn binds it, and the application it creates
// belongs to the user and groups the API server authenticated, in the
// user's queue. The Binding YuniKorn sends carries no user.info, so the
// match condition keeps it from the webhook.
func TestYuniKornUserPod(t *testing.T) {
	start(t)
	ns := newNamespace(t, webhookMain)
	appID := "app-" + ns + "-alice"
	_, err := client(alice).CoreV1().Pods(ns).Create(t.Context(), ykPod("alice-pod", appID, nil), metav1.CreateOptions{})
	require.NoError(t, err)

	app := waitScheduled(t, ns, "alice-pod", appID)
	t.Logf("YuniKorn application %s: user %q groups %q queue %q state %q", app.ApplicationID, app.User, app.Groups, app.QueueName, app.State)
	id := e2e.identity[alice]
	assert.Equal(t, id.User, app.User)
	assert.Equal(t, id.Groups, app.Groups)
	assert.Equal(t, "root.alice", app.QueueName)
	for _, a := range admissionsFor(t, e2e.webhook, ns) {
		assert.NotEqual(t, "Binding", a.Kind, "the scheduler's binding carries no user.info and never reaches the webhook: %+v", a)
	}
}

// Pods a controller makes from a user's Deployment: created under the
// replicaset controller's identity (its service account, or
// system:kube-controller-manager with shared credentials), scheduled as the
// user.
func TestYuniKornDeployment(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	appID := "app-" + ns + "-web"
	d := newDeployment("web", 2, nil)
	d.Spec.Template.Labels[appIDLabel] = appID
	d.Spec.Template.Spec.SchedulerName = schedulerName
	_, err := client(alice).AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)

	pods := waitPods(t, ns, "app=web", 2)
	logs := admissionsFor(t, e2e.webhook, ns)
	assert.GreaterOrEqual(t, countAdmissions(logs, "Pod", "CREATE", e2e.controller(replicaSetController), "allowed"), 2,
		"the pods were created by %s: %+v", e2e.controller(replicaSetController), logs)
	for _, p := range pods {
		app := waitScheduled(t, ns, p.Name, appID)
		assert.Equal(t, e2e.identity[alice].User, app.User, "pod %s: the application is alice's, not the controller's", p.Name)
		assert.Equal(t, e2e.identity[alice].Groups, app.Groups)
		assert.Equal(t, "root.alice", app.QueueName)
	}
	app, err := e2e.scheduler.Application(ctx, appID)
	require.NoError(t, err)
	assert.Len(t, app.Allocations, 2, "both pods in alice's one application")

	// alice's per-user limit counts the controller-made Pods as hers; the
	// controller's service account owns nothing.
	usage, err := e2e.scheduler.UserUsage(ctx, alice)
	require.NoError(t, err)
	require.NotNil(t, usage.Queues)
	t.Logf("YuniKorn usage of alice at %s: %v, limit %v pods / %d applications", usage.Queues.QueuePath,
		usage.Queues.ResourceUsage, usage.Queues.MaxResources, usage.Queues.MaxApplications)
	assert.Equal(t, uint64(100), usage.Queues.MaxApplications, "alice's limit applies at root")
	q := findUsage(usage.Queues, appID)
	require.NotNil(t, q, "alice's usage lists the deployment's application: %+v", usage.Queues)
	assert.Equal(t, "root.alice", q.QueuePath)
	assert.GreaterOrEqual(t, q.ResourceUsage["pods"], int64(2), "both controller-made pods count against alice")
	rsUsage, err := e2e.scheduler.UserUsage(ctx, e2e.controller(replicaSetController))
	assert.True(t, err != nil || findUsage(rsUsage.Queues, appID) == nil, "the controller is charged for nothing: %+v", rsUsage)
	bobUsage, err := e2e.scheduler.UserUsage(ctx, bob)
	assert.True(t, err != nil || findUsage(bobUsage.Queues, appID) == nil, "bob is charged for nothing of alice's: %+v", bobUsage)
}

// findUsage returns the deepest queue of a usage tree that runs app (each
// ancestor lists it too).
func findUsage(q *cluster.QueueUsage, app string) *cluster.QueueUsage {
	if q == nil {
		return nil
	}
	for i := range q.Children {
		if found := findUsage(&q.Children[i], app); found != nil {
			return found
		}
	}
	if slices.Contains(q.RunningApplications, app) {
		return q
	}
	return nil
}

// Every workload kind whose Pods a controller makes: YuniKorn binds them as
// alice, whichever controller created them.
func TestYuniKornWorkloads(t *testing.T) {
	start(t)
	ns := newNamespace(t, webhookMain)
	template := func(name string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
		tpl := podTemplate(name, nil, restart)
		tpl.Labels[appIDLabel] = "app-" + ns + "-" + name
		tpl.Spec.SchedulerName = schedulerName
		return tpl
	}
	selector := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	}
	cs := client(alice)
	tests := []struct {
		name   string
		create func(ctx context.Context) error
	}{
		{"job", func(ctx context.Context) error {
			_, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "job"},
				Spec: batchv1.JobSpec{Template: template("job", corev1.RestartPolicyNever)}}, metav1.CreateOptions{})
			return err
		}},
		{"cron", func(ctx context.Context) error {
			cj := newCronJob("cron", "* * * * *", false)
			cj.Spec.JobTemplate.Spec.Template = template("cron", corev1.RestartPolicyNever)
			_, err := cs.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{})
			return err
		}},
		{"sts", func(ctx context.Context) error {
			_, err := cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "sts"},
				Spec: appsv1.StatefulSetSpec{ServiceName: "sts", Selector: selector("sts"),
					Template: template("sts", corev1.RestartPolicyAlways)}}, metav1.CreateOptions{})
			return err
		}},
		{"ds", func(ctx context.Context) error {
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds"},
				Spec: appsv1.DaemonSetSpec{Selector: selector("ds"), Template: template("ds", corev1.RestartPolicyAlways)}},
				metav1.CreateOptions{})
			return err
		}},
		{"rc", func(ctx context.Context) error {
			tpl := template("rc", corev1.RestartPolicyAlways)
			_, err := cs.CoreV1().ReplicationControllers(ns).Create(ctx, &corev1.ReplicationController{
				ObjectMeta: metav1.ObjectMeta{Name: "rc"},
				Spec:       corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](1), Selector: map[string]string{"app": "rc"}, Template: &tpl},
			}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, tc.create(t.Context()), "alice creates the %s", tc.name)
			timeout := controllerTimeout
			if tc.name == "cron" {
				timeout = 150 * time.Second // the next minute boundary, then the job
			}
			var pods []corev1.Pod
			err := cluster.Poll(t.Context(), timeout, time.Second, func(ctx context.Context) (bool, error) {
				l, err := client(admin).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + tc.name})
				if err != nil {
					return false, nil
				}
				pods = l.Items
				return len(pods) > 0, nil
			})
			require.NoError(t, err, "the controller makes a pod")
			if tc.name == "cron" {
				_, _ = client(admin).BatchV1().CronJobs(ns).Patch(t.Context(), "cron", types.MergePatchType,
					[]byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{})
			}
			app := waitScheduled(t, ns, pods[0].Name, "app-"+ns+"-"+tc.name)
			assert.Equal(t, e2e.identity[alice].User, app.User, "the %s's pod runs as alice", tc.name)
			assert.Equal(t, e2e.identity[alice].Groups, app.Groups)
			assert.Equal(t, "root.alice", app.QueueName)
		})
	}
}

// A user YuniKorn's submit ACL does not admit: the webhook records dave
// faithfully, and YuniKorn rejects the application; dave sees it on the Pod
// (Failed, ApplicationRejected) and in an event.
func TestYuniKornSubmitACL(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	appID := "app-" + ns + "-dave"
	_, err := client(dave).CoreV1().Pods(ns).Create(ctx, ykPod("dave-pod", appID, nil), metav1.CreateOptions{})
	require.NoError(t, err, "the webhook admits dave's pod: whether dave may run is YuniKorn's call")

	var pod *corev1.Pod
	err = cluster.Poll(ctx, scheduleTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		pod, err = client(dave).CoreV1().Pods(ns).Get(ctx, "dave-pod", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodFailed, nil
	})
	require.NoError(t, err, "YuniKorn fails dave's pod (status %+v)", pod.Status)
	t.Logf("what dave sees on the pod: phase %s, reason %q, message %q", pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
	assert.Equal(t, "ApplicationRejected", pod.Status.Reason)
	assert.Empty(t, pod.Spec.NodeName, "never bound")
	assert.Equal(t, e2e.identity[dave].annotation(), pod.Annotations[annotationKey])

	app := requireRejected(t, appID)
	t.Logf("YuniKorn: application %s of %q %q rejected: %s", appID, app.User, app.Groups, app.RejectedMessage)
	assert.Equal(t, "dave", app.User)
	assert.Equal(t, e2e.identity[dave].Groups, app.Groups)

	events, err := client(admin).CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=dave-pod"})
	require.NoError(t, err)
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason+": "+e.Message)
	}
	t.Logf("events of dave's pod: %q", reasons)
}

// A front-end allowed by externalUsers (livy) submits for carol: YuniKorn's
// application is carol's, placed by carol's group. bob's own Pod lands in
// his namespace's queue, as the tag rule does for his group; bob claiming
// carol is refused before YuniKorn sees anything.
func TestYuniKornOnBehalf(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	carol := map[string]string{annotationKey: `{"user":"carol","groups":["analysts"]}`}

	appCarol := "app-" + ns + "-carol"
	_, err := client(livy).CoreV1().Pods(ns).Create(ctx, ykPod("for-carol", appCarol, carol), metav1.CreateOptions{})
	require.NoError(t, err, "livy submits for carol")
	app := waitScheduled(t, ns, "for-carol", appCarol)
	assert.Equal(t, "carol", app.User)
	assert.Equal(t, []string{"analysts"}, app.Groups)
	assert.Equal(t, "root.analytics", app.QueueName, "placed by carol's group, which only the annotation names")

	appBob := "app-" + ns + "-bob"
	_, err = client(bob).CoreV1().Pods(ns).Create(ctx, ykPod("bob-pod", appBob, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app = waitScheduled(t, ns, "bob-pod", appBob)
	assert.Equal(t, e2e.identity[bob].User, app.User)
	assert.Equal(t, "root."+ns, app.QueueName, "bob is in ops: the tag rule puts him in his namespace's queue")

	_, err = client(bob).CoreV1().Pods(ns).Create(ctx, ykPod("bob-as-carol", "app-"+ns+"-forged", carol), metav1.CreateOptions{})
	requireRefused(t, err, workloadsWebhook, e2e.identity[bob].notAllowed())
	_, err = e2e.scheduler.Application(ctx, "app-"+ns+"-forged")
	assert.Error(t, err, "YuniKorn never heard of the refused pod")
}

// A name Kubernetes accepts but YuniKorn's user name rules do not (an
// apostrophe): the policy records it as the API server authenticated it,
// never a substitute (that would charge someone else), and YuniKorn
// rejects the application, which the user sees on the Pod.
func TestYuniKornUnusableUserName(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	appID := "app-" + ns + "-obrien"
	_, err := client(obrien).CoreV1().Pods(ns).Create(ctx, ykPod("obrien-pod", appID, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	stored, err := client(admin).CoreV1().Pods(ns).Get(ctx, "obrien-pod", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, e2e.identity[obrien].annotation(), stored.Annotations[annotationKey], "recorded verbatim")

	var pod *corev1.Pod
	err = cluster.Poll(ctx, scheduleTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		pod, err = client(admin).CoreV1().Pods(ns).Get(ctx, "obrien-pod", metav1.GetOptions{})
		return err == nil && (pod.Status.Phase == corev1.PodFailed || pod.Spec.NodeName != ""), nil
	})
	require.NoError(t, err, "YuniKorn decides on the pod (status %+v)", pod.Status)
	t.Logf("what o'brien sees on the pod: phase %s, reason %q, message %q, node %q", pod.Status.Phase, pod.Status.Reason,
		pod.Status.Message, pod.Spec.NodeName)
	assert.Equal(t, corev1.PodFailed, pod.Status.Phase)
	assert.Equal(t, "ApplicationRejected", pod.Status.Reason)
	app := requireRejected(t, appID)
	t.Logf("YuniKorn: %s", app.RejectedMessage)
	assert.Contains(t, app.RejectedMessage, "invalid username")
}

// controller is the identity a controller acts as in this run: its service
// account, or system:kube-controller-manager with shared credentials.
func (s *suite) controller(serviceAccount string) string {
	if s.sharedControllerCredentials {
		return "system:kube-controller-manager"
	}
	return serviceAccount
}

// A queue the Pod names (the provided rule) is used when it exists, and the
// application is still the submitter's.
func TestYuniKornProvidedQueue(t *testing.T) {
	start(t)
	ns := newNamespace(t, webhookMain)
	appID := "app-" + ns + "-shared"
	p := ykPod("alice-shared", appID, nil)
	p.Labels["queue"] = "root.shared"
	_, err := client(alice).CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	require.NoError(t, err)
	app := waitScheduled(t, ns, "alice-shared", appID)
	assert.Equal(t, "root.shared", app.QueueName)
	assert.Equal(t, e2e.identity[alice].User, app.User)
	assert.Equal(t, e2e.identity[alice].Groups, app.Groups)
}

// requireRejected returns YuniKorn's record of the application it
// rejected.
func requireRejected(t *testing.T, appID string) cluster.Application {
	t.Helper()
	rejected, err := e2e.scheduler.RejectedApplications(t.Context())
	require.NoError(t, err)
	i := slices.IndexFunc(rejected, func(a cluster.Application) bool { return a.ApplicationID == appID })
	require.GreaterOrEqual(t, i, 0, "YuniKorn lists the application as rejected")
	return rejected[i]
}
