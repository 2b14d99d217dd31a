package scenarios

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// switchRun is docs/MIGRATING.md "Switching, step by step" as a scenario
// runs it against YuniKorn's real admission controller: each method is
// one step, in the documented order, doing what its command does.
type switchRun struct {
	t     *testing.T
	yk    *ykAdmission
	label string // webhookLabel of the namespaces this webhook covers
	name  string // the release: the configurations' names derive from it

	settingsFile, reader string
	wh                   *cluster.Webhook
}

// startSwitch starts YuniKorn's admission controller with configs, as the
// cluster runs it before the switch.
func startSwitch(t *testing.T, label string, configs map[string]string) *switchRun {
	t.Helper()
	return &switchRun{t: t, yk: startYKAdmission(t, configs), label: label, name: "yunikorn-userinfo-e2e-" + label}
}

// convert is step 1: migrate --kubeconfig -n YUNIKORN_NAMESPACE
// --unique-app-ids > settings.yaml.
func (s *switchRun) convert() map[string]any {
	t := s.t
	kubeconfig, err := e2e.cluster.WriteKubeconfig(admin)
	require.NoError(t, err)
	stdout, stderr := runCLI(t, "migrate", "--kubeconfig", kubeconfig, "-n", s.yk.ns, "--unique-app-ids")
	t.Logf("step 1, migrate:\n%s\n%s", stdout, stderr)
	var settings map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(stdout), &settings))
	s.settingsFile = filepath.Join(e2e.cluster.Dir, "settings-"+s.name+".yaml")
	require.NoError(t, os.WriteFile(s.settingsFile, []byte(stdout), 0o600))
	return settings
}

// watch is step 3: the chart with watchOnly=true (make chart-render's
// watch.yaml). It renders no mutating configuration; serve runs with the
// rendered --monitor and --validate-overlay, and the rendered validating
// twin is registered; YuniKorn's controller keeps enforcing.
func (s *switchRun) watch() {
	t := s.t
	ctx := t.Context()
	rendering, err := cluster.ReadRendering(chartRendering(e2e.repo, "E2E_CHART_WATCH", "watch.yaml"))
	require.NoError(t, err)
	require.Empty(t, rendering.All("MutatingWebhookConfiguration"), "watchOnly renders no mutating configuration")
	vwcManifest, err := rendering.OneValidating()
	require.NoError(t, err)
	deployment, err := rendering.One("Deployment")
	require.NoError(t, err)
	var d appsv1.Deployment
	require.NoError(t, yaml.Unmarshal(deployment, &d))
	require.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--monitor", "watchOnly runs serve in monitor mode")
	overlay, err := deploymentFlag(deployment, "validate-overlay")
	require.NoError(t, err)
	s.reader = schedulingReader(t, s.yk.ns)
	s.wh, err = e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-" + s.label + "-" + rand.String(4), Binary: e2e.serveBinary, SettingsFile: s.settingsFile,
		ExtraArgs: []string{"--monitor", "--validate-overlay", overlay, "--kubeconfig", s.reader},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.wh.Stop()) })
	vwc, err := cluster.AdaptValidatingWebhookConfiguration(vwcManifest, s.name+"-validate", s.wh.BaseURL,
		e2e.cluster.PKI.CAPEM, map[string]string{webhookLabel: s.label})
	require.NoError(t, err)
	adm := client(admin).AdmissionregistrationV1()
	_, err = adm.ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = adm.ValidatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), vwc.Name, metav1.DeleteOptions{})
	})
	_, err = adm.MutatingWebhookConfigurations().Get(ctx, s.name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "watch only: no mutating configuration of this webhook (%v)", err)
}

// enforce is step 4: helm upgrade --set watchOnly=false --wait (the
// suite's standalone rendering). serve restarts without --monitor (the
// rollout) and the rendered mutating configuration is registered, under a
// name that sorts after YuniKorn's.
func (s *switchRun) enforce(nss ...string) {
	t := s.t
	ctx := t.Context()
	require.NoError(t, s.wh.Stop())
	s.wh.Process.Args = slices.DeleteFunc(s.wh.Process.Args, func(a string) bool { return a == "--monitor" })
	require.NoError(t, s.wh.Start(ctx))
	mwc, err := e2e.registerWebhook(ctx, s.name, s.wh, s.label)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), mwc.Name, metav1.DeleteOptions{})
	})
	require.Greater(t, mwc.Name, cluster.YKMutations, "called after YuniKorn's controller")
	for _, ns := range nss {
		waitStage(t, s.wh, ns, "mutate")
	}
}

// handOver is step 5, once step 4 has returned: the one patch of
// yunikorn-configs, bypassAuth and unique application IDs. It waits until
// YuniKorn's controller applies it (a dry-run Pod of alice gets a unique
// application ID from it).
func (s *switchRun) handOver(ns string) {
	t := s.t
	require.NoError(t, s.yk.setConfig(t.Context(), map[string]string{
		"admissionController.accessControl.bypassAuth":      "true",
		"admissionController.filtering.generateUniqueAppId": "true",
	}))
	var last string
	err := cluster.Poll(t.Context(), enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		p, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod("handed-over", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = p.Labels[canonicalAppIDKey]
		return last != "" && last != ykAutogenAppID(ns), nil
	})
	require.NoErrorf(t, err, "YuniKorn's controller applies the hand-over (application ID %q)", last)
}

// waitStage waits until wh logs a call of the given stage for ns (dry-run
// Pods of the admin until it does).
func waitStage(t *testing.T, wh *cluster.Webhook, ns, stage string) {
	t.Helper()
	err := cluster.Poll(t.Context(), enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		// A Deployment: a Pod that carries its submitter's own record may
		// be judged by the API server alone (the twin's match condition).
		_, _ = client(admin).AppsV1().Deployments(ns).Create(ctx, newDeployment("called", 1, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		logs, err := wh.Admissions()
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(logs, func(a cluster.AdmissionLog) bool { return a.Namespace == ns && a.Stage == stage }), nil
	})
	require.NoError(t, err, "%s calls %s at the %s stage", ns, wh.Process.Name, stage)
}

// monitorCounts reads yunikorn_userinfo_monitor_would_refuse_total, by
// "stage rule".
func monitorCounts(t *testing.T, url string) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "yunikorn_userinfo_monitor_would_refuse_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(line, "} ")
		require.True(t, ok, line)
		var rule, stage string
		for _, kv := range strings.Split(labels, `",`) {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "rule":
				rule = v
			case "stage":
				stage = v
			}
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		require.NoError(t, err)
		out[stage+" "+rule] = n
	}
	require.NoError(t, sc.Err())
	return out
}

// forgedFor is the user.info a forger claims: carol's, whom only livy may
// name.
var forgedFor = map[string]string{annotationKey: `{"user":"carol","groups":["analysts"]}`}

// forger is bob trying, all through the switch, to get a Pod stored that
// names carol: as a user (a Pod) and as a workload (a Deployment or a
// Job whose template names her, which a trusted controller would turn
// into Pods). It records whatever the API server admitted.
type forger struct {
	mu       sync.Mutex
	admitted []string
	tries    int
	stop     context.CancelFunc
	done     chan struct{}
}

func startForger(t *testing.T, ns string) *forger {
	ctx, cancel := context.WithCancel(t.Context())
	f := &forger{stop: cancel, done: make(chan struct{})}
	cs := client(bob)
	go func() {
		defer close(f.done)
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var err error
			name := fmt.Sprintf("forged-%d", i)
			switch i % 3 {
			case 0:
				_, err = cs.CoreV1().Pods(ns).Create(ctx, newPod(name, forgedFor), metav1.CreateOptions{})
			case 1:
				_, err = cs.AppsV1().Deployments(ns).Create(ctx, newDeployment(name, 1, forgedFor), metav1.CreateOptions{})
			case 2:
				_, err = cs.BatchV1().Jobs(ns).Create(ctx, forgedJob(name), metav1.CreateOptions{})
			}
			if ctx.Err() != nil {
				return
			}
			f.mu.Lock()
			f.tries++
			if err == nil {
				f.admitted = append(f.admitted, name)
			}
			f.mu.Unlock()
		}
	}()
	t.Cleanup(f.halt)
	return f
}

func (f *forger) halt() {
	f.stop()
	<-f.done
}

func (f *forger) result() (int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries, slices.Clone(f.admitted)
}

func forgedJob(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       batchv1.JobSpec{Template: podTemplate(name, forgedFor, corev1.RestartPolicyNever)},
	}
}

// tryForging is bob's attempt at one step, as a user and as a workload:
// each must be refused; it returns the webhooks that refused them.
func tryForging(t *testing.T, ns, step string) []string {
	t.Helper()
	ctx := t.Context()
	cs := client(bob)
	name := "try-" + step
	var refusers []string
	for _, try := range []struct {
		kind string
		do   func() error
	}{
		{"Pod", func() error {
			_, err := cs.CoreV1().Pods(ns).Create(ctx, newPod(name, forgedFor), metav1.CreateOptions{})
			return err
		}},
		{"Deployment", func() error {
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment(name, 1, forgedFor), metav1.CreateOptions{})
			return err
		}},
		{"Job", func() error {
			_, err := cs.BatchV1().Jobs(ns).Create(ctx, forgedJob(name), metav1.CreateOptions{})
			return err
		}},
	} {
		err := try.do()
		require.Errorf(t, err, "step %s: bob's %s naming carol is refused", step, try.kind)
		msg := err.Error()
		require.Containsf(t, msg, e2e.identity[bob].notAllowed(), "step %s, %s", step, try.kind)
		webhook, _, _ := strings.Cut(strings.TrimPrefix(msg, `admission webhook "`), `"`)
		refusers = append(refusers, webhook)
	}
	return refusers
}

// requireNoForgedStored: no Pod, Deployment or Job stored in ns names
// carol, whatever the API server answered on the way.
func requireNoForgedStored(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	cs := client(admin)
	// Give the controllers a moment to act on anything admitted.
	time.Sleep(2 * time.Second)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		assert.NotEqualf(t, forgedFor[annotationKey], p.Annotations[annotationKey], "Pod %s names carol", p.Name)
	}
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, d := range deps.Items {
		assert.NotEqualf(t, forgedFor[annotationKey], d.Spec.Template.Annotations[annotationKey], "Deployment %s names carol", d.Name)
	}
	jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, j := range jobs.Items {
		assert.NotEqualf(t, forgedFor[annotationKey], j.Spec.Template.Annotations[annotationKey], "Job %s names carol", j.Name)
	}
	t.Logf("stored in %s: %d Pods, %d Deployments, %d Jobs; none names carol", ns, len(pods.Items), len(deps.Items), len(jobs.Items))
}

// switchNamespace creates a namespace this webhook (label) and YuniKorn's
// controller cover.
func switchNamespace(t *testing.T, s *switchRun, ns string) {
	t.Helper()
	ctx := t.Context()
	adm := client(admin)
	_, err := adm.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{webhookLabel: s.label},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{}) })
	_, err = prepareNamespace(ctx, adm, ns)
	require.NoError(t, err)
}

// TestSwitchNoUnguardedMoment runs docs/MIGRATING.md "Switching, step by
// step" against YuniKorn's real admission controller (bypassAuth false,
// livy an external user, its default filtering) and the real scheduler,
// while bob forges carol's user.info all along, every 300 ms, as a Pod, a
// Deployment and a Job, and once more at each step:
//
//  1. migrate converts the live yunikorn-configs (--unique-app-ids);
//  3. watch: only the validating twin, in monitor mode. YuniKorn's
//     controller refuses the forgeries; what this webhook would refuse and
//     YuniKorn admits (livy's value with a key the policy refuses, a
//     Deployment template changed by UPDATE, which YuniKorn 1.9 does not
//     check) is admitted and reported: the warning to the client, the
//     count in yunikorn_userinfo_monitor_would_refuse_total{stage=
//     "validate"}, the "monitor mode: would be refused" log line;
//  4. enforce beside YuniKorn's controller: both enforce; the forgeries
//     are refused by YuniKorn's (called first), what step 3 reported by
//     this webhook;
//  5. hand-over (bypassAuth, unique application IDs): this webhook refuses
//     the forgeries;
//  7. YuniKorn's controller removed: this webhook still refuses them.
//
// Not one stored Pod, Deployment or Job names carol at the end, and
// alice's Pod of each step carries her identity and is scheduled as her.
func TestSwitchNoUnguardedMoment(t *testing.T) {
	start(t)
	ctx := t.Context()
	s := startSwitch(t, "switch", map[string]string{
		"admissionController.accessControl.bypassAuth":    "false",
		"admissionController.accessControl.externalUsers": "^" + livy + "$",
	})
	ns := "e2e-switch-" + rand.String(5)
	switchNamespace(t, s, ns)
	s.yk.cover(t, ns)
	f := startForger(t, ns)
	aliceID := e2e.identity[alice]

	alicePod := func(step string) {
		t.Helper()
		p, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod("alice-"+step, nil), metav1.CreateOptions{})
		require.NoError(t, err, "step %s: alice's own Pod", step)
		assert.Equal(t, aliceID.annotation(), p.Annotations[annotationKey], "step %s", step)
		assert.Equal(t, schedulerName, p.Spec.SchedulerName, "step %s", step)
		// Before the hand-over alice's Pods share the namespace's generated
		// application, which her first Pod created; after it each has one
		// of its own.
		app := waitScheduled(t, ns, p.Name, shimAppID(p))
		assert.Equal(t, aliceID.User, app.User, "step %s: charged to alice", step)
	}
	// livy submits for dana with a key the policy refuses and YuniKorn's
	// decoder ignores.
	const extraKey = `{"user":"dana","groups":["analysts"],"uid":"7"}`

	// 1. Convert.
	settings := s.convert()
	scheduling, _ := settings["scheduling"].(map[string]any)
	assert.Equal(t, true, scheduling["generateUniqueAppIds"], "--unique-app-ids")

	// 3. Watch.
	s.watch()
	waitStage(t, s.wh, ns, "validate")
	assert.Equal(t, []string{cluster.YKMutatePodsWebhook, cluster.YKMutatePodsWebhook, cluster.YKMutatePodsWebhook},
		tryForging(t, ns, "watch"), "YuniKorn's controller refuses them")
	alicePod("watch")
	before := monitorCounts(t, s.wh.MetricsURL)
	livyWarn, warnings := clientWithWarnings(t, livy)
	p, err := livyWarn.CoreV1().Pods(ns).Create(ctx, newPod("livy-extra-key", map[string]string{annotationKey: extraKey}), metav1.CreateOptions{})
	require.NoError(t, err, "YuniKorn admits it, and so does the watch")
	assert.Equal(t, extraKey, p.Annotations[annotationKey])
	got := warnings.take()
	assert.True(t, slices.ContainsFunc(got, func(w string) bool { return strings.HasPrefix(w, "monitor mode: would be refused: ") }), "livy is warned: %q", got)
	// bob's Deployment, recorded as bob by YuniKorn, then its template
	// changed to carol by UPDATE: YuniKorn 1.9 does not check workload
	// updates. No replicas, so no Pod is made from it.
	dep, err := client(bob).AppsV1().Deployments(ns).Create(ctx, newDeployment("bob-app", 0, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, e2e.identity[bob].annotation(), dep.Spec.Template.Annotations[annotationKey], "YuniKorn records bob")
	retarget := func() (*appsv1.Deployment, error) {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": forgedFor}}}})
		return client(bob).AppsV1().Deployments(ns).Patch(ctx, "bob-app", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	}
	dep, err = retarget()
	require.NoError(t, err, "YuniKorn 1.9 lets a workload UPDATE through; the watch only reports it")
	require.Equal(t, forgedFor[annotationKey], dep.Spec.Template.Annotations[annotationKey])
	after := monitorCounts(t, s.wh.MetricsURL)
	t.Logf("step 3, would be refused: %v (before: %v)", after, before)
	assert.Equal(t, before["validate create: present, invalid value"]+1, after["validate create: present, invalid value"], "livy's value, counted")
	// The API server may call admission again when it retries the update
	// on a conflict (with the Deployment controller's own update).
	assert.GreaterOrEqual(t, after["validate update: changed"], before["validate update: changed"]+1, "bob's update, counted")
	for k, v := range after {
		assert.Truef(t, strings.HasPrefix(k, "validate "), "the watch reports at the validating stage only: %s %v", k, v)
	}
	warned := grepLog(t, s.wh, "monitor mode: would be refused")
	assert.True(t, slices.ContainsFunc(warned, func(l string) bool { return strings.Contains(l, `"user":"bob"`) }), "the log names bob: %q", warned)
	assert.True(t, slices.ContainsFunc(warned, func(l string) bool { return strings.Contains(l, `"user":"livy"`) }), "the log names livy: %q", warned)
	// The operator acts on the report: the Deployment YuniKorn let through
	// is deleted before the switch.
	require.NoError(t, client(admin).AppsV1().Deployments(ns).Delete(ctx, "bob-app", metav1.DeleteOptions{}))

	// 4. Enforce beside YuniKorn's controller.
	s.enforce(ns)
	assert.Equal(t, []string{cluster.YKMutatePodsWebhook, cluster.YKMutatePodsWebhook, cluster.YKMutatePodsWebhook},
		tryForging(t, ns, "enforce"), "YuniKorn's controller, called first, refuses them")
	alicePod("enforce")
	_, err = client(livy).CoreV1().Pods(ns).Create(ctx, newPod("livy-extra-key-2", map[string]string{annotationKey: extraKey}), metav1.CreateOptions{})
	require.Error(t, err, "what the watch reported is refused now")
	assert.Contains(t, err.Error(), `admission webhook "`+workloadsWebhook+`" denied the request`)
	_, err = client(bob).AppsV1().Deployments(ns).Create(ctx, newDeployment("bob-app-2", 0, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": forgedFor}}}})
	_, err = client(bob).AppsV1().Deployments(ns).Patch(ctx, "bob-app-2", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	require.Error(t, err, "bob's update is refused now")
	assert.Contains(t, err.Error(), `admission webhook "`+workloadsWebhook+`" denied the request`)

	// 5. Hand over.
	s.handOver(ns)
	assert.Equal(t, []string{workloadsWebhook, workloadsWebhook, workloadsWebhook}, tryForging(t, ns, "handover"),
		"this webhook refuses them")
	alicePod("handover")

	// 7. Remove YuniKorn's controller.
	require.NoError(t, s.yk.ac.Remove(ctx))
	assert.Equal(t, []string{workloadsWebhook, workloadsWebhook, workloadsWebhook}, tryForging(t, ns, "alone"))
	alicePod("alone")

	f.halt()
	tries, admitted := f.result()
	t.Logf("the forger tried %d times all through the switch", tries)
	assert.Greater(t, tries, 20)
	assert.Empty(t, admitted, "the API server admitted a forgery")
	requireNoForgedStored(t, ns)
}

// shimAppID is the application the shim puts p in: its application ID
// label, with the placeholder suffix -uniqueautogen (what an admission
// controller writes before the Pod has a uid) replaced by -<uid>, as
// k8shim v1.9 does.
func shimAppID(p *corev1.Pod) string {
	id := p.Labels[canonicalAppIDKey]
	if base, ok := strings.CutSuffix(id, "-uniqueautogen"); ok {
		return base + "-" + string(p.UID)
	}
	return id
}

// grepLog returns the webhook's log lines that contain s.
func grepLog(t *testing.T, wh *cluster.Webhook, s string) []string {
	t.Helper()
	b, err := os.ReadFile(wh.Process.LogFile)
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// TestSwitchChargedUser: a namespace that already holds a Pod without
// user.info (made before anything recorded one), so YuniKorn's generated
// application of the namespace is charged to nobody, and alice's Pod,
// which YuniKorn's controller labels into it, runs as nobody too. After
// the documented switch (unique application IDs on both sides, step 5),
// alice's new Pod, Job and Deployment are each an application charged to
// alice in YuniKorn's REST API, and audit --yunikorn reports the old
// application charged to nobody, and only it, saying what to do.
func TestSwitchChargedUser(t *testing.T) {
	start(t)
	ctx := t.Context()
	s := startSwitch(t, "switch-charged", map[string]string{
		"admissionController.accessControl.bypassAuth": "false",
	})
	ns := "e2e-charged-" + rand.String(5)
	switchNamespace(t, s, ns)
	autogen := ykAutogenAppID(ns)

	// Before anything: an old Pod, no user.info, no application ID.
	old := newPod("old", nil)
	old.Spec.SchedulerName = schedulerName
	old.Labels = map[string]string{"queue": "root.shared"}
	_, err := client(admin).CoreV1().Pods(ns).Create(ctx, old, metav1.CreateOptions{})
	require.NoError(t, err)
	app := waitScheduled(t, ns, "old", autogen)
	assert.Equal(t, "nobody", app.User)
	assert.Equal(t, "root.shared", app.QueueName)

	// YuniKorn's controller, generateUniqueAppId false: alice's Pod is
	// recorded as alice and labelled into the generated application.
	s.yk.cover(t, ns)
	joined, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod("alice-joined", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, e2e.identity[alice].annotation(), joined.Annotations[annotationKey])
	require.Equal(t, autogen, joined.Labels[canonicalAppIDKey])
	app = waitScheduled(t, ns, "alice-joined", autogen)
	assert.Equal(t, "nobody", app.User, "YuniKorn charges alice's Pod to nobody")
	assert.Len(t, app.Allocations, 2)

	// The switch.
	s.convert()
	s.watch()
	waitStage(t, s.wh, ns, "validate")
	s.enforce(ns)
	s.handOver(ns)

	// alice's new Pod, Job and Deployment.
	_, err = client(alice).CoreV1().Pods(ns).Create(ctx, newPod("alice-new", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client(alice).BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-job"},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: podTemplate("alice-job", nil, corev1.RestartPolicyNever)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client(alice).AppsV1().Deployments(ns).Create(ctx, newDeployment("alice-dep", 1, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	var mine []string
	for _, sel := range []string{"", "app=alice-job", "app=alice-dep"} {
		var p corev1.Pod
		if sel == "" {
			got, err := client(admin).CoreV1().Pods(ns).Get(ctx, "alice-new", metav1.GetOptions{})
			require.NoError(t, err)
			p = *got
		} else {
			p = waitPods(t, ns, sel, 1)[0]
		}
		id := shimAppID(&p)
		require.NotEqual(t, autogen, id, "Pod %s has an application of its own", p.Name)
		assert.Equal(t, e2e.identity[alice].annotation(), p.Annotations[annotationKey], "Pod %s", p.Name)
		app := waitScheduled(t, ns, p.Name, id)
		assert.Equal(t, alice, app.User, "YuniKorn charges Pod %s (application %s) to alice", p.Name, id)
		mine = append(mine, id)
	}
	t.Logf("alice's applications: %v", mine)

	// audit --yunikorn: the old application, charged to nobody.
	kubeconfig, err := e2e.cluster.WriteKubeconfig(admin)
	require.NoError(t, err)
	out, progress := runCLI(t, "audit", "--kubeconfig", kubeconfig, "-n", ns, "-o", "json", "--queue-check=false", "--yunikorn", e2e.scheduler.URL)
	t.Logf("audit:\n%s\n%s", out, progress)
	var rep struct {
		Findings []struct {
			Rule        string                                 `json:"rule"`
			User        string                                 `json:"user"`
			AppID       string                                 `json:"applicationId"`
			ChargedUser string                                 `json:"chargedUser"`
			Message     string                                 `json:"message"`
			Resource    struct{ Kind, Namespace, Name string } `json:"resource"`
		} `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	var charged []string
	for _, f := range rep.Findings {
		if f.Rule != "charged-user-mismatch" {
			continue
		}
		charged = append(charged, fmt.Sprintf("%s %s/%s %s charged %s", f.AppID, f.Resource.Namespace, f.Resource.Name, f.User, f.ChargedUser))
		assert.Contains(t, f.Message, `to "nobody", but 2 of its 2 Pods record no user (1), "alice" (1)`)
		assert.Contains(t, f.Message, "namespace "+ns+"'s generated application")
	}
	assert.Equal(t, []string{autogen + " " + ns + "/alice-joined alice charged nobody"}, charged)
}
