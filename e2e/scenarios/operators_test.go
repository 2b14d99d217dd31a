package scenarios

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
	"github.com/yunikorn-userinfo/userinfo/e2e/internal/kbuild"
)

// ownerReaderUser is the identity the operators' webhook reads owners and
// Pods with: exactly the owner-reader ClusterRole the chart renders for its
// settings.
const ownerReaderUser = "userinfo-owners"

// webhookOperators labels the namespaces of the operator scenarios.
const webhookOperators = "operators"

// The operators' service accounts, in namespaces of their own as their
// manifests install them. The webhook's settings (the chart rendering
// build/chart/operators.yaml) name exactly these as operators.
var (
	kuberayAccount  = types.NamespacedName{Namespace: "ray-system", Name: "kuberay-operator"}
	jobsetAccount   = types.NamespacedName{Namespace: "jobset-system", Name: "jobset-controller-manager"}
	trainingAccount = types.NamespacedName{Namespace: "kubeflow", Name: "training-operator"}
)

var (
	rayClusters = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
	rayJobs     = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}
	jobSets     = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	pytorchJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}
	crds        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// operatorsEnv is what TestOperators sets up once: the operators' CRDs, the
// webhook with the rendered settings, and the running operators.
type operatorsEnv struct {
	ns      string
	dyn     map[string]dynamic.Interface // by user
	webhook *cluster.Webhook
}

// TestOperators: the real KubeRay operator and JobSet controller, built
// from their Go modules and run outside the cluster as their service
// accounts, turn what alice submits into Pods. Every Pod carries alice's
// identity, although the operators are trusted only by provenance: each
// Pod (or Job) they create names its uid-checked controller owner, whose
// templates the policy stamped at submission. A Spark-style executor
// created with its driver's bound token carries the driver's identity;
// the same executor from another Pod of the same service account does not.
// The attacks of an operator account that tries to invent an identity are
// refused, as is a changed template on UPDATE. A RayJob without any pod
// template records its submitter in its own annotations, so its submitter
// Job is charged to alice; one created before the policy covered its
// namespace records no one, and its submitter Job is refused rather than
// charged to the operator.
func TestOperators(t *testing.T) {
	start(t)
	if !e2e.ownKube {
		// Not a feature the version lacks: a pass on an older Kubernetes
		// runs the core scenarios only (make e2e), and builds no operator.
		t.Skipf("the operators are built for the suite's own Kubernetes %s only, not with %s=%s (%s)",
			kbuild.DefaultKubeVersion, kbuild.KubeVersionEnv, os.Getenv(kbuild.KubeVersionEnv), e2e.kubeVersion)
	}
	if e2e.operators == nil {
		t.Fatal("the operators were not built (TestMain)")
	}
	env := setUpOperators(t)

	t.Run("kuberay-raycluster", func(t *testing.T) { testRayCluster(t, env) })
	t.Run("kuberay-rayjob", func(t *testing.T) { testRayJob(t, env) })
	t.Run("kuberay-rayjob-cluster-selector", func(t *testing.T) { testRayJobClusterSelector(t, env) })
	t.Run("kuberay-owner-before-policy", func(t *testing.T) { testOwnerBeforePolicy(t, env) })
	t.Run("kuberay-operator-cannot-invent", func(t *testing.T) { testOperatorCannotInvent(t, env) })
	t.Run("kuberay-yunikorn", func(t *testing.T) { testRayClusterScheduled(t, env) })
	t.Run("jobset", func(t *testing.T) { testJobSet(t, env) })
	t.Run("kubeflow-pytorchjob", func(t *testing.T) { testPyTorchJob(t, env) })
	t.Run("spark-driver-token", func(t *testing.T) { testDriverToken(t, env) })
}

func setUpOperators(t *testing.T) *operatorsEnv {
	t.Helper()
	ctx := t.Context()
	adm := client(admin)
	began := time.Now()

	// The CRDs, as the operators' modules ship them.
	for _, op := range []string{kbuild.KubeRay.Name, kbuild.JobSet.Name, kbuild.TrainingOperator.Name} {
		installCRDs(t, e2e.operators[op].CRDDir)
	}

	// The webhook, with the settings and the read access the chart renders
	// for them.
	rendering, err := cluster.ReadRendering(chartRendering(e2e.repo, "E2E_CHART_OPERATORS", "operators.yaml"))
	require.NoError(t, err)
	cm, err := rendering.One("ConfigMap")
	require.NoError(t, err)
	settings, err := cluster.AdaptSettings(cm, externalUsers)
	require.NoError(t, err)
	settingsFile := filepath.Join(e2e.cluster.Dir, "settings-operators.yaml")
	require.NoError(t, os.WriteFile(settingsFile, settings, 0o600))
	var reader *rbacv1.ClusterRole
	for _, doc := range rendering.All("ClusterRole") {
		var r rbacv1.ClusterRole
		require.NoError(t, yaml.Unmarshal(doc, &r))
		if strings.HasSuffix(r.Name, "-owner-reader") {
			reader = &r
		}
	}
	require.NotNil(t, reader, "the chart renders an owner-reader ClusterRole for these settings")
	reader.ObjectMeta = metav1.ObjectMeta{Name: "e2e-userinfo-owner-reader"}
	_, err = adm.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{})
	require.NoError(t, err)
	bindClusterRole(t, reader.Name, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: ownerReaderUser})

	kubeconfig, err := e2e.cluster.WriteKubeconfig(ownerReaderUser)
	require.NoError(t, err)
	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-operators", Binary: e2e.serveBinary, SettingsFile: settingsFile,
		ExtraArgs: []string{"--kubeconfig", kubeconfig},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, wh.Stop()) })
	mwcManifest, err := rendering.One("MutatingWebhookConfiguration")
	require.NoError(t, err)
	mwc, err := cluster.AdaptWebhookConfiguration(mwcManifest, "yunikorn-userinfo-e2e-operators", wh.BaseURL, e2e.cluster.PKI.CAPEM,
		map[string]string{webhookLabel: webhookOperators})
	require.NoError(t, err)
	_, err = adm.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		err := adm.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), mwc.Name, metav1.DeleteOptions{})
		assert.NoError(t, err)
	})

	env := &operatorsEnv{ns: newNamespace(t, webhookOperators), dyn: map[string]dynamic.Interface{}, webhook: wh}
	for _, u := range []string{admin, alice, rosa} {
		cfg, err := e2e.cluster.Config(u)
		require.NoError(t, err)
		env.dyn[u], err = dynamic.NewForConfig(cfg)
		require.NoError(t, err)
	}

	// The operators, each as its service account with the rights its
	// manifests grant (cluster-wide here: what matters is who they are).
	startKubeRay(t)
	startJobSet(t)
	startTrainingOperator(t)
	t.Logf("operators set up in %.1fs", time.Since(began).Seconds())
	return env
}

// installCRDs creates every CRD of dir and waits until each is established.
func installCRDs(t *testing.T, dir string) {
	t.Helper()
	ctx := t.Context()
	cfg, err := e2e.cluster.Config(admin)
	require.NoError(t, err)
	cfg.Timeout = 2 * time.Minute // the KubeRay CRDs are megabytes each
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal(b, &obj), f)
		u := &unstructured.Unstructured{Object: obj}
		_, err = dyn.Resource(crds).Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err, "create CRD %s", u.GetName())
		names = append(names, u.GetName())
	}
	for _, name := range names {
		err := cluster.Poll(ctx, controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(crds).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		require.NoError(t, err, "CRD %s established", name)
	}
}

// operatorAccount creates a namespace and service account for an operator,
// binds it to cluster-admin, and writes a kubeconfig with a token of it
// (not bound to any Pod: the operators run outside the cluster).
func operatorAccount(t *testing.T, sa types.NamespacedName) string {
	t.Helper()
	ctx := t.Context()
	adm := client(admin)
	_, err := adm.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sa.Namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = adm.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa.Name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bindClusterRole(t, "cluster-admin", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name})
	tok, err := adm.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubeconfig, err := e2e.cluster.WriteTokenKubeconfig(sa.Namespace+"-"+sa.Name, tok.Status.Token)
	require.NoError(t, err)
	return kubeconfig
}

// bindClusterRole binds role to subject cluster-wide.
func bindClusterRole(t *testing.T, role string, subject rbacv1.Subject) {
	t.Helper()
	_, err := client(admin).RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-" + nameFor(role) + "-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// startOperator runs an operator binary with its kubeconfig and stops it
// when the test ends.
func startOperator(t *testing.T, name, binary, kubeconfig string, args ...string) {
	t.Helper()
	p, err := e2e.cluster.StartProcess(name, binary, args, []string{"KUBECONFIG=" + kubeconfig})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Stop(10*time.Second), "stop %s", name) })
}

func startKubeRay(t *testing.T) {
	kubeconfig := operatorAccount(t, kuberayAccount)
	// Metrics and probes off ("0"): nothing listens beyond what the test
	// needs; no leader election for one replica.
	startOperator(t, "kuberay-operator", e2e.operators[kbuild.KubeRay.Name].Path, kubeconfig,
		"--metrics-addr=0", "--health-probe-bind-address=0", "--enable-leader-election=false")
}

func startJobSet(t *testing.T) {
	kubeconfig := operatorAccount(t, jobsetAccount)
	// JobSet's own webhooks are not registered (no defaulting), but its
	// server starts: a certificate from the cluster's CA, on loopback.
	certDir := servingCertDir(t, "jobset")
	port := freePort(t)
	config := fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
internalCertManagement:
  enable: false
leaderElection:
  leaderElect: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: "0"
`, port, certDir)
	configFile := filepath.Join(e2e.cluster.Dir, "jobset-config.yaml")
	require.NoError(t, os.WriteFile(configFile, []byte(config), 0o600))
	startOperator(t, "jobset-controller", e2e.operators[kbuild.JobSet.Name].Path, kubeconfig, "--config="+configFile)

	// JobSet defaults its objects in a mutating webhook of its own (its
	// controller dereferences the defaults), registered here as its
	// manifests register it (config/components/webhook/manifests.yaml in
	// its module), beside ours.
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	err := cluster.Poll(t.Context(), controllerTimeout, pollInterval, func(context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil, nil
	})
	require.NoError(t, err, "the JobSet webhook server listens on %s", addr)
	url := "https://" + addr + "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-jobset-mutating-webhook-configuration"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mjobset.kb.io",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: e2e.cluster.PKI.CAPEM},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{webhookLabel: webhookOperators}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"jobset.x-k8s.io"}, APIVersions: []string{"v1alpha2"}, Resources: []string{"jobsets"}},
			}},
		}},
	}
	_, err = client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Create(t.Context(), mwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		err := client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.WithoutCancel(t.Context()), mwc.Name, metav1.DeleteOptions{})
		assert.NoError(t, err)
	})
}

// startTrainingOperator runs the Kubeflow training operator, built with the
// patch that binds its webhook server to loopback with a certificate from
// the suite's CA (kbuild.TrainingOperator); its webhooks are not
// registered.
func startTrainingOperator(t *testing.T) {
	kubeconfig := operatorAccount(t, trainingAccount)
	certDir := servingCertDir(t, "training")
	p, err := e2e.cluster.StartProcess("training-operator", e2e.operators[kbuild.TrainingOperator.Name].Path,
		[]string{"--metrics-bind-address=0", "--health-probe-bind-address=0", fmt.Sprintf("--webhook-server-port=%d", freePort(t))},
		[]string{"KUBECONFIG=" + kubeconfig, kbuild.TrainingWebhookCertDirEnv + "=" + certDir})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Stop(10*time.Second), "stop the training operator") })
}

// servingCertDir writes a loopback serving certificate from the suite's CA
// as tls.crt and tls.key into a directory of its own, the layout
// controller-runtime's webhook server reads.
func servingCertDir(t *testing.T, name string) string {
	t.Helper()
	certFile, keyFile, err := e2e.cluster.PKI.IssueServing(name+"-webhook", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	require.NoError(t, err)
	dir := filepath.Join(e2e.cluster.Dir, name+"-certs")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	for src, dst := range map[string]string{certFile: "tls.crt", keyFile: "tls.key"} {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, dst), b, 0o600))
	}
	return dir
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ports, err := cluster.FreePorts(1)
	require.NoError(t, err)
	return ports[0]
}

// create creates a custom resource from YAML as user.
func (env *operatorsEnv) create(t *testing.T, user string, gvr schema.GroupVersionResource, manifest string) *unstructured.Unstructured {
	t.Helper()
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &obj))
	created, err := env.dyn[user].Resource(gvr).Namespace(env.ns).Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err, "create %s as %s", gvr.Resource, user)
	return created
}

// templateAnnotations returns the user.info annotation of every pod
// template at the given paths of obj (a path's "[]" steps into each
// element of a list).
func templateAnnotations(t *testing.T, obj map[string]any, paths ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(v any, where string, rest []string)
	walk = func(v any, where string, rest []string) {
		if len(rest) == 0 {
			m, _ := v.(map[string]any)
			ann, _ := m["annotations"].(map[string]any)
			s, _ := ann[annotationKey].(string)
			out[where] = s
			return
		}
		key := rest[0]
		list := strings.HasSuffix(key, "[]")
		key = strings.TrimSuffix(key, "[]")
		m, _ := v.(map[string]any)
		if !list {
			walk(m[key], where+"."+key, rest[1:])
			return
		}
		items, _ := m[key].([]any)
		for i, item := range items {
			walk(item, fmt.Sprintf("%s.%s[%d]", where, key, i), rest[1:])
		}
	}
	for _, p := range paths {
		walk(obj, "", strings.Split(p, "."))
	}
	return out
}

// rayClusterManifest is a RayCluster with a head and a group of two
// workers; with appID, its Pods go to YuniKorn as one application.
func rayClusterManifest(name, appID string) string {
	labels, sched := "{}", ""
	if appID != "" {
		labels, sched = "{"+appIDLabel+": "+appID+"}", "schedulerName: "+schedulerName
	}
	return fmt.Sprintf(`apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: %[1]s
spec:
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      metadata:
        labels: %[2]s
      spec:
        %[3]s
        containers:
          - name: ray-head
            image: registry.invalid/ray:2.46.0
            resources: {limits: {cpu: "1", memory: 2Gi}}
  workerGroupSpecs:
    - groupName: small
      replicas: 2
      minReplicas: 0
      maxReplicas: 4
      rayStartParams: {}
      template:
        metadata:
          labels: %[2]s
        spec:
          %[3]s
          containers:
            - name: ray-worker
              image: registry.invalid/ray:2.46.0
              resources: {limits: {cpu: "1", memory: 1Gi}}
`, name, labels, sched)
}

// testRayCluster: alice's RayCluster is stamped in every template at
// submission; the KubeRay operator's head and worker Pods carry alice's
// identity, admitted by the owner proof.
func testRayCluster(t *testing.T, env *operatorsEnv) {
	want := e2e.identity[alice].annotation()
	rc := env.create(t, alice, rayClusters, rayClusterManifest("rc-alice", ""))
	assert.Equal(t, map[string]string{
		".spec.headGroupSpec.template.metadata":       want,
		".spec.workerGroupSpecs[0].template.metadata": want,
	}, templateAnnotations(t, rc.Object, "spec.headGroupSpec.template.metadata", "spec.workerGroupSpecs[].template.metadata"))

	pods := waitPods(t, env.ns, "ray.io/cluster=rc-alice", 3)
	for _, p := range pods {
		assert.Equal(t, want, p.Annotations[annotationKey], "pod %s carries alice's identity", p.Name)
		require.NotEmpty(t, p.OwnerReferences, p.Name)
		assert.Equal(t, rc.GetUID(), p.OwnerReferences[0].UID, "owned by alice's RayCluster")
	}
	logs := admissionsFor(t, env.webhook, env.ns)
	operator := "system:serviceaccount:" + kuberayAccount.Namespace + ":" + kuberayAccount.Name
	assert.GreaterOrEqual(t, countAdmissions(logs, "Pod", "CREATE", operator, "allowed"), 3, "the operator created them, admitted by provenance")

	// A changed template on UPDATE is refused, naming the template.
	_, err := env.dyn[alice].Resource(rayClusters).Namespace(env.ns).Patch(t.Context(), "rc-alice", types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/spec/workerGroupSpecs/0/template/metadata/annotations/yunikorn.apache.org~1user.info","value":"{\"user\":\"bob\"}"}]`),
		metav1.PatchOptions{})
	requireRefused(t, err, workloadsWebhook, msgChangeNotAllowed+": request.object.spec.workerGroupSpecs[0].template.metadata.annotations")
}

// testRayClusterScheduled: YuniKorn schedules the Pods KubeRay creates for
// rosa's RayCluster, in one application that its REST API reports as
// rosa's, with her groups, in her own queue: the operator created every
// Pod, the submitter is who YuniKorn charges. (rosa rather than alice,
// whose per-user usage the YuniKorn scenarios count.) Another user's Pod
// that names her application is refused.
func testRayClusterScheduled(t *testing.T, env *operatorsEnv) {
	appID := "rc-rosa-" + env.ns
	env.create(t, rosa, rayClusters, rayClusterManifest("rc-rosa", appID))
	pods := waitPods(t, env.ns, "ray.io/cluster=rc-rosa", 3)
	want := e2e.identity[rosa]
	for _, p := range pods {
		require.Equal(t, schedulerName, p.Spec.SchedulerName, "pod %s", p.Name)
		assert.Equal(t, want.annotation(), p.Annotations[annotationKey], "pod %s carries rosa's identity", p.Name)
		app := waitScheduled(t, env.ns, p.Name, appID)
		assert.Equal(t, want.User, app.User, "YuniKorn charges rosa for pod %s", p.Name)
		assert.Equal(t, want.Groups, app.Groups)
		assert.Equal(t, "root.rosa", app.QueueName)
	}

	// applicationOwnership (enforce in these settings): bob's Pod naming
	// rosa's application is refused; his own application is his.
	intruder := ykPod("intruder", appID, nil)
	_, err := client(bob).CoreV1().Pods(env.ns).Create(t.Context(), intruder, metav1.CreateOptions{})
	require.Error(t, err, "bob joins rosa's application")
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	assert.EqualValues(t, 403, status.Status().Code)
	msg := status.Status().Message
	assert.Equal(t, fmt.Sprintf("admission webhook %q denied the request: application %s is owned by another user: a pod of user bob may not join it"+ownerHint, workloadsWebhook, appID), msg)
	_, err = client(bob).CoreV1().Pods(env.ns).Create(t.Context(), ykPod("bobs-own", "bob-app-"+env.ns, nil), metav1.CreateOptions{})
	require.NoError(t, err, "an application of his own")
}

// testRayJob: the RayCluster the operator creates for alice's RayJob
// carries the RayJob's identity, and so do its Pods.
func testRayJob(t *testing.T, env *operatorsEnv) {
	want := e2e.identity[alice].annotation()
	spec := strings.ReplaceAll(strings.SplitN(rayClusterManifest("unused", ""), "spec:\n", 2)[1], "\n", "\n  ")
	rj := env.create(t, alice, rayJobs, `apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: rj-alice
spec:
  entrypoint: python -c "print(1)"
  shutdownAfterJobFinishes: false
  rayClusterSpec:
  `+spec)
	var rc *unstructured.Unstructured
	err := cluster.Poll(t.Context(), controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		l, err := env.dyn[admin].Resource(rayClusters).Namespace(env.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range l.Items {
			for _, o := range l.Items[i].GetOwnerReferences() {
				if o.UID == rj.GetUID() {
					rc = &l.Items[i]
					return true, nil
				}
			}
		}
		return false, nil
	})
	require.NoError(t, err, "KubeRay creates the RayJob's RayCluster")
	assert.Equal(t, map[string]string{
		".spec.headGroupSpec.template.metadata":       want,
		".spec.workerGroupSpecs[0].template.metadata": want,
	}, templateAnnotations(t, rc.Object, "spec.headGroupSpec.template.metadata", "spec.workerGroupSpecs[].template.metadata"))
	for _, p := range waitPods(t, env.ns, "ray.io/cluster="+rc.GetName(), 3) {
		assert.Equal(t, want, p.Annotations[annotationKey], "pod %s carries alice's identity", p.Name)
	}
}

// testOperatorCannotInvent: the KubeRay operator's own account, creating
// Pods itself, cannot attribute them to anyone its owners do not record.
func testOperatorCannotInvent(t *testing.T, env *operatorsEnv) {
	ctx := t.Context()
	opClient, op := serviceAccountClient(t, kuberayAccount.Namespace, kuberayAccount.Name)
	rc := env.create(t, alice, rayClusters, rayClusterManifest("rc-target", ""))
	aliceValue := e2e.identity[alice].annotation()
	bobValue := `{"user":"bob","groups":["ops","system:authenticated"]}`
	owner := metav1.OwnerReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: rc.GetName(), UID: rc.GetUID(), Controller: ptr.To(true)}
	prefix := op.notAllowed() + ": owner proof failed: "
	for _, tc := range []struct {
		name, value, ns string
		owner           metav1.OwnerReference
		message         string
	}{
		{name: "invented", value: bobValue, owner: owner,
			message: prefix + "RayCluster " + env.ns + "/rc-target records " + aliceValue + ", not the value supplied"},
		{name: "forged-uid", value: aliceValue, owner: func() metav1.OwnerReference { o := owner; o.UID = "00000000-0000-4000-8000-000000000000"; return o }(),
			message: prefix + "RayCluster " + env.ns + "/rc-target has uid " + string(rc.GetUID()) + ", not the uid 00000000-0000-4000-8000-000000000000 the ownerReference names"},
		{name: "not-controller", value: aliceValue, owner: func() metav1.OwnerReference { o := owner; o.Controller = nil; return o }(),
			message: prefix + "the object has no controller ownerReference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("forged-"+tc.name, map[string]string{annotationKey: tc.value})
			pod.OwnerReferences = []metav1.OwnerReference{tc.owner}
			_, err := opClient.CoreV1().Pods(env.ns).Create(ctx, pod, metav1.CreateOptions{})
			requireRefused(t, err, workloadsWebhook, tc.message)
		})
	}
	t.Run("other-namespace", func(t *testing.T) {
		other := newNamespace(t, webhookOperators)
		pod := newPod("forged", map[string]string{annotationKey: aliceValue})
		pod.OwnerReferences = []metav1.OwnerReference{owner}
		_, err := opClient.CoreV1().Pods(other).Create(ctx, pod, metav1.CreateOptions{})
		requireRefused(t, err, workloadsWebhook, prefix+"RayCluster "+other+"/rc-target does not exist")
	})
}

// testJobSet: alice's JobSet is stamped; the JobSet controller creates its
// Jobs (owner proof), kube-controller-manager their Pods: all alice's.
func testJobSet(t *testing.T, env *operatorsEnv) {
	want := e2e.identity[alice].annotation()
	js := env.create(t, alice, jobSets, `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: js-alice
spec:
  replicatedJobs:
    - name: workers
      replicas: 2
      template:
        spec:
          parallelism: 1
          completions: 1
          backoffLimit: 0
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: c
                  image: registry.invalid/e2e:1
`)
	assert.Equal(t, map[string]string{".spec.replicatedJobs[0].template.spec.template.metadata": want},
		templateAnnotations(t, js.Object, "spec.replicatedJobs[].template.spec.template.metadata"))
	var jobs []string
	err := cluster.Poll(t.Context(), controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		l, err := client(admin).BatchV1().Jobs(env.ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=js-alice"})
		if err != nil {
			return false, nil
		}
		jobs = jobs[:0]
		for _, j := range l.Items {
			assert.Equal(t, want, j.Spec.Template.Annotations[annotationKey], "job %s", j.Name)
			jobs = append(jobs, j.Name)
		}
		return len(jobs) == 2, nil
	})
	require.NoError(t, err, "the JobSet controller creates two Jobs (have %v)", jobs)
	for _, p := range waitPods(t, env.ns, "jobset.sigs.k8s.io/jobset-name=js-alice", 2) {
		assert.Equal(t, want, p.Annotations[annotationKey], "pod %s carries alice's identity", p.Name)
	}
	logs := admissionsFor(t, env.webhook, env.ns)
	operator := "system:serviceaccount:" + jobsetAccount.Namespace + ":" + jobsetAccount.Name
	assert.Equal(t, 2, countAdmissions(logs, "Job", "CREATE", operator, "allowed"), "the controller created the Jobs, admitted by provenance")
}

// testDriverToken: the Spark chain without Spark. alice's driver Pod runs
// as service account spark; an executor created with a token bound to the
// driver (requested as the kubelet requests the driver's projected token),
// and owned by it, carries the driver's identity; one created with a token
// bound to another Pod of the same account is refused, and so are extras
// that claim the driver for another account. The trust boundary is shown
// both ways: bob, allowed to mint tokens for spark, acts as the driver;
// alice, who is not, cannot mint one.
func testDriverToken(t *testing.T, env *operatorsEnv) {
	ctx := t.Context()
	adm := client(admin)
	_, err := adm.CoreV1().ServiceAccounts(env.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "spark"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// other: a second account of the namespace, with the same rights.
	_, err = adm.CoreV1().ServiceAccounts(env.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = adm.RbacV1().RoleBindings(env.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "spark-creates-executors"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: workloadRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: env.ns, Name: "spark"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: env.ns, Name: "other"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	runAs := func(name string) *corev1.Pod {
		p := newPod(name, nil)
		p.Spec.ServiceAccountName = "spark"
		created, err := client(alice).CoreV1().Pods(env.ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		return created
	}
	driver := runAs("spark-pi-driver")
	notebook := runAs("notebook")
	want := e2e.identity[alice].annotation()
	require.Equal(t, want, driver.Annotations[annotationKey])

	boundClient := func(p *corev1.Pod) (*kubernetes.Clientset, identity) {
		tok, err := adm.CoreV1().ServiceAccounts(env.ns).CreateToken(ctx, "spark", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)),
				BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		cfg, err := e2e.cluster.Config(admin)
		require.NoError(t, err)
		cfg.BearerToken = tok.Status.Token
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		id, err := whoAmI(ctx, cs)
		require.NoError(t, err)
		return cs, id
	}
	executor := func(name string, annotations map[string]string) *corev1.Pod {
		p := newPod(name, annotations)
		p.Spec.ServiceAccountName = "spark"
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: driver.Name, UID: driver.UID, Controller: ptr.To(true)}}
		return p
	}

	fromDriver, _ := boundClient(driver)
	p, err := fromDriver.CoreV1().Pods(env.ns).Create(ctx, executor("exec-1", map[string]string{annotationKey: want}), metav1.CreateOptions{})
	require.NoError(t, err, "the driver's executor, carrying the driver's identity")
	assert.Equal(t, want, p.Annotations[annotationKey])
	p, err = fromDriver.CoreV1().Pods(env.ns).Create(ctx, executor("exec-2", nil), metav1.CreateOptions{})
	require.NoError(t, err, "the driver's executor, carrying nothing")
	assert.Equal(t, want, p.Annotations[annotationKey], "stamped with the driver's identity, not the service account's")

	fromNotebook, id := boundClient(notebook)
	_, err = fromNotebook.CoreV1().Pods(env.ns).Create(ctx, executor("exec-3", map[string]string{annotationKey: want}), metav1.CreateOptions{})
	requireRefused(t, err, workloadsWebhook, id.notAllowed()+": pod-token proof failed: the controller ownerReference (Pod spark-pi-driver, uid "+
		string(driver.UID)+") is not the Pod the submitter's token is bound to (notebook, uid "+string(notebook.UID)+")")

	// The API server binds a token only to a Pod that runs as the token's
	// service account (pkg/registry/core/serviceaccount/storage/token.go).
	_, err = adm.CoreV1().ServiceAccounts(env.ns).CreateToken(ctx, "other", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: driver.Name, UID: driver.UID}},
	}, metav1.CreateOptions{})
	require.Error(t, err, "a token of another service account bound to the driver")
	assert.True(t, apierrors.IsBadRequest(err), "%v", err)
	// Extras that claim the driver for another account come only from an
	// authenticating proxy or impersonation; the policy refuses them too.
	cfg, err := e2e.cluster.Config(admin)
	require.NoError(t, err)
	other := "system:serviceaccount:" + env.ns + ":other"
	cfg.Impersonate = rest.ImpersonationConfig{UserName: other, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + env.ns},
		Extra: map[string][]string{"authentication.kubernetes.io/pod-name": {driver.Name}, "authentication.kubernetes.io/pod-uid": {string(driver.UID)}}}
	posing, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	id, err = whoAmI(ctx, posing)
	require.NoError(t, err)
	_, err = posing.CoreV1().Pods(env.ns).Create(ctx, executor("exec-4", map[string]string{annotationKey: want}), metav1.CreateOptions{})
	requireRefused(t, err, workloadsWebhook, id.notAllowed()+": pod-token proof failed: Pod "+env.ns+"/spark-pi-driver runs as service account \"spark\", and the submitter "+other+" is not it")

	// The trust boundary (docs/BEHAVIOUR.md §3.4): whoever may create
	// tokens for the driver's service account may act as the driver. bob,
	// granted that on spark, mints a token bound to alice's driver, and
	// his Pod is charged to alice; alice's own rights (the workload role)
	// do not include it, and the API server refuses her.
	_, err = adm.RbacV1().Roles(env.ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "spark-token-minter"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"spark"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = adm.RbacV1().RoleBindings(env.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bob-mints-spark-tokens"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "spark-token-minter"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: bob}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	bound := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600)),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: driver.Name, UID: driver.UID}}}
	_, err = client(alice).CoreV1().ServiceAccounts(env.ns).CreateToken(ctx, "spark", bound, metav1.CreateOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "alice may not mint tokens for spark: %v", err)
	var tok *authenticationv1.TokenRequest
	err = cluster.Poll(ctx, controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		tok, err = client(bob).CoreV1().ServiceAccounts(env.ns).CreateToken(ctx, "spark", bound, metav1.CreateOptions{})
		return err == nil, nil // RBAC is served from informers: the binding takes a moment
	})
	require.NoError(t, err, "bob mints a token of spark bound to the driver")
	cfg, err = e2e.cluster.Config(admin)
	require.NoError(t, err)
	cfg.BearerToken = tok.Status.Token
	asDriver, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	p, err = asDriver.CoreV1().Pods(env.ns).Create(ctx, executor("exec-bob", nil), metav1.CreateOptions{})
	require.NoError(t, err, "bob's Pod, created with a token he minted for the driver")
	assert.Equal(t, want, p.Annotations[annotationKey], "inside the boundary: whoever may mint the driver's tokens acts as the driver")
}

// testPyTorchJob: alice's PyTorchJob is stamped in every replica
// template; the training operator's master and worker Pods carry her
// identity, admitted by the owner proof.
func testPyTorchJob(t *testing.T, env *operatorsEnv) {
	want := e2e.identity[alice].annotation()
	job := env.create(t, alice, pytorchJobs, `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pt-alice
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: registry.invalid/pytorch:2
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: registry.invalid/pytorch:2
`)
	specs, _, _ := unstructured.NestedMap(job.Object, "spec", "pytorchReplicaSpecs")
	for role := range specs {
		ann, _, _ := unstructured.NestedString(job.Object, "spec", "pytorchReplicaSpecs", role, "template", "metadata", "annotations", annotationKey)
		assert.Equal(t, want, ann, "replica %s is stamped", role)
	}
	for _, p := range waitPods(t, env.ns, "training.kubeflow.org/job-name=pt-alice", 3) {
		assert.Equal(t, want, p.Annotations[annotationKey], "pod %s carries alice's identity", p.Name)
	}
	logs := admissionsFor(t, env.webhook, env.ns)
	operator := "system:serviceaccount:" + trainingAccount.Namespace + ":" + trainingAccount.Name
	assert.Equal(t, 3, countAdmissions(logs, "Pod", "CREATE", operator, "allowed"), "the operator created them, admitted by provenance")
}

// rayHeadManifest is a RayCluster with a head and no worker group: one Pod.
func rayHeadManifest(name string) string {
	return fmt.Sprintf(`apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: %s
spec:
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
          - name: ray-head
            image: registry.invalid/ray:2.46.0
            resources: {limits: {cpu: "1", memory: 2Gi}}
`, name)
}

// rayJobOnCluster is a RayJob that runs on the existing RayCluster cluster
// (spec.clusterSelector): it has no pod template at all, and KubeRay
// builds its submitter Job from a default template without metadata
// (ray-operator v1.4.2, controllers/ray/common/job.go).
func rayJobOnCluster(name, cluster string) string {
	return fmt.Sprintf(`apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: %s
spec:
  entrypoint: python -c "print(1)"
  submissionMode: K8sJobMode
  clusterSelector:
    ray.io/cluster: %s
`, name, cluster)
}

// createIn creates a custom resource from YAML as user in namespace ns.
func (env *operatorsEnv) createIn(t *testing.T, user, ns string, gvr schema.GroupVersionResource, manifest string) *unstructured.Unstructured {
	t.Helper()
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &obj))
	created, err := env.dyn[user].Resource(gvr).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err, "create %s as %s in %s", gvr.Resource, user, ns)
	return created
}

// readyRayCluster reports the Pods of RayCluster name as a kubelet would
// once they run (the suite runs no kubelet), and waits until KubeRay
// counts the cluster ready, which is when it submits a RayJob to it.
func readyRayCluster(t *testing.T, env *operatorsEnv, ns, name string, pods int) {
	t.Helper()
	ctx := t.Context()
	for _, p := range waitPods(t, ns, "ray.io/cluster="+name, pods) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
		_, err := client(admin).CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{})
		require.NoError(t, err, "pod %s runs", p.Name)
	}
	err := cluster.Poll(ctx, controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		rc, err := env.dyn[admin].Resource(rayClusters).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		state, _, _ := unstructured.NestedString(rc.Object, "status", "state")
		return state == "ready", nil
	})
	require.NoError(t, err, "KubeRay counts RayCluster %s ready", name)
}

// testRayJobClusterSelector: alice's RayJob that runs on an existing
// cluster has no pod template; it records her identity in its own
// annotations, and the submitter Job KubeRay creates for it (from a
// template without metadata) is stamped with alice, not with the
// operator's service account. Its Pod, which the Job controller creates,
// carries alice too.
func testRayJobClusterSelector(t *testing.T, env *operatorsEnv) {
	ctx := t.Context()
	want := e2e.identity[alice].annotation()
	env.create(t, alice, rayClusters, rayHeadManifest("rc-shared"))
	readyRayCluster(t, env, env.ns, "rc-shared", 1)
	rj := env.create(t, alice, rayJobs, rayJobOnCluster("rj-on-shared", "rc-shared"))
	assert.Equal(t, want, rj.GetAnnotations()[annotationKey], "the RayJob records alice in its own annotations")

	var job *batchv1.Job
	err := cluster.Poll(ctx, controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		j, err := client(admin).BatchV1().Jobs(env.ns).Get(ctx, "rj-on-shared", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		job = j
		return true, nil
	})
	require.NoError(t, err, "KubeRay creates the submitter Job")
	require.NotEmpty(t, job.OwnerReferences)
	assert.Equal(t, rj.GetUID(), job.OwnerReferences[0].UID, "owned by alice's RayJob")
	assert.Equal(t, want, job.Spec.Template.Annotations[annotationKey], "the submitter Job is charged to alice")
	for _, p := range waitPods(t, env.ns, "batch.kubernetes.io/job-name=rj-on-shared", 1) {
		assert.Equal(t, want, p.Annotations[annotationKey], "pod %s carries alice's identity", p.Name)
	}
	logs := admissionsFor(t, env.webhook, env.ns)
	operator := "system:serviceaccount:" + kuberayAccount.Namespace + ":" + kuberayAccount.Name
	assert.Equal(t, 1, countAdmissions(logs, "Job", "CREATE", operator, "mutated"), "the operator created the Job, stamped by provenance")
}

// testOwnerBeforePolicy: a RayJob created where the policy did not yet
// run records no one. Once the policy covers its namespace, the submitter
// Job KubeRay creates for it is refused, with a message that names the
// RayJob and what to do, rather than charged to the operator; KubeRay
// reports the refusal as an event of the RayJob.
func testOwnerBeforePolicy(t *testing.T, env *operatorsEnv) {
	ctx := t.Context()
	ns, err := createNamespace(ctx, client(admin), t.Name(), nil)
	require.NoError(t, err)
	rj := env.createIn(t, alice, ns, rayJobs, rayJobOnCluster("rj-old", "rc-new"))
	assert.Empty(t, rj.GetAnnotations()[annotationKey], "no policy ran: the RayJob records no one")

	nsObj, err := client(admin).CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	nsObj.Labels[webhookLabel] = webhookOperators
	_, err = client(admin).CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, waitEnforced(ctx, ns))

	env.createIn(t, alice, ns, rayClusters, rayHeadManifest("rc-new"))
	readyRayCluster(t, env, ns, "rc-new", 1)

	operator := "system:serviceaccount:" + kuberayAccount.Namespace + ":" + kuberayAccount.Name
	message := fmt.Sprintf("admission webhook %q denied the request: the submitter of this object cannot be proven, and it is not charged to %s, "+
		"which creates it for its owner: owner proof failed: RayJob %s/rj-old records no submitter; re-create RayJob %s/rj-old so that the policy "+
		"records its submitter, have an adopter (settings.adopters) record its owner, or have an allowed submitter create it with the annotation %s", workloadsWebhook, operator, ns, ns, annotationKey)
	var seen []string
	err = cluster.Poll(ctx, controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		l, err := client(admin).CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=rj-old"})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range l.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == "FailedToCreateRayJobSubmitter" && strings.Contains(e.Message, message) {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "KubeRay reports the refused submitter Job (events: %q)", seen)
	_, err = client(admin).BatchV1().Jobs(ns).Get(ctx, "rj-old", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no submitter Job exists: %v", err)
	logs := admissionsFor(t, env.webhook, ns)
	assert.Zero(t, countAdmissions(logs, "Job", "CREATE", operator, "allowed")+countAdmissions(logs, "Job", "CREATE", operator, "mutated"),
		"no Job of the operator was admitted")
	assert.NotZero(t, countAdmissions(logs, "Job", "CREATE", operator, "denied"))

	// The RayJob cannot gain a record after the fact, even from alice.
	_, err = env.dyn[alice].Resource(rayJobs).Namespace(ns).Patch(ctx, "rj-old", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"yunikorn.apache.org/user.info":`+fmt.Sprintf("%q", e2e.identity[alice].annotation())+`}}}`), metav1.PatchOptions{})
	requireRefused(t, err, workloadsWebhook, msgChangeNotAllowed+": request.object.metadata.annotations: the object records no owner "+
		"(it was created before the policy), and only an adopter may record one: settings.adopters names none")
}
