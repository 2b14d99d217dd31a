package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// Bounds of the waits. The controllers act within about a second on an
// idle machine; the bounds leave room for a machine busy with other builds.
const (
	controllerTimeout = 60 * time.Second
	enforceTimeout    = 60 * time.Second
	pollInterval      = 250 * time.Millisecond
)

// The webhooks of the shipped configuration, as the API server names them
// in its refusals.
const (
	workloadsWebhook         = "workloads.user-info.yunikorn.apache.org"
	workloadsValidateWebhook = "workloads.validate.user-info.yunikorn.apache.org"
	subresourcesWebhook      = "pod-subresources.user-info.yunikorn.apache.org"
	bindingWebhook           = "pod-binding.user-info.yunikorn.apache.org"
)

// Messages of the policy (docs/BEHAVIOUR.md §4).
const (
	msgChangeNotAllowed = "user info annotation change is not allowed"
	// msgNoOwnerNoAdopters refuses an UPDATE that adds the annotation to
	// an object that records none, where no adopter is set (§4.13).
	msgNoOwnerNoAdopters = msgChangeNotAllowed + ": the object records no owner (it was created before the policy), " +
		"and only an adopter may record one: settings.adopters names none"
	warnRestored = "annotation " + annotationKey + " cannot be removed: its previous value was kept"
)

// identity is a user as the API server authenticates them, which is what it
// puts in AdmissionRequest.userInfo.
type identity struct {
	User   string
	Groups []string
}

// annotation is the value the policy records for id: docs/BEHAVIOUR.md §2's compact
// JSON, user then groups, groups in the server's order, empty parts left
// out, escaped as encoding/json does (which is what YuniKorn writes).
func (id identity) annotation() string {
	v := struct {
		User   string   `json:"user,omitempty"`
		Groups []string `json:"groups,omitempty"`
	}{id.User, id.Groups}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // two strings and a string slice always encode
	}
	return string(b)
}

// notAllowed is the refusal of a submitter who may not supply the
// annotation (docs/BEHAVIOUR.md §4.1, rule 3).
func (id identity) notAllowed() string {
	return "user " + id.User + " with groups [" + strings.Join(id.Groups, ",") + "] is not allowed to set user annotation"
}

// whoAmI asks the API server who the client is (SelfSubjectReview): the
// same user and groups it sends to admission webhooks. The expected
// annotations are computed from this answer, not guessed.
func whoAmI(ctx context.Context, cs kubernetes.Interface) (identity, error) {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return identity{}, fmt.Errorf("self subject review: %w", err)
	}
	return identity{User: r.Status.UserInfo.Username, Groups: r.Status.UserInfo.Groups}, nil
}

// start begins a scenario: it runs in parallel with the others, its
// duration goes into the summary, and when it fails the end of every
// process's log is printed.
func start(t *testing.T) {
	t.Helper()
	t.Parallel()
	timed(t)
}

// startAlone begins a scenario that must not share the machine with the
// others, because it measures under load: it runs before the parallel
// ones start.
func startAlone(t *testing.T) {
	t.Helper()
	timed(t)
}

// timed records the scenario's duration and, when it fails, prints the end
// of every process's log.
func timed(t *testing.T) {
	t.Helper()
	began := time.Now()
	t.Cleanup(func() {
		took := time.Since(began)
		e2e.record(t.Name(), took)
		t.Logf("%s took %.1fs", t.Name(), took.Seconds())
		if !t.Failed() {
			return
		}
		// Into a file beside the logs, so the assertions that failed
		// stay at the end of the test's output.
		tails := e2e.cluster.LogTails(40)
		file := filepath.Join(e2e.cluster.Dir, "failed-"+strings.ReplaceAll(t.Name(), "/", "_")+".tails.log")
		if err := os.WriteFile(file, []byte(tails), 0o600); err != nil {
			t.Logf("process logs:\n%s", tails)
			return
		}
		t.Logf("the last 40 lines of every process's log: %s", file)
	})
}

// client returns the typed client of a test user.
func client(user string) *kubernetes.Clientset { return e2e.clients[user] }

// warningRecorder keeps the warnings the API server sends (the Warning
// header), which client-go would otherwise only log.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// take returns the warnings so far and forgets them.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

// clientWithWarnings returns a client of user whose warnings are recorded.
func clientWithWarnings(t *testing.T, user string) (*kubernetes.Clientset, *warningRecorder) {
	t.Helper()
	cfg, err := e2e.cluster.Config(user)
	require.NoError(t, err)
	rec := &warningRecorder{}
	cfg.WarningHandler = rec
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs, rec
}

// impersonatingClient returns a client that authenticates as the admin and
// acts as user with groups (Impersonate-User, Impersonate-Group).
func impersonatingClient(t *testing.T, user string, groups ...string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := e2e.cluster.Config(admin)
	require.NoError(t, err)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// newNamespace creates the test's own namespace, labelled for the given
// webhook configuration ("" for none), with the test users bound to the
// workload role, and waits until it is usable: its default ServiceAccount
// exists (Pod creation needs it), the users' permissions are in force, and,
// when labelled, the webhook enforces there.
func newNamespace(t *testing.T, webhook string) string {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{}
	if webhook != "" {
		labels[webhookLabel] = webhook
	}
	ns, err := createNamespace(ctx, client(admin), t.Name(), labels)
	require.NoError(t, err)
	t.Logf("namespace %s", ns)
	if webhook != "" {
		require.NoError(t, waitEnforced(ctx, ns))
	}
	return ns
}

// createNamespace creates a namespace named after the test and prepares it
// as newNamespace describes (the webhook wait aside).
func createNamespace(ctx context.Context, cs kubernetes.Interface, testName string, labels map[string]string) (string, error) {
	created, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-" + nameFor(testName) + "-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create namespace for %s: %w", testName, err)
	}
	return prepareNamespace(ctx, cs, created.Name)
}

// prepareNamespace binds the test users in an existing namespace and waits
// until it is usable, as createNamespace describes.
func prepareNamespace(ctx context.Context, cs kubernetes.Interface, ns string) (string, error) {
	// The users by name, and group dev as well, so that users who exist
	// only through impersonation (carol in dev) have the same rights.
	subjects := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "dev"}}
	for _, u := range []string{alice, bob, livy, dave, obrien} {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-users"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: workloadRole},
		Subjects:   subjects,
	}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("bind the test users in %s: %w", ns, err)
	}
	var last string
	err := cluster.Poll(ctx, controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			last = "service account default: " + err.Error()
			return false, nil
		}
		// RBAC is served from informers: a new binding takes a moment.
		for _, u := range []string{alice, bob, livy, dave, obrien} {
			r, err := e2e.clients[u].AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Verb: "create", Resource: "pods",
				}},
			}, metav1.CreateOptions{})
			if err != nil || !r.Status.Allowed {
				last = fmt.Sprintf("%s may not create pods yet (%v)", u, err)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("wait for namespace %s to be usable (%s): %w", ns, last, err)
	}
	return ns, nil
}

// waitEnforced polls a dry-run Pod create as the admin until the returned
// Pod carries the annotation: webhook configurations and namespace labels
// reach the API server's admission chain through informers, so they take
// effect a little after they are written.
func waitEnforced(ctx context.Context, ns string) error {
	var last string
	err := cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		p, err := client(admin).CoreV1().Pods(ns).Create(ctx, newPod("enforced", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = "no annotation yet"
		return p.Annotations[annotationKey] != "", nil
	})
	if err != nil {
		return fmt.Errorf("wait for the webhook to enforce in %s (%s): %w", ns, last, err)
	}
	return nil
}

var notName = regexp.MustCompile(`[^a-z0-9]+`)

// nameFor turns a test name into a short DNS label part.
func nameFor(testName string) string {
	s := strings.TrimPrefix(testName, "Test")
	s = strings.Trim(notName.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	return s
}

// newPod returns a Pod with one container. No kubelet runs it.
func newPod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       podSpec(corev1.RestartPolicyAlways),
	}
}

func podSpec(restart corev1.RestartPolicy) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy: restart,
		Containers:    []corev1.Container{{Name: "c", Image: "registry.invalid/e2e:1"}},
	}
}

// podTemplate returns a template with the label app=name.
func podTemplate(name string, annotations map[string]string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}, Annotations: annotations},
		Spec:       podSpec(restart),
	}
}

// newDeployment returns a Deployment of replicas Pods labelled app=name.
func newDeployment(name string, replicas int32, templateAnnotations map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, templateAnnotations, corev1.RestartPolicyAlways),
		},
	}
}

// waitPods waits until exactly want Pods match selector, and returns them.
func waitPods(t *testing.T, ns, selector string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := cluster.Poll(t.Context(), controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		l, err := client(admin).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		pods = l.Items
		return len(pods) == want, nil
	})
	require.NoErrorf(t, err, "wait for %d pods matching %q in %s: have %d", want, selector, ns, len(pods))
	return pods
}

// requireRefused checks that err is the API server's refusal by the named
// webhook, with the policy's message and code.
func requireRefused(t *testing.T, err error, webhook, message string) {
	t.Helper()
	require.Error(t, err, "the API server accepted a request the webhook must refuse")
	var status apierrors.APIStatus
	require.Truef(t, errors.As(err, &status), "want an API status error, got %T: %v", err, err)
	got := status.Status().Message
	// A refused supplied value ends by showing the submitter's record.
	if record := recordSuffix.FindString(got); record != "" && !strings.HasSuffix(message, record) {
		got = strings.TrimSuffix(got, record)
	}
	assert.Equal(t, fmt.Sprintf("admission webhook %q denied the request: %s", webhook, message), got)
	assert.EqualValues(t, 403, status.Status().Code)
}

// recordSuffix is how the policy ends a refusal of a supplied value: the
// record it would write for the submitter.
var recordSuffix = regexp.MustCompile(`; the value is not exactly your record; it would be \{"user":.*\}$`)

// admissionsFor returns the main webhook's log lines for a namespace.
func admissionsFor(t *testing.T, wh *cluster.Webhook, ns string) []cluster.AdmissionLog {
	t.Helper()
	all, err := wh.Admissions()
	require.NoError(t, err)
	var out []cluster.AdmissionLog
	for _, a := range all {
		if a.Namespace == ns {
			out = append(out, a)
		}
	}
	return out
}

// countAdmissions counts the lines with the given kind, operation, user and
// decision ("" matches any).
func countAdmissions(logs []cluster.AdmissionLog, kind, op, user, decision string) int {
	n := 0
	for _, a := range logs {
		if a.Kind == kind && a.Operation == op && (user == "" || a.User == user) && (decision == "" || a.Decision == decision) {
			n++
		}
	}
	return n
}

// Controller identities with --use-service-account-credentials.
const (
	deploymentController  = "system:serviceaccount:kube-system:deployment-controller"
	replicaSetController  = "system:serviceaccount:kube-system:replicaset-controller"
	statefulSetController = "system:serviceaccount:kube-system:statefulset-controller"
	jobController         = "system:serviceaccount:kube-system:job-controller"
	cronJobController     = "system:serviceaccount:kube-system:cronjob-controller"
)
