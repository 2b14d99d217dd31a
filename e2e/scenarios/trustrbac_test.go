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
// pattern trusts may submit for users, in their groups, where RBAC grants it
// the setter role (a RoleBinding in one namespace), and nowhere else; deleting the binding
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
	waitAccess(t, notebookID, granted, "set", "yunikorn.apache.org", "usergroups", true)
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
	// The binding granted both the user and the group the claim names; the
	// cached answer that expires first (either) refuses the claim.
	groupAccess := fmt.Sprintf(`%s: RBAC does not grant verb "set" on usergroups.yunikorn.apache.org "analysts" in namespace %q`, notebookID.notAllowed(), granted)
	if strings.Contains(last.Error(), "usergroups.yunikorn.apache.org") {
		requireRefusedPrefix(t, last, workloadsWebhook, groupAccess)
	} else {
		requireRefusedPrefix(t, last, workloadsWebhook, access(granted))
	}
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
	// A refused supplied value ends by showing the submitter's record.
	got := strings.TrimSuffix(status.Status().Message, recordSuffix.FindString(status.Status().Message))
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

// The wildcard probes' verb: a review that differs from the granted one in
// its verb only, with a verb no rule names (docs/BEHAVIOUR.md §3.1).
const probeVerb = "yunikorn-userinfo-wildcard-probe"

// TestTrustRBAC_wildcardsAndGroups: trustRBAC counts only a grant written
// for it. A namespace owner whose Role has "*" on "*" passes the review of
// any claimed user, and the admin (system:masters, which kube-apiserver
// allows everything) passes every review: both are refused, because the
// API server grants them the probes too. A front-end with a Role naming
// carol and the group analysts may claim carol in analysts, and not in
// system:masters, since every claimed group is reviewed. With
// acceptWildcardGrants, system:masters is trusted again.
func TestTrustRBAC_wildcardsAndGroups(t *testing.T) {
	start(t)
	ctx := t.Context()
	admin := client(admin)

	// The webhook's reviewer: SubjectAccessReviews and nothing else (a
	// role of this test's own, so that TestTrustRBAC's shipped roles can
	// come and go in parallel).
	reviewerRole := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-trustrbac-wildcards-reviewer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}}},
	}
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, reviewerRole, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), reviewerRole.Name, metav1.DeleteOptions{})
	})
	reviewer := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reviewerRole.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reviewerRole.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: reviewerUser}},
	}
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, reviewer, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.WithoutCancel(ctx), reviewer.Name, metav1.DeleteOptions{})
	})

	const strict, lenient = "rbac-strict", "rbac-lenient"
	startWebhookWith(t, strict, strict, "trustRBAC: true", reviewerUser)
	startWebhookWith(t, lenient, lenient, "trustRBAC: {acceptWildcardGrants: true}", reviewerUser)
	ns := newNamespace(t, strict)

	// bind gives the service account name of ns a Role of ns with rules.
	bind := func(name string, rules []rbacv1.PolicyRule) (*kubernetes.Clientset, identity) {
		t.Helper()
		_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		require.NoError(t, err)
		sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}
		_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{sa},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-workloads"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: workloadRole},
			Subjects:   []rbacv1.Subject{sa},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return serviceAccountClient(t, ns, name)
	}
	userinfo := func(name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Verb: "set", Group: "yunikorn.apache.org", Resource: "userinfos", Name: name}
	}
	usergroup := func(name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Verb: "set", Group: "yunikorn.apache.org", Resource: "usergroups", Name: name}
	}

	// The namespace owner: everything in its namespace, through wildcards,
	// as an admin role written with "*" has.
	owner, ownerID := bind("owner", []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}})
	// The front-end: a Role written for trustRBAC, for carol and analysts.
	frontend, frontendID := bind("frontend", []rbacv1.PolicyRule{
		{APIGroups: []string{"yunikorn.apache.org"}, Resources: []string{"userinfos"}, ResourceNames: []string{"carol"}, Verbs: []string{"set"}},
		{APIGroups: []string{"yunikorn.apache.org"}, Resources: []string{"usergroups"}, ResourceNames: []string{"analysts"}, Verbs: []string{"set"}},
	})
	probe := userinfo("carol")
	probe.Verb = probeVerb
	waitReview(t, ownerID, userinfo("carol"), true)
	waitReview(t, ownerID, probe, true)
	waitReview(t, frontendID, userinfo("carol"), true)
	waitReview(t, frontendID, usergroup("analysts"), true)
	waitReview(t, frontendID, probe, false)
	waitAccess(t, frontendID, ns, "create", "", "pods", true)

	claim := func(cs *kubernetes.Clientset, ns, name, value string) error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, newPod(name, map[string]string{annotationKey: value}), metav1.CreateOptions{})
		return err
	}
	wildcard := func(id identity) string {
		return fmt.Sprintf(`%s: RBAC grants verb "set" on userinfos.yunikorn.apache.org "carol" in namespace %q through a wildcard: `+
			`it also grants verb %q on userinfos.yunikorn.apache.org "carol", which no rule names`, id.notAllowed(), ns, probeVerb)
	}

	t.Run("namespace owner with * on * is refused", func(t *testing.T) {
		err := claim(owner, ns, "owner-for-carol", `{"user":"carol"}`)
		requireRefusedPrefix(t, err, workloadsWebhook, wildcard(ownerID))
		require.ErrorContains(t, err, `RoleBinding "owner/`+ns+`" of Role "owner"`, "the authorizer's reason names the wildcard grant")
		require.ErrorContains(t, err, "set trustRBAC.acceptWildcardGrants")
	})
	adminID, err := whoAmI(ctx, admin)
	require.NoError(t, err)
	require.Contains(t, adminID.Groups, "system:masters")
	t.Run("system:masters is refused", func(t *testing.T) {
		err := claim(admin, ns, "admin-for-carol", `{"user":"carol"}`)
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("admission webhook %q denied the request: %s", workloadsWebhook, wildcard(adminID)))
	})
	t.Run("front-end claims carol in a granted group", func(t *testing.T) {
		const value = `{"user":"carol","groups":["analysts"]}`
		require.NoError(t, claim(frontend, ns, "frontend-for-carol", value))
		p, err := admin.CoreV1().Pods(ns).Get(ctx, "frontend-for-carol", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, value, p.Annotations[annotationKey], "the supplied identity is kept")
	})
	t.Run("front-end claims a group it is not granted", func(t *testing.T) {
		err := claim(frontend, ns, "frontend-for-masters", `{"user":"carol","groups":["analysts","system:masters"]}`)
		requireRefusedPrefix(t, err, workloadsWebhook, fmt.Sprintf(
			`%s: RBAC does not grant verb "set" on usergroups.yunikorn.apache.org "system:masters" in namespace %q`, frontendID.notAllowed(), ns))
	})
	t.Run("front-end claims a user it is not granted", func(t *testing.T) {
		err := claim(frontend, ns, "frontend-for-dave", `{"user":"dave","groups":["analysts"]}`)
		requireRefusedPrefix(t, err, workloadsWebhook, fmt.Sprintf(
			`%s: RBAC does not grant verb "set" on userinfos.yunikorn.apache.org "dave" in namespace %q`, frontendID.notAllowed(), ns))
	})
	t.Run("acceptWildcardGrants trusts system:masters", func(t *testing.T) {
		other := newNamespace(t, lenient)
		const value = `{"user":"carol","groups":["system:masters"]}`
		require.NoError(t, claim(admin, other, "admin-for-carol", value))
		p, err := admin.CoreV1().Pods(other).Get(ctx, "admin-for-carol", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, value, p.Annotations[annotationKey])
	})
}

// waitReview waits until RBAC (served from informers) answers the review
// of ra for id as want.
func waitReview(t *testing.T, id identity, ra authorizationv1.ResourceAttributes, want bool) {
	t.Helper()
	var last string
	err := cluster.Poll(t.Context(), controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		r, err := client(admin).AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: id.User, Groups: id.Groups, ResourceAttributes: &ra},
		}, metav1.CreateOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("allowed=%v %s", r.Status.Allowed, r.Status.Reason)
		return r.Status.Allowed == want, nil
	})
	require.NoErrorf(t, err, "wait for %+v to be %v for %s (%s)", ra, want, id.User, last)
}
