package scenarios

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// gangReaderUser is the identity the gang webhook reads with: Pods (the
// placeholders' originators and the ownership check's lists), Namespaces
// and YuniKorn's ConfigMaps, as the chart grants for these settings.
const gangReaderUser = "userinfo-gang"

// webhookGang labels the namespaces of the gang scenarios.
const webhookGang = "gang"

// The shim's gang scheduling annotations and placeholder flag (k8shim
// v1.9.0 pkg/common/constants).
const (
	annotationTaskGroups     = "yunikorn.apache.org/task-groups"
	annotationTaskGroupName  = "yunikorn.apache.org/task-group-name"
	annotationSchedulingPol  = "yunikorn.apache.org/schedulingPolicyParameters"
	annotationPlaceholder    = "internal.yunikorn.apache.org/placeholder"
	gangTimeout              = 90 * time.Second
	gangMembers              = 2
	gangTaskGroup            = "workers"
	gangPlaceholderCPU       = "100m"
	gangPlaceholderMemory    = "64Mi"
	gangSchedulingParameters = "placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard"
)

// TestYuniKornGangPlaceholders: alice's Job with a task group of two
// members, under the real YuniKorn scheduler, with applicationOwnership and
// queueCheck on enforce and the validating twin. YuniKorn creates the gang
// placeholders with its own credentials; the webhook stamps them with the
// identity of the originator Pod they name (alice's, not the scheduler's,
// which the queue check and the ownership check would refuse); YuniKorn
// binds them, replaces them with the Job's Pods, and binds those, in an
// application its REST API reports as alice's. A user's Pod that calls
// itself a placeholder of alice's application is refused.
func TestYuniKornGangPlaceholders(t *testing.T) {
	start(t)
	ctx := t.Context()
	wh := startGangWebhook(t)
	ns := newNamespace(t, webhookGang)
	appID := "app-" + ns + "-gang"

	seen := watchPods(t, ns)
	_, err := client(alice).BatchV1().Jobs(ns).Create(ctx, gangJob("gang", appID), metav1.CreateOptions{})
	require.NoError(t, err, "alice submits the gang job")

	// YuniKorn creates the placeholders, binds them, then deletes each as
	// a Job Pod replaces it. No kubelet runs: a placeholder the shim
	// deleted but that lingers as terminating is finalised here, as a
	// kubelet would (placeholders have a grace period of 0, so the API
	// server normally removes them at once).
	var app cluster.Application
	var real []corev1.Pod
	err = cluster.Poll(ctx, gangTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		l, err := client(admin).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		real = real[:0]
		for _, p := range l.Items {
			if p.Annotations[annotationPlaceholder] == "true" {
				if p.DeletionTimestamp != nil {
					_ = client(admin).CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				}
				continue
			}
			if p.Labels["job-name"] == "gang" && p.Spec.NodeName != "" {
				real = append(real, p)
			}
		}
		if app, err = e2e.scheduler.Application(ctx, appID); err != nil {
			return false, nil
		}
		return len(real) == gangMembers && replaced(app) == gangMembers, nil
	})
	require.NoErrorf(t, err, "YuniKorn replaces the placeholders and binds the Job's Pods (bound Job Pods %d, application %+v, placeholders seen %+v)",
		len(real), app, seen.placeholders())
	// The watch may trail the REST API by a moment.
	var placeholders []seenPlaceholder
	_ = cluster.Poll(ctx, 15*time.Second, pollInterval, func(context.Context) (bool, error) {
		placeholders = seen.placeholders()
		for _, p := range placeholders {
			if !p.deleted {
				return false, nil
			}
		}
		return len(placeholders) >= gangMembers, nil
	})

	// The placeholders: created by the scheduler, stamped with alice's
	// identity, owned by a Job Pod, bound to the node, and gone.
	want := e2e.identity[alice]
	require.Len(t, placeholders, gangMembers, "one placeholder per member of the task group")
	realNames := map[string]bool{}
	for _, p := range real {
		realNames[p.Name] = true
	}
	for _, p := range placeholders {
		assert.Equal(t, want.annotation(), p.annotation, "placeholder %s carries alice's identity, not the scheduler's", p.name)
		assert.Equal(t, appID, p.appID, "placeholder %s is in alice's application", p.name)
		assert.True(t, realNames[p.owner], "placeholder %s is owned by a Job Pod, not %q", p.name, p.owner)
		assert.Equal(t, yunikornNode, p.node, "placeholder %s was bound", p.name)
		assert.True(t, p.deleted, "placeholder %s was replaced and deleted", p.name)
	}
	stages := map[string]int{}
	for _, a := range admissionsFor(t, wh, ns) {
		if a.Kind == "Pod" && a.Operation == "CREATE" && a.User == schedulerUser {
			stages[a.Stage+" "+a.Decision]++
		}
	}
	assert.Equal(t, map[string]int{"mutate mutated": gangMembers, "validate allowed": gangMembers}, stages,
		"the scheduler's placeholder CREATEs, admitted by the policy and by its validating twin")

	// The Job's Pods run as alice, in her application, in her queue.
	for _, p := range real {
		assert.Equal(t, want.annotation(), p.Annotations[annotationKey], "pod %s", p.Name)
		assert.Equal(t, yunikornNode, p.Spec.NodeName, "pod %s", p.Name)
	}
	t.Logf("YuniKorn application %s: user %q groups %q queue %q state %q placeholders %+v", app.ApplicationID, app.User, app.Groups,
		app.QueueName, app.State, app.PlaceholderData)
	assert.Equal(t, want.User, app.User)
	assert.Equal(t, want.Groups, app.Groups)
	assert.Equal(t, "root.alice", app.QueueName)
	require.Len(t, app.PlaceholderData, 1)
	assert.Equal(t, gangTaskGroup, app.PlaceholderData[0].TaskGroupName)
	assert.EqualValues(t, gangMembers, app.PlaceholderData[0].Count)
	assert.Zero(t, app.PlaceholderData[0].TimedOut)
	used := 0
	for _, a := range app.Allocations {
		if a.PlaceholderUsed {
			used++
		}
	}
	assert.Equal(t, gangMembers, used, "each Job Pod took a placeholder's place: %+v", app.Allocations)
	events, err := client(admin).CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range events.Items {
		assert.NotEqual(t, "PlaceholderCreateFailed", e.Reason, "YuniKorn did not fall back to scheduling without placeholders: %s", e.Message)
	}

	// bob calls his Pod a placeholder of alice's application, with the
	// ownerReference the shim would set: only the scheduler's placeholders
	// are recognised, so it is his Pod, and it may not join her
	// application; claiming her identity is refused outright.
	t.Run("UserPlaceholderRefused", func(t *testing.T) { testUserPlaceholderRefused(t, ns, appID, placeholders[0]) })
}

// testUserPlaceholderRefused: bob's Pods flagged as placeholders of alice's
// application, owned by her originator Pod ph.owner, are refused.
func testUserPlaceholderRefused(t *testing.T, ns, appID string, ph seenPlaceholder) {
	ctx := t.Context()
	want := e2e.identity[alice]
	originator := ph.owner
	fake := func(name string, annotations map[string]string) *corev1.Pod {
		p := ykPod(name, appID, annotations)
		p.Annotations[annotationPlaceholder] = "true"
		p.Annotations[annotationTaskGroupName] = gangTaskGroup
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: originator, UID: types.UID(ph.ownerUID)}}
		return p
	}
	_, err := client(bob).CoreV1().Pods(ns).Create(ctx, fake("bob-placeholder", map[string]string{}), metav1.CreateOptions{})
	require.Error(t, err, "bob's fake placeholder joins alice's application")
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	assert.EqualValues(t, 403, status.Status().Code)
	msg := status.Status().Message
	assert.Equal(t, fmt.Sprintf("admission webhook %q denied the request: application %s is owned by another user: a pod of user bob may not join it"+ownerHint, workloadsWebhook, appID), msg)

	_, err = client(bob).CoreV1().Pods(ns).Create(ctx, fake("bob-as-alice", map[string]string{annotationKey: want.annotation()}), metav1.CreateOptions{})
	requireRefused(t, err, workloadsWebhook, e2e.identity[bob].notAllowed())
}

// gangJob is a Job of gangMembers Pods in one task group, each requesting
// exactly the task group's minimum (the placeholder it replaces).
func gangJob(name, appID string) *batchv1.Job {
	tpl := podTemplate(name, map[string]string{
		annotationTaskGroupName: gangTaskGroup,
		annotationTaskGroups: fmt.Sprintf(`[{"name":%q,"minMember":%d,"minResource":{"cpu":%q,"memory":%q}}]`,
			gangTaskGroup, gangMembers, gangPlaceholderCPU, gangPlaceholderMemory),
		annotationSchedulingPol: gangSchedulingParameters,
	}, corev1.RestartPolicyNever)
	tpl.Labels[appIDLabel] = appID
	tpl.Spec.SchedulerName = schedulerName
	requests := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(gangPlaceholderCPU),
		corev1.ResourceMemory: resource.MustParse(gangPlaceholderMemory),
	}
	for i := range tpl.Spec.Containers {
		tpl.Spec.Containers[i].Resources = corev1.ResourceRequirements{Requests: requests, Limits: requests}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](gangMembers), Completions: ptr.To[int32](gangMembers),
			Template: tpl,
		},
	}
}

// replaced is how many placeholders real Pods replaced.
func replaced(app cluster.Application) int {
	n := 0
	for _, d := range app.PlaceholderData {
		n += int(d.Replaced)
	}
	return n
}

// startGangWebhook starts a webhook of the gang scenarios with the suite's
// settings and every check on enforce (applicationOwnership, queueCheck,
// the validating twin), the suite's scheduler as schedulerUsers, reading
// as gangReaderUser with the access the chart grants for these settings;
// it registers the shipped mutating and validating configurations for the
// namespaces labelled webhookGang.
func startGangWebhook(t *testing.T) *cluster.Webhook {
	t.Helper()
	ctx := t.Context()
	adm := client(admin)

	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-userinfo-gang"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: read},
		},
	}
	_, err := adm.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	bindClusterRole(t, role.Name, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: gangReaderUser})
	cmRole := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-userinfo-gang", Namespace: schedulerNamespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: read}},
	}
	_, err = adm.RbacV1().Roles(schedulerNamespace).Create(ctx, cmRole, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = adm.RbacV1().RoleBindings(schedulerNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-userinfo-gang"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: cmRole.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: gangReaderUser}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	raw, err := os.ReadFile(e2e.settingsFile)
	require.NoError(t, err)
	var settings map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &settings))
	settings["applicationOwnership"] = "enforce"
	settings["queueCheck"] = map[string]any{"mode": "enforce", "namespace": schedulerNamespace}
	settings["schedulerUsers"] = []string{"^" + schedulerUser + "$"}
	out, err := yaml.Marshal(settings)
	require.NoError(t, err)
	settingsFile := filepath.Join(e2e.cluster.Dir, "settings-gang.yaml")
	require.NoError(t, os.WriteFile(settingsFile, out, 0o600))
	overlay, err := deploymentFlagOfShipped()
	require.NoError(t, err)
	kubeconfig, err := e2e.cluster.WriteKubeconfig(gangReaderUser)
	require.NoError(t, err)
	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-gang", Binary: e2e.serveBinary, SettingsFile: settingsFile,
		ExtraArgs: []string{"--kubeconfig", kubeconfig, "--validate-overlay", overlay},
	})
	require.NoError(t, err, "start the gang webhook")
	t.Cleanup(func() { assert.NoError(t, wh.Stop(), "stop the gang webhook") })

	mwc, err := e2e.registerWebhook(ctx, "yunikorn-userinfo-e2e-gang", wh, webhookGang)
	require.NoError(t, err)
	vwc, err := cluster.AdaptValidatingWebhookConfiguration(e2e.vwcManifest, "yunikorn-userinfo-e2e-gang-validate", wh.BaseURL,
		e2e.cluster.PKI.CAPEM, map[string]string{webhookLabel: webhookGang})
	require.NoError(t, err)
	_, err = adm.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		bg := context.WithoutCancel(ctx)
		assert.NoError(t, adm.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(bg, mwc.Name, metav1.DeleteOptions{}))
		assert.NoError(t, adm.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(bg, vwc.Name, metav1.DeleteOptions{}))
	})
	return wh
}

// deploymentFlagOfShipped is the --validate-overlay of the chart's
// Deployment, as the suite's main webhook runs it.
func deploymentFlagOfShipped() (string, error) {
	standalone, err := cluster.ReadRendering(chartRendering(e2e.repo, "E2E_CHART_STANDALONE", "standalone.yaml"))
	if err != nil {
		return "", err
	}
	deployment, err := standalone.One("Deployment")
	if err != nil {
		return "", err
	}
	return deploymentFlag(deployment, "validate-overlay")
}

// seenPlaceholder is what a watch saw of one placeholder over its life.
type seenPlaceholder struct {
	name, annotation, appID, owner, ownerUID, node string
	deleted                                        bool
}

// podWatch records every placeholder a namespace's Pod watch shows.
type podWatch struct {
	mu   sync.Mutex
	seen map[string]*seenPlaceholder
	list []string // names, in the order first seen
}

// watchPods watches the Pods of ns until the test ends.
func watchPods(t *testing.T, ns string) *podWatch {
	t.Helper()
	w, err := client(admin).CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	pw := &podWatch{seen: map[string]*seenPlaceholder{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Annotations[annotationPlaceholder] != "true" {
				continue
			}
			pw.record(p, ev.Type == watch.Deleted)
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		<-done
	})
	return pw
}

func (pw *podWatch) record(p *corev1.Pod, deleted bool) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	s, ok := pw.seen[p.Name]
	if !ok {
		s = &seenPlaceholder{name: p.Name}
		pw.seen[p.Name] = s
		pw.list = append(pw.list, p.Name)
	}
	s.annotation, s.appID = p.Annotations[annotationKey], p.Labels["yunikorn.apache.org/app-id"]
	for _, o := range p.OwnerReferences {
		if o.Kind == "Pod" {
			s.owner, s.ownerUID = o.Name, string(o.UID)
		}
	}
	if p.Spec.NodeName != "" {
		s.node = p.Spec.NodeName
	}
	s.deleted = s.deleted || deleted
}

// placeholders returns a copy of what was seen, in order.
func (pw *podWatch) placeholders() []seenPlaceholder {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	out := make([]seenPlaceholder, 0, len(pw.list))
	for _, n := range pw.list {
		out = append(out, *pw.seen[n])
	}
	return out
}
