package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// webhookReplaced labels the namespaces of the webhook that takes over
// from YuniKorn's admission controller in TestYuniKornAdmissionReplaced.
const webhookReplaced = "ykac-replaced"

// TestYuniKornAdmissionReplaced replaces YuniKorn's real admission
// controller, with its scheduler, in an older order than
// docs/MIGRATING.md's (TestSwitchNoUnguardedMoment runs that one): the
// hand-over before this webhook enforces, which shows monitor mode
// admitting a forged value, and the scheduling jobs taken over: a namespace
// it processes and one it bypasses, its configuration in yunikorn-configs
// with YuniKorn's string values (access control and filtering);
//
//  1. `migrate --kubeconfig` converts it, filtering into `scheduling`;
//  3. this webhook serves the result beside YuniKorn's, in --monitor;
//  4. bypassAuth "true" hands user.info over: a forged value is now
//     admitted, with a warning and a count (monitor mode), then refused
//     once this webhook enforces;
//  6. YuniKorn's controller is removed: this webhook alone gives Pods of
//     the processed namespace the scheduler name, application ID labels and
//     allow-preemption YuniKorn's gave them (compared with a Pod YuniKorn's
//     controller admitted there), YuniKorn schedules them as their
//     submitter in the queue of its placement rules, and the bypassed
//     namespace's Pods are left to the default scheduler;
//
// and `audit` afterwards finds the Pod admitted in monitor mode with a
// forged value.
func TestYuniKornAdmissionReplaced(t *testing.T) {
	start(t)
	ctx := t.Context()
	adm := client(admin)
	aliceID := e2e.identity[alice]

	// Namespaces with names of our choosing, so YuniKorn's patterns name
	// them: a team namespace it processes, one it bypasses.
	suffix := rand.String(5)
	team, bypassed := "e2e-ykrep-team-"+suffix, "e2e-ykrep-bypass-"+suffix
	yk := startYKAdmission(t, map[string]string{
		"admissionController.accessControl.bypassAuth":       "false",
		"admissionController.accessControl.trustControllers": "true",
		"admissionController.accessControl.externalUsers":    "^" + livy + "$,",
		"admissionController.filtering.processNamespaces":    "^e2e-ykrep-[a-z]+-" + suffix + "$",
		"admissionController.filtering.bypassNamespaces":     "^kube-system$, ^" + bypassed + "$",
		"admissionController.filtering.generateUniqueAppId":  "false",
	})
	for _, ns := range []string{team, bypassed} {
		_, err := adm.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{webhookLabel: webhookReplaced},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = adm.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{}) })
		_, err = prepareNamespace(ctx, adm, ns)
		require.NoError(t, err)
	}
	yk.cover(t, team)
	// YuniKorn's controller checks user.info in every namespace it is
	// called for, bypassed or not: a forged value is refused there too.
	labelNamespace(t, bypassed, ykAdmissionLabel, yk.ns)
	forCarol := map[string]string{annotationKey: `{"user":"carol","groups":["analysts"]}`}
	require.NoError(t, cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		_, err := client(bob).CoreV1().Pods(bypassed).Create(ctx, newPod("forged", forCarol), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	}), "YuniKorn's controller in force in %s", bypassed)

	// Before: what YuniKorn's controller does with alice's Pods.
	ykMade, err := client(alice).CoreV1().Pods(team).Create(ctx, newPod("yk-made", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, schedulerName, ykMade.Spec.SchedulerName)
	appID := ykMade.Labels[canonicalAppIDKey]
	require.NotEmpty(t, appID, "YuniKorn's controller labels the Pod with an application ID: %v", ykMade.Labels)
	assert.Equal(t, aliceID.annotation(), ykMade.Annotations[annotationKey])
	app := waitScheduled(t, team, "yk-made", appID)
	assert.Equal(t, aliceID.User, app.User)
	ykBypassed, err := client(alice).CoreV1().Pods(bypassed).Create(ctx, newPod("yk-bypassed", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, schedulerName, ykBypassed.Spec.SchedulerName, "YuniKorn's controller leaves a bypassed namespace to the default scheduler")

	// 1. Convert, while YuniKorn's controller is in charge.
	kubeconfig, err := e2e.cluster.WriteKubeconfig(admin)
	require.NoError(t, err)
	stdout, stderr := runCLI(t, "migrate", "--kubeconfig", kubeconfig, "-n", yk.ns)
	t.Logf("migrate printed:\n%s\non stderr:\n%s", stdout, stderr)
	report := strings.Split(stderr, "\n")
	for _, key := range []string{"processNamespaces", "bypassNamespaces", "generateUniqueAppId"} {
		want := "admissionController.filtering." + key + ": mapped: "
		assert.Truef(t, hasLinePrefix(report, want), "no report line starting %q", want)
	}
	var settings map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(stdout), &settings))
	assert.Equal(t, false, settings["bypassAuth"])
	assert.Equal(t, []any{"^" + livy + "$"}, settings["externalUsers"])
	// Not fatal here: without it the steps below still run, and step 6
	// fails on what this webhook does not do.
	scheduling, ok := settings["scheduling"].(map[string]any)
	if assert.Truef(t, ok, "migrate maps admissionController.filtering.* into settings.scheduling: %v", settings) {
		assert.Equal(t, []any{"^e2e-ykrep-[a-z]+-" + suffix + "$"}, scheduling["processNamespaces"])
		assert.Equal(t, []any{"^kube-system$", "^" + bypassed + "$"}, scheduling["bypassNamespaces"])
		if v, ok := scheduling["generateUniqueAppIds"]; ok {
			assert.Equal(t, false, v)
		}
		if v, ok := scheduling["schedulerName"]; ok {
			assert.Equal(t, schedulerName, v)
		}
	}
	settingsFile := filepath.Join(e2e.cluster.Dir, "settings-replaced-"+suffix+".yaml")
	require.NoError(t, os.WriteFile(settingsFile, []byte(stdout), 0o600))

	// 3. Install it beside YuniKorn's controller (after it by name), in
	// monitor mode, as a service account that may read what the
	// scheduling jobs read (deploy/webhook/scheduling/rbac.yaml).
	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-replaced-" + suffix, Binary: e2e.serveBinary, SettingsFile: settingsFile,
		ExtraArgs: []string{"--monitor", "--kubeconfig", schedulingReader(t, yk.ns)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, wh.Stop()) })
	mwc, err := e2e.registerWebhook(ctx, "yunikorn-userinfo-e2e-replaced", wh, webhookReplaced)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = adm.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), mwc.Name, metav1.DeleteOptions{})
	})
	require.Greater(t, mwc.Name, cluster.YKMutations)
	waitCalled(t, wh, team)

	// 4. Hand user.info over.
	require.NoError(t, yk.setConfig(ctx, map[string]string{"admissionController.accessControl.bypassAuth": "true"}))
	aliceWarn, warnings := clientWithWarnings(t, alice)
	require.NoError(t, cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		_, err := client(alice).CoreV1().Pods(team).Create(ctx, newPod("forged", forCarol), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	}), "YuniKorn's controller no longer checks user.info")

	// Monitor mode: alice's own Pod is recorded; her Pod claiming carol, in
	// her application, is admitted as sent, with a warning and a count.
	shared := "app-" + team + "-shared"
	own := ykPod("alice-own", shared, nil)
	own.Spec.SchedulerName = ""
	p, err := aliceWarn.CoreV1().Pods(team).Create(ctx, own, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, aliceID.annotation(), p.Annotations[annotationKey])
	waitScheduled(t, team, "alice-own", shared)
	warnings.take()
	time.Sleep(1100 * time.Millisecond) // audit finds the application's owner by the oldest Pod (seconds)
	before, err := metricValue(ctx, wh.MetricsURL, `yunikorn_userinfo_monitor_would_refuse_total{rule="create: present, submitter not allowed",stage="mutate"}`)
	require.NoError(t, err)
	forged := ykPod("alice-as-carol", shared, forCarol)
	forged.Spec.SchedulerName = ""
	p, err = aliceWarn.CoreV1().Pods(team).Create(ctx, forged, metav1.CreateOptions{})
	require.NoError(t, err, "monitor mode admits what it would refuse")
	assert.Equal(t, forCarol[annotationKey], p.Annotations[annotationKey], "admitted as sent")
	got := warnings.take()
	assert.True(t, slices.ContainsFunc(got, func(w string) bool {
		return strings.Contains(w, "monitor mode: would be refused: "+aliceID.notAllowed())
	}), "alice is warned: %q", got)
	after, err := metricValue(ctx, wh.MetricsURL, `yunikorn_userinfo_monitor_would_refuse_total{rule="create: present, submitter not allowed",stage="mutate"}`)
	require.NoError(t, err)
	assert.Equal(t, before+1, after, "counted")

	// Then enforcing (the same webhook restarted without --monitor, as a
	// rollout would).
	require.NoError(t, wh.Stop())
	wh.Process.Args = slices.DeleteFunc(wh.Process.Args, func(a string) bool { return a == "--monitor" })
	require.NoError(t, wh.Start(ctx))
	var last error
	require.NoError(t, cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		_, last = client(bob).CoreV1().Pods(team).Create(ctx, newPod("forged", forCarol), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil, nil
	}), "this webhook enforces")
	requireRefused(t, last, workloadsWebhook, e2e.identity[bob].notAllowed())

	// 6. Remove YuniKorn's controller.
	require.NoError(t, yk.ac.Remove(ctx))
	for _, gone := range []func() error{
		func() error {
			_, err := adm.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, cluster.YKMutations, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := adm.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, cluster.YKValidations, metav1.GetOptions{})
			return err
		},
	} {
		assert.Error(t, gone(), "its webhook configurations are gone")
	}

	// This webhook alone does its jobs.
	p, err = client(alice).CoreV1().Pods(team).Create(ctx, newPod("ours-made", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, schedulerName, p.Spec.SchedulerName)
	assert.Equal(t, ykMade.Labels, p.Labels, "the application ID labels YuniKorn's controller gave")
	assert.Equal(t, ykMade.Annotations, p.Annotations, "user.info and allow-preemption as YuniKorn's controller wrote them")
	app = waitScheduled(t, team, "ours-made", appID)
	assert.Equal(t, aliceID.User, app.User)
	assert.Equal(t, aliceID.Groups, app.Groups)
	assert.Equal(t, "root.alice", app.QueueName)
	assert.Len(t, app.Allocations, 2, "YuniKorn's Pod and this webhook's in one application")

	p, err = client(livy).CoreV1().Pods(team).Create(ctx, ykPod("livy-for-carol", "app-"+team+"-carol", forCarol), metav1.CreateOptions{})
	require.NoError(t, err, "the migrated external user submits for carol")
	assert.Equal(t, forCarol[annotationKey], p.Annotations[annotationKey])
	app = waitScheduled(t, team, "livy-for-carol", "app-"+team+"-carol")
	assert.Equal(t, "carol", app.User)
	assert.Equal(t, "root.analytics", app.QueueName)

	_, err = client(bob).CoreV1().Pods(team).Create(ctx, newPod("bob-as-carol", forCarol), metav1.CreateOptions{})
	requireRefused(t, err, workloadsWebhook, e2e.identity[bob].notAllowed())

	p, err = client(alice).CoreV1().Pods(bypassed).Create(ctx, newPod("ours-bypassed", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, ykBypassed.Spec.SchedulerName, p.Spec.SchedulerName, "a bypassed namespace is left to the default scheduler")
	assert.NotEqual(t, schedulerName, p.Spec.SchedulerName)
	assert.Empty(t, p.Labels[canonicalAppIDKey])

	// Afterwards, audit finds the Pod admitted in monitor mode with a
	// forged value: carol's Pod in alice's application.
	out, progress := runCLI(t, "audit", "--kubeconfig", kubeconfig, "-n", team, "-o", "json")
	t.Logf("audit:\n%s\n%s", out, progress)
	var audit struct {
		Findings []struct {
			Rule     string                                 `json:"rule"`
			User     string                                 `json:"user"`
			AppID    string                                 `json:"applicationId"`
			Resource struct{ Kind, Namespace, Name string } `json:"resource"`
		} `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &audit))
	var found []string
	for _, f := range audit.Findings {
		found = append(found, f.Resource.Kind+" "+f.Resource.Name+" "+f.Rule+" "+f.User+" "+f.AppID)
	}
	assert.Equal(t, []string{"Pod alice-as-carol application-id-shared carol " + shared}, found)
}

// schedulingReader returns the kubeconfig of a service account in ns that
// may get, list and watch Namespaces and PriorityClasses, as the chart
// grants the webhook for its scheduling jobs.
func schedulingReader(t *testing.T, ns string) string {
	t.Helper()
	ctx := t.Context()
	cs := client(admin)
	const sa = "yunikorn-userinfo"
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	require.NoError(t, err)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-yunikorn-userinfo-scheduling-" + ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, role.Name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubeconfig, err := e2e.cluster.WriteTokenKubeconfig("yunikorn-userinfo-"+ns, tok.Status.Token)
	require.NoError(t, err)
	return kubeconfig
}

// waitCalled waits until wh is called for a namespace's Pods (dry-run
// creates of the admin until wh logs one).
func waitCalled(t *testing.T, wh *cluster.Webhook, ns string) {
	t.Helper()
	err := cluster.Poll(t.Context(), enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		_, _ = client(admin).CoreV1().Pods(ns).Create(ctx, newPod("called", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		logs, err := wh.Admissions()
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(logs, func(a cluster.AdmissionLog) bool { return a.Namespace == ns }), nil
	})
	require.NoError(t, err, "%s is called in %s", wh.Process.Name, ns)
}

// runCLI runs a yunikorn-userinfo command and returns its stdout and
// stderr; it must succeed.
func runCLI(t *testing.T, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, e2e.serveBinary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s: %s", args[0], stderr.String())
	return stdout.String(), stderr.String()
}
