// Package scenarios holds the end-to-end tests: the real-cluster scenarios, each in
// a namespace of its own, against one real control plane that TestMain
// builds (once, cached) and starts, with `yunikorn-userinfo serve`
// registered through the shipped MutatingWebhookConfiguration.
//
// Every assertion is on what the API server answered or stored, never on
// what the webhook computed.
package scenarios

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
	"github.com/yunikorn-userinfo/userinfo/e2e/internal/kbuild"
)

// The static-token users. livy is the front-end that the webhook settings'
// externalUsers allow to submit on behalf of others.
const (
	admin = "admin"
	alice = "alice"
	bob   = "bob"
	livy  = "livy"
	dave  = "dave" // a contractor whom YuniKorn's submit ACL does not admit
	// obrien has a name outside YuniKorn's user name rules (an apostrophe),
	// which Kubernetes accepts.
	obrien = "o'brien"
	// rosa submits the RayCluster that YuniKorn schedules (TestOperators).
	rosa = "rosa"
)

var users = []cluster.User{
	{Name: admin, Groups: []string{"system:masters"}},
	{Name: alice, Groups: []string{"dev"}},
	{Name: bob, Groups: []string{"ops"}},
	{Name: livy, Groups: []string{"frontends"}},
	{Name: dave, Groups: []string{"contractors"}},
	{Name: obrien, Groups: []string{"dev"}},
	{Name: rosa, Groups: []string{"dev"}},
	{Name: schedulerUser},
	{Name: reviewerUser},
	{Name: queueReaderUser},
	{Name: ownerReaderUser},
	{Name: gangReaderUser},
	{Name: appOwnerUser},
	{Name: listPathsUser},
	{Name: monitorAuditUser, Groups: []string{"dev"}},
	{Name: forgeAuditUser, Groups: []string{"dev"}},
}

// externalUsers replaces the shipped (empty) externalUsers setting.
var externalUsers = []string{"^livy$"}

const (
	// annotationKey is where the policy records the submitter.
	annotationKey = "yunikorn.apache.org/user.info"
	// webhookLabel selects which webhook configuration covers a test
	// namespace: webhookMain, webhookFailover, or none when absent.
	webhookLabel    = "e2e.yunikorn.apache.org/webhook"
	webhookMain     = "main"
	webhookFailover = "failover"
	webhookRBAC     = "rbac"
	webhookQueue    = "queue"
	// workloadRole is the ClusterRole the test users are bound to in every
	// test namespace.
	workloadRole = "e2e-workloads"
)

// suite is what TestMain set up, shared by the tests.
type suite struct {
	cluster   *cluster.Cluster
	webhook   *cluster.Webhook // the main webhook, for every namespace labelled webhookMain
	scheduler *cluster.Scheduler
	// sharedControllerCredentials: every controller acts as
	// system:kube-controller-manager rather than its service account.
	sharedControllerCredentials bool
	serveBinary                 string
	ykAdmissionBinary           string // YuniKorn's admission controller (kbuild.EnsureAdmissionController)
	// binDir holds the cluster binaries, and pidRoot the pid records of
	// every control plane: the CEL scenarios start planes of their own.
	binDir, pidRoot    string
	repo               string
	settingsFile       string
	mwcManifest        []byte
	vwcManifest        []byte
	kubewardenPolicies [][]byte // the ClusterAdmissionPolicy and its validating twin
	// operators are the operator builds, by kbuild.Operator.Name; nil in
	// the second pass, which runs only the YuniKorn scenarios.
	operators map[string]kbuild.OperatorResult

	clients  map[string]*kubernetes.Clientset
	identity map[string]identity // what the API server says each user is

	// kubeVersion is the version the API server reports (gitVersion), and
	// kubeMinor its minor number: what requireKube compares with.
	kubeVersion string
	kubeMinor   int
	// ownKube: the control plane is the e2e module's own pins, not an
	// older version's wrapper module ($E2E_KUBE_VERSION).
	ownKube bool

	mu      sync.Mutex
	timings map[string]time.Duration
}

var e2e *suite

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

// run sets up the cluster, runs the tests and tears everything down; it
// returns the exit code.
func run(m *testing.M) int {
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	interrupted := onSignal(cancel)
	defer signal.Stop(interrupted.sigs)

	repo, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: find the repository:", err)
		return 1
	}
	// E2E_BUILD_ONLY=1 builds what the scenarios run and stops: .ci/run
	// builds it that way beside make test.
	buildOnly := os.Getenv("E2E_BUILD_ONLY") == "1"
	// Checked before the long build, so a missing binary fails at once.
	serveBinary := os.Getenv("E2E_SERVE_BINARY")
	if serveBinary == "" {
		serveBinary = filepath.Join(repo, "build", "yunikorn-userinfo")
	}
	if _, err := os.Stat(serveBinary); err != nil && !buildOnly {
		fmt.Fprintf(os.Stderr, "e2e: the webhook binary: %v (run `make build`, or set E2E_SERVE_BINARY)\n", err)
		return 1
	}

	// 1. The cluster binaries, cached outside the clone. go test's -timeout
	// starts counting only in m.Run, so the build has its own bound: a cold
	// build takes about 8 minutes on two idle cores.
	// $E2E_KUBE_VERSION picks another control plane (1.33, 1.35) from a wrapper
	// module of its own; unset, the e2e module's own pins (1.37).
	kubeModule, err := kbuild.KubeModuleDir(filepath.Join(repo, "e2e"), os.Getenv(kbuild.KubeVersionEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	buildCtx, cancelBuild := context.WithTimeout(ctx, 45*time.Minute)
	bin, err := kbuild.Ensure(buildCtx, kbuild.Options{ModuleDir: kubeModule, Log: log})
	cancelBuild()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build the cluster binaries:", err)
		return 1
	}
	state := "cached"
	if bin.Cold {
		// Cold for this cache directory; Go's own build cache may still
		// have made it quick (a build from nothing takes about 8 minutes).
		state = "cold build"
	}
	fmt.Printf("e2e: cluster binaries %s (%s): %.2fs, %s\n", bin.KubernetesVersion, state, bin.Duration.Seconds(), bin.Dir)

	// 1b. The YuniKorn scheduler, from its own wrapper module (about 5.5
	// minutes cold).
	buildCtx, cancelBuild = context.WithTimeout(ctx, 45*time.Minute)
	yk, err := kbuild.EnsureScheduler(buildCtx, kbuild.Options{ModuleDir: filepath.Join(repo, "e2e", "yunikorn"), Log: log})
	cancelBuild()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build the YuniKorn scheduler:", err)
		return 1
	}
	state = "cached"
	if yk.Cold {
		state = "cold build"
	}
	fmt.Printf("e2e: YuniKorn scheduler %s (core %s) (%s): %.2fs, %s\n", yk.K8shimVersion, yk.CoreVersion, state,
		yk.Duration.Seconds(), yk.Path)

	// 1b'. YuniKorn's admission controller, from the same wrapper module
	// (its dependencies are the scheduler's, already compiled).
	buildCtx, cancelBuild = context.WithTimeout(ctx, 45*time.Minute)
	ykac, err := kbuild.EnsureAdmissionController(buildCtx, kbuild.Options{ModuleDir: filepath.Join(repo, "e2e", "yunikorn"), Log: log})
	cancelBuild()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build YuniKorn's admission controller:", err)
		return 1
	}
	state = "cached"
	if ykac.Cold {
		state = "cold build"
	}
	fmt.Printf("e2e: YuniKorn admission controller %s (%s): %.2fs, %s\n", ykac.K8shimVersion, state, ykac.Duration.Seconds(), ykac.Path)

	// 1c. The operators of the workloads scenarios, each from its wrapper
	// module under e2e/operators (a few minutes each, cold). The second
	// pass runs only the YuniKorn scenarios and skips them, and so does a
	// pass on an older Kubernetes, which runs the core scenarios only.
	var operators map[string]kbuild.OperatorResult
	ownKube := kubeModule == filepath.Join(repo, "e2e")
	if os.Getenv("E2E_SHARED_CONTROLLER_CREDENTIALS") != "1" && ownKube {
		operators = map[string]kbuild.OperatorResult{}
		for _, op := range []struct {
			op  kbuild.Operator
			dir string
		}{{kbuild.KubeRay, "kuberay"}, {kbuild.JobSet, "jobset"}, {kbuild.TrainingOperator, "training"}} {
			buildCtx, cancelBuild = context.WithTimeout(ctx, 45*time.Minute)
			res, err := kbuild.EnsureOperator(buildCtx, kbuild.Options{ModuleDir: filepath.Join(repo, "e2e", "operators", op.dir), Log: log}, op.op)
			cancelBuild()
			if err != nil {
				fmt.Fprintf(os.Stderr, "e2e: build %s: %v\n", op.op.Name, err)
				return 1
			}
			state = "cached"
			if res.Cold {
				state = "cold build"
			}
			fmt.Printf("e2e: %s %s (%s): %.2fs, %s\n", op.op.Name, res.Version, state, res.Duration.Seconds(), res.Path)
			operators[op.op.Name] = res
		}
	}

	if buildOnly {
		return 0
	}

	// 2. The control plane.
	began := time.Now()
	// YuniKorn's design requires both controller credential modes to work;
	// `make e2e` runs the YuniKorn scenarios a second time with shared ones.
	shared := os.Getenv("E2E_SHARED_CONTROLLER_CREDENTIALS") == "1"
	fmt.Printf("e2e: kube-controller-manager --use-service-account-credentials=%v\n", !shared)
	c, err := cluster.Start(ctx, cluster.Options{
		BinDir:                      bin.Dir,
		Users:                       users,
		PidRoot:                     filepath.Join(filepath.Dir(bin.Dir), "pids"),
		SharedControllerCredentials: shared,
		// Only TestWatchCacheListPaths's requests (which list path serve's
		// cache took) and TestMonitorAuditLog's (what monitor mode let
		// through).
		AuditUsers: []string{listPathsUser, monitorAuditUser},
		// TestAuditLogReplay's, with the objects they send.
		AuditRequestUsers: []string{forgeAuditUser},
		Log:               log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start the cluster:", err)
		return 1
	}
	interrupted.setCluster(c)
	e2e = &suite{cluster: c, serveBinary: serveBinary, sharedControllerCredentials: shared, operators: operators,
		ykAdmissionBinary: ykac.Path, binDir: bin.Dir, pidRoot: filepath.Join(filepath.Dir(bin.Dir), "pids"), kubeVersion: bin.KubernetesVersion, ownKube: ownKube, timings: map[string]time.Duration{}}

	code := func() int {
		defer func() {
			stopped := time.Now()
			if err := c.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: stop the cluster:", err)
			}
			fmt.Printf("e2e: cluster stopped in %.1fs\n", time.Since(stopped).Seconds())
		}()
		fmt.Printf("e2e: cluster started in %.1fs at %s\n", time.Since(began).Seconds(), c.Server)
		began = time.Now()
		if err := e2e.setUp(ctx, repo); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: set up the webhook:", err)
			fmt.Fprintln(os.Stderr, c.LogTails(40))
			return 1
		}
		fmt.Printf("e2e: webhook registered and enforcing in %.1fs\n", time.Since(began).Seconds())
		began = time.Now()
		if err := e2e.setUpScheduler(ctx, yk.Path); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: start the YuniKorn scheduler:", err)
			fmt.Fprintln(os.Stderr, c.LogTails(40))
			return 1
		}
		fmt.Printf("e2e: YuniKorn scheduler healthy in %.1fs at %s\n", time.Since(began).Seconds(), e2e.scheduler.URL)
		began = time.Now()
		code := m.Run()
		fmt.Printf("e2e: scenarios took %.1fs\n", time.Since(began).Seconds())
		e2e.printTimings()
		return code
	}()
	if code == 0 {
		// Passed: the run directory (PKI, logs) is not needed any more.
		_ = os.RemoveAll(c.Dir)
	} else {
		fmt.Printf("e2e: logs, PKI and settings of this run kept in %s\n", c.Dir)
	}
	return code
}

// interruption handles SIGINT and SIGTERM (Ctrl-C, a CI job cancelled):
// the build is cancelled, the cluster stopped, and the process exits. The
// kernel would kill the cluster's processes anyway (Pdeathsig); stopping
// them lets the API server and etcd shut down cleanly.
type interruption struct {
	sigs chan os.Signal
	mu   sync.Mutex
	c    *cluster.Cluster
}

func onSignal(cancel context.CancelFunc) *interruption {
	in := &interruption{sigs: make(chan os.Signal, 1)}
	signal.Notify(in.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-in.sigs
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping\n", s)
		cancel()
		in.mu.Lock()
		c := in.c
		in.mu.Unlock()
		if c != nil {
			_ = c.Stop()
			fmt.Fprintf(os.Stderr, "e2e: logs of this run kept in %s\n", c.Dir)
		}
		os.Exit(130)
	}()
	return in
}

func (in *interruption) setCluster(c *cluster.Cluster) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.c = c
}

// setUp creates the clients and the RBAC, starts the main webhook, registers
// the shipped webhook configuration for it and waits until it enforces.
func (s *suite) setUp(ctx context.Context, repo string) error {
	s.repo = repo
	s.clients = map[string]*kubernetes.Clientset{}
	s.identity = map[string]identity{}
	for _, u := range users {
		cs, err := s.cluster.Clientset(u.Name)
		if err != nil {
			return err
		}
		s.clients[u.Name] = cs
		id, err := whoAmI(ctx, cs)
		if err != nil {
			return fmt.Errorf("ask who %s is: %w", u.Name, err)
		}
		s.identity[u.Name] = id
	}
	if err := s.checkServerVersion(); err != nil {
		return err
	}
	if err := createWorkloadRole(ctx, s.clients[admin]); err != nil {
		return err
	}

	// What is installed is the Helm chart's rendering (make e2e writes it
	// with Helm's libraries: test/manifests/cmd/chartrender), standalone
	// and Kubewarden variants, which test/manifests checks equal to deploy/.
	standalone, err := cluster.ReadRendering(chartRendering(repo, "E2E_CHART_STANDALONE", "standalone.yaml"))
	if err != nil {
		return err
	}
	kubewarden, err := cluster.ReadRendering(chartRendering(repo, "E2E_CHART_KUBEWARDEN", "kubewarden.yaml"))
	if err != nil {
		return err
	}
	cm, err := standalone.One("ConfigMap")
	if err != nil {
		return err
	}
	settings, err := cluster.AdaptSettings(cm, externalUsers)
	if err != nil {
		return err
	}
	s.settingsFile = filepath.Join(s.cluster.Dir, "settings.yaml")
	if err := os.WriteFile(s.settingsFile, settings, 0o600); err != nil {
		return fmt.Errorf("write the settings: %w", err)
	}
	if s.mwcManifest, err = standalone.One("MutatingWebhookConfiguration"); err != nil {
		return err
	}
	if s.vwcManifest, err = standalone.OneValidating(); err != nil {
		return err
	}
	if s.kubewardenPolicies = kubewarden.All("ClusterAdmissionPolicy"); len(s.kubewardenPolicies) != 2 {
		return fmt.Errorf("the chart's Kubewarden rendering has %d ClusterAdmissionPolicies, want the pair", len(s.kubewardenPolicies))
	}
	// The rendered Deployment's --validate-overlay, so /validate is the
	// validating twin exactly as installed.
	deployment, err := standalone.One("Deployment")
	if err != nil {
		return err
	}
	overlay, err := deploymentFlag(deployment, "validate-overlay")
	if err != nil {
		return err
	}
	s.webhook, err = s.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-main", Binary: s.serveBinary, SettingsFile: s.settingsFile,
		ExtraArgs: []string{"--validate-overlay", overlay},
	})
	if err != nil {
		return err
	}
	if _, err := s.registerWebhook(ctx, "yunikorn-userinfo-e2e", s.webhook, webhookMain); err != nil {
		return err
	}
	// The validating twin as shipped, so every scenario also shows that it
	// accepts what the policy produced.
	vwc, err := cluster.AdaptValidatingWebhookConfiguration(s.vwcManifest, "yunikorn-userinfo-e2e-validate", s.webhook.BaseURL,
		s.cluster.PKI.CAPEM, map[string]string{webhookLabel: webhookMain})
	if err != nil {
		return err
	}
	if _, err := s.clients[admin].AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create validating webhook configuration %s: %w", vwc.Name, err)
	}
	// A namespace of its own to watch the configuration take effect; the
	// tests' namespaces then find it in force.
	ns, err := createNamespace(ctx, s.clients[admin], "setup", map[string]string{webhookLabel: webhookMain})
	if err != nil {
		return err
	}
	return waitEnforced(ctx, ns)
}

// checkServerVersion reads the API server's version: the one built
// (s.kubeVersion, which the build stamps into the binary), else the run
// would test another version than it claims.
func (s *suite) checkServerVersion() error {
	v, err := s.clients[admin].Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("read the API server's version: %w", err)
	}
	if v.GitVersion != s.kubeVersion {
		return fmt.Errorf("the API server reports version %s, but %s was built", v.GitVersion, s.kubeVersion)
	}
	minor, err := strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
	if err != nil || v.Major != "1" {
		return fmt.Errorf("the API server reports version %s.%s: want 1.N", v.Major, v.Minor)
	}
	s.kubeMinor = minor
	fmt.Printf("e2e: the API server is Kubernetes %s\n", v.GitVersion)
	return nil
}

// chartRendering is the path of a chart rendering: $env, else build/chart/name.
func chartRendering(repo, env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	return filepath.Join(repo, "build", "chart", name)
}

// registerWebhook creates the shipped MutatingWebhookConfiguration, adapted
// to wh and to the namespaces labelled webhookLabel=label.
func (s *suite) registerWebhook(ctx context.Context, name string, wh *cluster.Webhook, label string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	mwc, err := cluster.AdaptWebhookConfiguration(s.mwcManifest, name, wh.BaseURL, s.cluster.PKI.CAPEM, map[string]string{webhookLabel: label})
	if err != nil {
		return nil, err
	}
	created, err := s.clients[admin].AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create webhook configuration %s: %w", name, err)
	}
	return created, nil
}

// createWorkloadRole creates the ClusterRole that every test namespace binds
// the test users to. Explicit rules rather than the aggregated "edit" role,
// whose rules appear only once the aggregation controller has run.
func createWorkloadRole(ctx context.Context, cs kubernetes.Interface) error {
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: workloadRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "replicationcontrollers"}, Verbs: verbs},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: verbs},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: verbs},
			// The operators' kinds (TestOperators).
			{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters", "rayjobs", "rayservices"}, Verbs: verbs},
			{APIGroups: []string{"jobset.x-k8s.io"}, Resources: []string{"jobsets"}, Verbs: verbs},
			{APIGroups: []string{"kubeflow.org"}, Resources: []string{"pytorchjobs"}, Verbs: verbs},
			// The spark operator's kind (TestAdoptPreexisting).
			{APIGroups: []string{"sparkoperator.k8s.io"}, Resources: []string{"sparkapplications"}, Verbs: verbs},
		},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create cluster role %s: %w", workloadRole, err)
	}
	return nil
}

// record keeps a test's duration for the summary.
func (s *suite) record(name string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timings[name] = d
}

func (s *suite) printTimings() {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.timings))
	for n := range s.timings {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Println("e2e: scenario timings (wall clock, scenarios run in parallel):")
	for _, n := range names {
		fmt.Printf("  %-45s %6.1fs\n", n, s.timings[n].Seconds())
	}
}
