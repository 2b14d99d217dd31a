package scenarios

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// reviewerUser is the identity the trustRBAC webhook asks the API server
// with: it holds only the shipped access-reviewer role.
const reviewerUser = "userinfo-webhook"

// reviewTTL is how long serve keeps a SubjectAccessReview answer (as
// policy-server does): the longest a revoked grant can still be used.
const reviewTTL = 5 * time.Second

// TestTrustRBAC: with trustRBAC, a front-end's service account that no
// pattern trusts may submit for users where RBAC grants it the setter role
// (a RoleBinding in one namespace), and nowhere else; deleting the binding
// ends it within the answer cache's lifetime. The roles are the shipped
// ones (deploy/webhook/trust-rbac/rbac.yaml), and the webhook asks with an
// identity that holds only the reviewer role.
func TestTrustRBAC(t *testing.T) {
	start(t)
	ctx := t.Context()
	admin := client(admin)

	roles := shippedClusterRoles(t)
	require.Len(t, roles, 2)
	for _, r := range roles {
		_, err := admin.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
		require.NoError(t, err, "create ClusterRole %s", r.Name)
		t.Cleanup(func() {
			_ = admin.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), r.Name, metav1.DeleteOptions{})
		})
	}
	reviewer := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-userinfo-webhook-reviewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "yunikorn-userinfo-access-reviewer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: reviewerUser}},
	}
	_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, reviewer, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.WithoutCancel(ctx), reviewer.Name, metav1.DeleteOptions{})
	})

	startWebhookWith(t, "rbac", webhookRBAC, "trustRBAC: true", reviewerUser)

	granted, other := newNamespace(t, webhookRBAC), newNamespace(t, webhookRBAC)
	// The front-end: a notebook server's service account, which may create
	// Pods in both namespaces but is granted the setter role in one.
	_, err = admin.CoreV1().ServiceAccounts(granted).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "notebook"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "notebook", Namespace: granted}
	for _, ns := range []string{granted, other} {
		_, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "notebook-workloads"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: workloadRole},
			Subjects:   []rbacv1.Subject{sa},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	grant := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "notebook-submits-for-users"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "yunikorn-userinfo-userinfo-setter"},
		Subjects:   []rbacv1.Subject{sa},
	}
	_, err = admin.RbacV1().RoleBindings(granted).Create(ctx, grant, metav1.CreateOptions{})
	require.NoError(t, err)
	notebook, notebookID := serviceAccountClient(t, granted, "notebook")
	waitAccess(t, notebookID, granted, "set", "yunikorn.apache.org", "userinfos", true)
	waitAccess(t, notebookID, other, "create", "", "pods", true)

	carol := `{"user":"carol","groups":["analysts"]}`
	forCarol := map[string]string{annotationKey: carol}
	access := func(ns string) string {
		return fmt.Sprintf(`%s: RBAC does not grant verb "set" on userinfos.yunikorn.apache.org "carol" in namespace %q`, notebookID.notAllowed(), ns)
	}

	t.Run("granted namespace", func(t *testing.T) {
		_, err := notebook.CoreV1().Pods(granted).Create(ctx, newPod("for-carol", forCarol), metav1.CreateOptions{})
		require.NoError(t, err)
		p, err := admin.CoreV1().Pods(granted).Get(ctx, "for-carol", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, carol, p.Annotations[annotationKey], "the supplied identity is kept")
		_, err = notebook.CoreV1().Pods(granted).Create(ctx, newPod("own", nil), metav1.CreateOptions{})
		require.NoError(t, err)
		p, err = admin.CoreV1().Pods(granted).Get(ctx, "own", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, notebookID.annotation(), p.Annotations[annotationKey], "without one, its own identity is recorded")
	})
	t.Run("other namespace", func(t *testing.T) {
		_, err := notebook.CoreV1().Pods(other).Create(ctx, newPod("for-carol", forCarol), metav1.CreateOptions{})
		requireRefusedPrefix(t, err, workloadsWebhook, access(other))
	})

	// The cost: dry-run creates that claim carol (a cached review) against
	// ones that carry the submitter's own identity (no review).
	const rounds = 20
	timeCreates := func(annotations map[string]string) time.Duration {
		var ds []time.Duration
		for i := range rounds {
			began := time.Now()
			_, err := notebook.CoreV1().Pods(granted).Create(ctx, newPod(fmt.Sprintf("cost-%d", i), annotations),
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			require.NoError(t, err)
			ds = append(ds, time.Since(began))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	own := timeCreates(nil)
	claimed := timeCreates(forCarol)
	t.Logf("median dry-run create through the webhook: own identity %v, claiming carol with a cached review %v", own, claimed)
	e2e.record(t.Name()+"/median create, own identity", own)
	e2e.record(t.Name()+"/median create, RBAC-granted claim", claimed)

	// Revocation: the last allowed answer was cached just now; after the
	// binding is deleted, the claim must be refused within the cache's
	// lifetime (plus the moment RBAC's own informers take).
	_, err = notebook.CoreV1().Pods(granted).Create(ctx, newPod("before-revocation", forCarol), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	revoked := time.Now()
	require.NoError(t, admin.RbacV1().RoleBindings(granted).Delete(ctx, grant.Name, metav1.DeleteOptions{}))
	var last error
	err = cluster.Poll(ctx, 3*reviewTTL, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, last = notebook.CoreV1().Pods(granted).Create(ctx, newPod("after-revocation", forCarol), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil, nil
	})
	took := time.Since(revoked)
	require.NoError(t, err, "the claim is still admitted %v after the binding was deleted", took)
	requireRefusedPrefix(t, last, workloadsWebhook, access(granted))
	t.Logf("revocation took effect after %v (answer cache: %v)", took, reviewTTL)
	e2e.record(t.Name()+"/revocation in effect after", took)
	assert.Less(t, took, reviewTTL+2*time.Second, "a revoked grant outlives the answer cache")
}

// shippedClusterRoles reads the ClusterRoles of deploy/webhook/trust-rbac.
func shippedClusterRoles(t *testing.T) []*rbacv1.ClusterRole {
	t.Helper()
	f, err := os.Open(filepath.Join(e2e.repo, "deploy", "webhook", "trust-rbac", "rbac.yaml"))
	require.NoError(t, err)
	defer f.Close()
	var roles []*rbacv1.ClusterRole
	dec := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal(doc, &meta))
		if meta.Kind != "ClusterRole" {
			continue
		}
		var r rbacv1.ClusterRole
		require.NoError(t, yaml.UnmarshalStrict(doc, &r))
		roles = append(roles, &r)
	}
	return roles
}

// serviceAccountClient returns a client that authenticates with a bound
// token of the service account, and who the API server says it is.
func serviceAccountClient(t *testing.T, ns, name string) (*kubernetes.Clientset, identity) {
	t.Helper()
	expiry := int64(3600)
	tok, err := client(admin).CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "token of %s/%s", ns, name)
	cfg, err := e2e.cluster.Config(admin)
	require.NoError(t, err)
	cfg.BearerToken = tok.Status.Token
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	id, err := whoAmI(t.Context(), cs)
	require.NoError(t, err)
	return cs, id
}

// waitAccess waits until RBAC (served from informers) answers a review
// for id as want.
func waitAccess(t *testing.T, id identity, ns, verb, group, resource string, want bool) {
	t.Helper()
	var last string
	err := cluster.Poll(t.Context(), controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		r, err := client(admin).AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: id.User, Groups: id.Groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource}},
		}, metav1.CreateOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("allowed=%v %s", r.Status.Allowed, r.Status.Reason)
		return r.Status.Allowed == want, nil
	})
	require.NoErrorf(t, err, "wait for %s %s.%s in %s to be %v for %s (%s)", verb, resource, group, ns, want, id.User, last)
}

// requireRefusedPrefix is requireRefused for a message that the
// authorizer may extend (a reason in parentheses).
func requireRefusedPrefix(t *testing.T, err error, webhook, message string) {
	t.Helper()
	require.Error(t, err, "the API server accepted a request the webhook must refuse")
	var status apierrors.APIStatus
	require.Truef(t, errors.As(err, &status), "want an API status error, got %T: %v", err, err)
	want := fmt.Sprintf("admission webhook %q denied the request: %s", webhook, message)
	got := status.Status().Message
	assert.Truef(t, got == want || strings.HasPrefix(got, want+" ("), "message\n got: %s\nwant: %s[ (reason)]", got, want)
	assert.EqualValues(t, 403, status.Status().Code)
}

// startWebhookWith starts a webhook of the test's own, named serve-NAME, with
// the suite's settings plus the YAML lines extra and the API credentials of
// user, and registers the shipped webhook configuration for the namespaces
// labelled label; both go when the test ends.
func startWebhookWith(t *testing.T, name, label, extra, user string) *cluster.Webhook {
	t.Helper()
	settings, err := os.ReadFile(e2e.settingsFile)
	require.NoError(t, err)
	settingsFile := filepath.Join(e2e.cluster.Dir, "settings-"+name+".yaml")
	require.NoError(t, os.WriteFile(settingsFile, append(settings, "\n"+extra+"\n"...), 0o600))
	return startWebhookFromFile(t, name, label, settingsFile, user)
}

// startWebhookFromFile is startWebhookWith for a settings file of the
// test's own, used as it is; user "" gives the webhook no API credentials.
func startWebhookFromFile(t *testing.T, name, label, settingsFile, user string) *cluster.Webhook {
	t.Helper()
	ctx := t.Context()
	var extraArgs []string
	if user != "" {
		kubeconfig, err := e2e.cluster.WriteKubeconfig(user)
		require.NoError(t, err)
		extraArgs = []string{"--kubeconfig", kubeconfig}
	}
	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-" + name, Binary: e2e.serveBinary, SettingsFile: settingsFile,
		ExtraArgs: extraArgs,
	})
	require.NoError(t, err, "start the %s webhook", name)
	t.Cleanup(func() { assert.NoError(t, wh.Stop(), "stop the %s webhook", name) })
	mwc, err := e2e.registerWebhook(ctx, "yunikorn-userinfo-e2e-"+name, wh, label)
	require.NoError(t, err)
	t.Cleanup(func() {
		err := client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), mwc.Name, metav1.DeleteOptions{})
		assert.NoError(t, err, "delete the %s webhook configuration", name)
	})
	return wh
}
