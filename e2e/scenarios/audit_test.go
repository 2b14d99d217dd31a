package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// policyReportModule is the Go module of the Kubernetes Policy working
// group that holds the PolicyReport CRDs (policy-report/crd/v1alpha2);
// the test installs them from the module cache, as published.
const policyReportModule = "sigs.k8s.io/wg-policy-prototypes@v0.0.0-20210911211205-fb8f67bb6d38"

// openReportsModule holds the OpenReports CRDs (config/crd), which
// Kubewarden 1.30+ and Kyverno 1.15+ install and write.
const openReportsModule = "github.com/openreports/reports-api@v0.2.1"

var (
	policyReports        = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	clusterPolicyReports = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"}
)

// TestAuditExisting: workloads made where no webhook runs (a namespace
// without the webhook label, as before the policy was installed) carry
// whatever identity their authors wrote. `audit --kubeconfig` finds, on the
// real API server and page by page, the Pod without user.info, the forged
// value YuniKorn would read as another user, the Pod changed to differ
// from its Deployment's template, the Deployment (and its ReplicaSet and
// Pod) made without one, and the application two users share; it leaves
// alone the Pods of other schedulers; and it writes the findings as
// PolicyReports the real wgpolicyk8s.io CRD accepts, created then replaced.
func TestAuditExisting(t *testing.T) {
	start(t)
	sparkCRDMu.Lock() // the spark preset's kinds must not be served meanwhile
	t.Cleanup(sparkCRDMu.Unlock)
	ctx := t.Context()
	adm := client(admin)
	ns := newNamespace(t, "")
	labelled := func(p *corev1.Pod, app string) *corev1.Pod {
		p.Labels = map[string]string{"applicationId": app}
		return p
	}

	created := func(user string, p *corev1.Pod) {
		t.Helper()
		_, err := client(user).CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err, "create pod %s as %s", p.Name, user)
	}
	created(alice, yk(newPod("missing", nil)))
	created(bob, yk(newPod("invalid", map[string]string{annotationKey: `{"user":"bob","User":"root"}`})))
	created(alice, newPod("other-scheduler", nil))
	created(alice, yk(labelled(newPod("shared-1", map[string]string{annotationKey: `{"user":"alice"}`}), "e2e-shared")))
	time.Sleep(1100 * time.Millisecond) // creation timestamps have seconds
	created(bob, yk(labelled(newPod("shared-2", map[string]string{annotationKey: `{"user":"bob"}`}), "e2e-shared")))
	// Valid and consistent, each in an application of its own, asking for
	// a queue only alice may submit to.
	for _, u := range []string{alice, bob} {
		p := yk(labelled(newPod("queued-"+u, map[string]string{annotationKey: `{"user":"` + u + `"}`}), "e2e-queued-"+u))
		p.Labels["queue"] = "root.restricted"
		created(u, p)
	}

	web := newDeployment("web", 2, map[string]string{annotationKey: `{"user":"alice","groups":["dev"]}`})
	web.Spec.Template.Spec.SchedulerName = "yunikorn"
	web.Spec.Template.Labels["applicationId"] = "e2e-web"
	// No replicas: the Deployment and its ReplicaSet are what is audited
	// here (a Pod without user.info is above), and a controller that lags
	// behind its cache may briefly make a second Pod of a replicated one.
	old := newDeployment("old", 0, nil)
	old.Spec.Template.Spec.SchedulerName = "yunikorn"
	for _, d := range []string{"web", "old"} {
		dep := web
		if d == "old" {
			dep = old
		}
		_, err := adm.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	webPods := waitPods(t, ns, "app=web", 2)
	sort.Slice(webPods, func(i, j int) bool { return webPods[i].Name < webPods[j].Name })
	changed := webPods[0].Name
	patch := `{"metadata":{"annotations":{"` + annotationKey + `":"{\"user\":\"mallory\",\"groups\":[\"dev\"]}"}}}`
	_, err := adm.CoreV1().Pods(ns).Patch(ctx, changed, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	var oldRS string
	require.NoError(t, cluster.Poll(ctx, controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		l, err := adm.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=old"})
		if err != nil || len(l.Items) != 1 {
			return false, nil
		}
		oldRS = l.Items[0].Name
		return true, nil
	}), "the Deployment controller makes old's ReplicaSet")

	kubeconfig, err := e2e.cluster.WriteKubeconfig(admin)
	require.NoError(t, err)
	audit := func(args ...string) (string, string) {
		t.Helper()
		cmdCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(cmdCtx, e2e.serveBinary, append([]string{"audit", "--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "audit %v: %s", args, stderr.String())
		return stdout.String(), stderr.String()
	}
	type report struct {
		Findings []struct {
			Rule     string `json:"rule"`
			User     string `json:"user"`
			AppID    string `json:"applicationId"`
			Resource struct {
				Kind, Namespace, Name string
				UID                   string `json:"uid"`
			} `json:"resource"`
		} `json:"findings"`
		Passed map[string]int `json:"passed"`
	}
	findings := func(r report) []string {
		var out []string
		for _, f := range r.Findings {
			if f.Resource.Namespace != ns {
				continue
			}
			name := f.Resource.Name
			if f.Rule == "application-id-shared" && f.AppID == "e2e-web" {
				name = "web-*" // either user's Pod is the first: same second
			}
			out = append(out, f.Resource.Kind+" "+name+" "+f.Rule)
		}
		return out
	}
	want := []string{
		"Pod missing user-info-missing",
		"Pod invalid user-info-invalid",
		"Pod shared-2 application-id-shared",
		"Pod " + changed + " user-info-owner-mismatch",
		"Pod web-* application-id-shared",
		"Deployment old user-info-missing",
		"ReplicaSet " + oldRS + " user-info-missing",
	}

	// One namespace, two objects a page.
	out, progress := audit("-n", ns, "-o", "json", "--page-size", "2", "--progress-every", "2", "--queue-check=false")
	t.Logf("audit -n %s:\n%s\nstderr:\n%s", ns, out, progress)
	var inNS report
	require.NoError(t, json.Unmarshal([]byte(out), &inNS))
	assert.ElementsMatch(t, want, findings(inNS))
	assert.Contains(t, progress, "audit: Pod: 2 of about 9 read") // the server estimates the rest
	assert.Contains(t, progress, "audit: Pod: 9 read in 5 pages, 8 audited")

	// The whole cluster finds the same in this namespace.
	out, _ = audit("-o", "json", "-q", "--queue-check=false")
	var all report
	require.NoError(t, json.Unmarshal([]byte(out), &all))
	assert.ElementsMatch(t, want, findings(all))

	// The queue check, under a queues.yaml of YuniKorn's ConfigMap: only
	// root.restricted is open, to alice; every other valid Pod would be
	// rejected (the namespace's own queue is closed).
	ykNS, err := createNamespace(ctx, adm, t.Name()+"-yunikorn", nil)
	require.NoError(t, err)
	_, err = adm.CoreV1().ConfigMaps(ykNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-configs"},
		Data: map[string]string{"queues.yaml": `
partitions:
  - name: default
    placementrules:
      - name: provided
      - name: tag
        value: namespace
        create: true
    queues:
      - name: root
        submitacl: ' '
        queues:
          - name: restricted
            submitacl: alice
`},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	out, progress = audit("-n", ns, "-o", "json", "--yunikorn-namespace", ykNS)
	assert.Contains(t, progress, "audit: queue configuration: "+ykNS+"/yunikorn-configs queues.yaml\n")
	var queued report
	require.NoError(t, json.Unmarshal([]byte(out), &queued))
	var rejected []string
	for _, f := range queued.Findings {
		if f.Rule == "queue-not-allowed" {
			rejected = append(rejected, f.Resource.Name)
		}
	}
	valid := []string{"queued-bob", "shared-1", "shared-2", webPods[0].Name, webPods[1].Name}
	assert.ElementsMatch(t, valid, rejected, "every Pod with a usable user.info but alice's in root.restricted")
	assert.Len(t, queued.Findings, len(want)+len(valid), "the other findings are unchanged")

	// PolicyReports, on the real CRD.
	dir := moduleDir(t, policyReportModule)
	installCRDs(t, filepath.Join(dir, "policy-report", "crd", "v1alpha2"))
	cfg, err := e2e.cluster.Config(admin)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	for range 2 { // created, then replaced
		out, _ = audit("-n", ns, "-o", "policyreport", "--apply", "-q", "--queue-check=false")
		assert.Equal(t, "1 PolicyReports written (yunikorn-userinfo-audit)\n", out)
		rep, err := dyn.Resource(policyReports).Namespace(ns).Get(ctx, "yunikorn-userinfo-audit", metav1.GetOptions{})
		require.NoError(t, err)
		summary, _, _ := unstructured.NestedMap(rep.Object, "summary")
		assert.Equal(t, map[string]any{"pass": int64(inNS.Passed[ns]), "fail": int64(len(want)), "warn": int64(0), "error": int64(0), "skip": int64(0)}, summary)
		results, _, _ := unstructured.NestedSlice(rep.Object, "results")
		require.Len(t, results, len(want))
		rules := map[string]int{}
		for _, r := range results {
			m := r.(map[string]any)
			assert.Equal(t, "yunikorn-user-info", m["policy"])
			assert.Equal(t, "fail", m["result"])
			assert.Equal(t, "yunikorn-userinfo", m["source"])
			res := m["resources"].([]any)[0].(map[string]any)
			assert.Equal(t, ns, res["namespace"])
			assert.NotEmpty(t, res["uid"])
			rules[m["rule"].(string)]++
		}
		assert.Equal(t, map[string]int{"user-info-missing": 3, "user-info-invalid": 1, "user-info-owner-mismatch": 1, "application-id-shared": 2}, rules)
	}

	// OpenReports: refused with the missing CRD named while the cluster
	// does not serve them, then written as the real CRD accepts them.
	refused, err := exec.CommandContext(ctx, e2e.serveBinary, "audit", "--kubeconfig", kubeconfig,
		"-n", ns, "-o", "openreports", "--apply", "-q", "--queue-check=false").CombinedOutput()
	require.Error(t, err, "no OpenReports CRDs yet: %s", refused)
	assert.Contains(t, string(refused), "the cluster does not serve reports.openreports.io (openreports.io/v1alpha1): install the OpenReports CRDs")
	installCRDs(t, filepath.Join(moduleDir(t, openReportsModule), "config", "crd"))
	openReports := schema.GroupVersionResource{Group: "openreports.io", Version: "v1alpha1", Resource: "reports"}
	require.Eventually(t, func() bool {
		out, _ = audit("-n", ns, "-o", "openreports", "--apply", "-q", "--queue-check=false")
		return out == "1 Reports written (yunikorn-userinfo-audit)\n"
	}, time.Minute, time.Second, "the OpenReports CRDs are served")
	orep, err := dyn.Resource(openReports).Namespace(ns).Get(ctx, "yunikorn-userinfo-audit", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "yunikorn-userinfo", orep.Object["source"])
	oresults, _, _ := unstructured.NestedSlice(orep.Object, "results")
	assert.Len(t, oresults, len(want), "the same findings as the PolicyReport")

	// A namespace with nothing to audit any more loses the report an
	// earlier audit wrote there; other reports stay.
	for _, name := range []string{"yunikorn-userinfo-audit", "someone-elses"} {
		stale := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
			"metadata": map[string]any{"name": name, "labels": map[string]any{"app.kubernetes.io/managed-by": "yunikorn-userinfo"}},
			"summary":  map[string]any{"fail": int64(1)},
		}}
		_, err = dyn.Resource(policyReports).Namespace(ykNS).Create(ctx, stale, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	out, _ = audit("-n", ykNS, "-o", "policyreport", "--apply", "-q", "--queue-check=false")
	assert.Equal(t, "0 PolicyReports written (yunikorn-userinfo-audit)\n", out)
	left, err := dyn.Resource(policyReports).Namespace(ykNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, left.Items, 1)
	assert.Equal(t, "someone-elses", left.Items[0].GetName())

	auditCustomKinds(t, ns, audit, dyn)
}

// trainerCRD is a custom workload kind of this test's own, so that no
// other scenario's operator or CRD bears on it.
const trainerCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: trainers.e2e.yunikorn-userinfo.test
spec:
  group: e2e.yunikorn-userinfo.test
  names: {kind: Trainer, listKind: TrainerList, plural: trainers, singular: trainer}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// auditCustomKinds (part of TestAuditExisting, which owns the
// PolicyReport CRDs and the namespace ns): with the policy's settings,
// audit reads the custom kind they name from the real API server (a CRD
// installed here) and finds the Trainer without user.info, the forged one,
// and the Pod its "operator" made naming another user than the Trainer;
// it reports once the preset kinds whose CRDs are not installed (spark);
// and the application whose Pods in two namespaces name three users is one
// result of a ClusterPolicyReport the real CRD accepts, naming both
// namespaces and every user.
func auditCustomKinds(t *testing.T, ns string, audit func(args ...string) (string, string), dyn dynamic.Interface) {
	ctx := t.Context()
	adm := client(admin)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "trainer.yaml"), []byte(trainerCRD), 0o600))
	installCRDs(t, dir)
	settingsFile := filepath.Join(dir, "settings.yaml")
	require.NoError(t, os.WriteFile(settingsFile, []byte(`workloads:
  - spark
  - group: e2e.yunikorn-userinfo.test
    version: v1
    kind: Trainer
    resource: trainers
    paths: ["spec.workers[*].template.metadata.annotations"]
`), 0o600))
	trainers := schema.GroupVersionResource{Group: "e2e.yunikorn-userinfo.test", Version: "v1", Resource: "trainers"}
	trainer := func(name, value string) *unstructured.Unstructured {
		tmpl := map[string]any{"spec": map[string]any{"schedulerName": "yunikorn"}}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.yunikorn-userinfo.test/v1", "kind": "Trainer",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"workers": []any{map[string]any{"template": tmpl}}},
		}}
		if value != "" {
			tmpl["metadata"] = map[string]any{"annotations": map[string]any{annotationKey: value}}
			u.SetAnnotations(map[string]string{annotationKey: value})
		}
		created, err := dyn.Resource(trainers).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err, "create Trainer %s", name)
		return created
	}
	recorded := trainer("trainer-recorded", `{"user":"alice"}`)
	trainer("trainer-missing", "")
	trainer("trainer-forged", `{"user":"bob","USER":"root"}`)
	worker := yk(newPod("trainer-worker", map[string]string{annotationKey: `{"user":"mallory"}`}))
	worker.Labels = map[string]string{"applicationId": "e2e-trainer-worker"}
	worker.OwnerReferences = []metav1.OwnerReference{{APIVersion: "e2e.yunikorn-userinfo.test/v1", Kind: "Trainer",
		Name: recorded.GetName(), UID: recorded.GetUID(), Controller: ptr.To(true)}}
	_, err := adm.CoreV1().Pods(ns).Create(ctx, worker, metav1.CreateOptions{})
	require.NoError(t, err)
	// Application e2e-shared (alice's and bob's in ns) gets a Pod of dave's
	// in a second namespace.
	ns2, err := createNamespace(ctx, adm, t.Name()+"-2", nil)
	require.NoError(t, err)
	cross := yk(newPod("cross", map[string]string{annotationKey: `{"user":"dave"}`}))
	cross.Labels = map[string]string{"applicationId": "e2e-shared"}
	_, err = adm.CoreV1().Pods(ns2).Create(ctx, cross, metav1.CreateOptions{})
	require.NoError(t, err)
	namespaces := []string{ns, ns2}
	sort.Strings(namespaces)

	out, progress := audit("-o", "json", "--queue-check=false", "-s", settingsFile)
	var rep struct {
		Findings []struct {
			Rule     string `json:"rule"`
			Resource struct{ Kind, Namespace, Name string }
		} `json:"findings"`
		ClusterFindings []struct {
			Rule       string   `json:"rule"`
			AppID      string   `json:"applicationId"`
			Namespaces []string `json:"namespaces"`
			Users      []struct {
				User string `json:"user"`
			} `json:"users"`
		} `json:"clusterFindings"`
		Skipped []struct{ Kind, Reason string } `json:"skipped"`
		Audited map[string]int                  `json:"audited"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	var got []string
	for _, f := range rep.Findings {
		if f.Resource.Namespace == ns2 || (f.Resource.Namespace == ns && strings.HasPrefix(f.Resource.Name, "trainer-")) {
			got = append(got, f.Resource.Kind+" "+f.Resource.Name+" "+f.Rule)
		}
	}
	assert.ElementsMatch(t, []string{
		"Trainer trainer-missing user-info-missing",
		"Trainer trainer-forged user-info-invalid",
		"Pod trainer-worker user-info-owner-mismatch",
		"Pod cross application-id-shared",
	}, got)
	assert.Equal(t, 3, rep.Audited["Trainer.e2e.yunikorn-userinfo.test"])
	var shared []string
	for _, c := range rep.ClusterFindings {
		if c.AppID == "e2e-shared" {
			assert.Equal(t, "application-id-shared", c.Rule)
			assert.Equal(t, namespaces, c.Namespaces)
			for _, u := range c.Users {
				shared = append(shared, u.User)
			}
		}
	}
	assert.Equal(t, []string{alice, bob, dave}, shared, "the owner (oldest Pod) first")
	var skipped []string
	for _, k := range rep.Skipped {
		skipped = append(skipped, k.Kind+": "+k.Reason)
	}
	notServed := "the API server does not serve sparkoperator.k8s.io/v1beta2 (is its CRD installed?)"
	assert.Equal(t, []string{"ScheduledSparkApplication: " + notServed, "SparkApplication: " + notServed}, skipped, "sorted by group, then kind")
	assert.Equal(t, 1, strings.Count(progress, "audit: SparkApplication.sparkoperator.k8s.io (preset spark): not audited"), progress)

	// Written to the cluster: the real CRDs accept the Trainer's results
	// and the ClusterPolicyReport.
	out, _ = audit("-o", "policyreport", "--apply", "-q", "--queue-check=false", "-s", settingsFile)
	assert.True(t, strings.HasSuffix(out, "ClusterPolicyReport written (yunikorn-userinfo-audit)\n"), out)
	nsReport, err := dyn.Resource(policyReports).Namespace(ns).Get(ctx, "yunikorn-userinfo-audit", metav1.GetOptions{})
	require.NoError(t, err)
	results, _, _ := unstructured.NestedSlice(nsReport.Object, "results")
	var trainerResults []string
	for _, r := range results {
		m := r.(map[string]any)
		res := m["resources"].([]any)[0].(map[string]any)
		if res["kind"] == "Trainer" {
			assert.Equal(t, "e2e.yunikorn-userinfo.test/v1", res["apiVersion"])
			trainerResults = append(trainerResults, res["name"].(string)+" "+m["rule"].(string))
		}
	}
	assert.ElementsMatch(t, []string{"trainer-missing user-info-missing", "trainer-forged user-info-invalid"}, trainerResults)

	cpr, err := dyn.Resource(clusterPolicyReports).Get(ctx, "yunikorn-userinfo-audit", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "yunikorn-userinfo", cpr.GetLabels()["app.kubernetes.io/managed-by"])
	results, _, _ = unstructured.NestedSlice(cpr.Object, "results")
	var found, skips int
	for _, r := range results {
		m := r.(map[string]any)
		props, _ := m["properties"].(map[string]any)
		switch {
		case m["rule"] == "workload-kind-not-served":
			assert.Equal(t, "skip", m["result"])
			skips++
		case m["rule"] == "application-id-shared" && props["applicationId"] == "e2e-shared":
			found++
			assert.Equal(t, "fail", m["result"])
			assert.Equal(t, strings.Join(namespaces, ","), props["namespaces"])
			assert.Equal(t, "alice,bob,dave", props["users"])
			assert.Equal(t, "alice", props["owner"])
			resources := m["resources"].([]any)
			require.Len(t, resources, 3, "the oldest Pod of every user")
			assert.Equal(t, "cross", resources[2].(map[string]any)["name"])
			assert.Equal(t, ns2, resources[2].(map[string]any)["namespace"])
		}
	}
	assert.Equal(t, 1, found)
	assert.Equal(t, 2, skips)
	summary, _, _ := unstructured.NestedMap(cpr.Object, "summary")
	assert.Equal(t, int64(2), summary["skip"])
	assert.GreaterOrEqual(t, summary["fail"], int64(1))
}

// yk makes a Pod YuniKorn's.
func yk(p *corev1.Pod) *corev1.Pod { p.Spec.SchedulerName = "yunikorn"; return p }

// moduleDir downloads a Go module through the module proxy (into the
// module cache) and returns its directory.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = t.TempDir() // outside any module: go.mod and go.sum stay untouched
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go mod download %s: %s", module, stderr.String())
	var info struct{ Dir, Error string }
	require.NoError(t, json.Unmarshal(out, &info))
	require.Empty(t, info.Error)
	require.NotEmpty(t, info.Dir, strings.TrimSpace(string(out)))
	return info.Dir
}

// forgeAuditUser makes TestAuditLogReplay's forgery; the API server's
// audit policy records its requests with their bodies (level Request).
const forgeAuditUser = "forge-audit"

// TestAuditLogReplay: in a namespace no webhook covers (the policy is
// absent there), a user creates a Pod carrying alice's record, and
// another carrying nothing. `audit --audit-log` asks the embedded policy
// again about what the API server's audit log shows stored, and lists the
// forgery with the policy's own rule, and only it.
func TestAuditLogReplay(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, "")
	cs := client(forgeAuditUser)
	forAlice := map[string]string{annotationKey: `{"user":"alice","groups":["dev"]}`}
	p, err := cs.CoreV1().Pods(ns).Create(ctx, yk(newPod("as-alice", forAlice)), metav1.CreateOptions{})
	require.NoError(t, err, "no policy covers the namespace")
	assert.Equal(t, forAlice[annotationKey], p.Annotations[annotationKey], "stored as sent")
	_, err = cs.CoreV1().Pods(ns).Create(ctx, yk(newPod("plain", nil)), metav1.CreateOptions{})
	require.NoError(t, err)

	// The audit log is written in blocking mode: each event is on disk
	// before the request is answered.
	out, progress := runCLI(t, "audit", "--audit-log", e2e.cluster.AuditLogPath(), "-n", ns, "-o", "json")
	t.Logf("audit --audit-log:\n%s\n%s", out, progress)
	var res struct {
		Admissions []struct {
			Source, Verb, Resource, Namespace, Name, User, Rule, Claimed, Message string
			Code                                                                  int
		}
		Replayed int
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, 1, res.Replayed, "the one create that supplied user.info")
	require.Len(t, res.Admissions, 1, "the forgery, not the Pod that supplied nothing")
	a := res.Admissions[0]
	assert.Equal(t, "replay", a.Source)
	assert.Equal(t, "create", a.Verb)
	assert.Equal(t, "pods", a.Resource)
	assert.Equal(t, ns, a.Namespace)
	assert.Equal(t, "as-alice", a.Name)
	assert.Equal(t, forgeAuditUser, a.User)
	assert.Equal(t, forAlice[annotationKey], a.Claimed)
	assert.Equal(t, "create: present, submitter not allowed", a.Rule)
	assert.Contains(t, a.Message, "user "+forgeAuditUser+" with groups [dev,system:authenticated] is not allowed to set user annotation")
	assert.Equal(t, 201, a.Code)
}
