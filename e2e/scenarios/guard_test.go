package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// A user who sets someone else's identity (or their own name with other
// groups: anything but exactly their own value) on a Pod or a Deployment
// template is refused with the policy's message, and nothing is stored.
func TestForgedIdentityRefused(t *testing.T) {
	start(t)
	ns := newNamespace(t, webhookMain)
	bobs := map[string]string{annotationKey: e2e.identity[bob].annotation()}
	ownNameOnly := map[string]string{annotationKey: identity{User: alice}.annotation()}
	tests := []struct {
		name   string
		create func(ctx context.Context, cs kubernetes.Interface, name string) error
		get    func(ctx context.Context, cs kubernetes.Interface, name string) error
	}{
		{name: "pod-bobs-identity", create: createPod(ns, bobs), get: getPod(ns)},
		{name: "pod-own-name-other-groups", create: createPod(ns, ownNameOnly), get: getPod(ns)},
		{name: "deployment-bobs-identity", create: createDeployment(ns, bobs), get: getDeployment(ns)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.create(t.Context(), client(alice), tc.name)
			requireRefused(t, err, workloadsWebhook, e2e.identity[alice].notAllowed())
			err = tc.get(t.Context(), client(admin), tc.name)
			assert.Truef(t, apierrors.IsNotFound(err), "nothing stored: %v", err)
		})
	}
}

func createPod(ns string, annotations map[string]string) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, name string) error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, newPod(name, annotations), metav1.CreateOptions{})
		return err
	}
}

func getPod(ns string) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, name string) error {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}
}

func createDeployment(ns string, templateAnnotations map[string]string) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, name string) error {
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment(name, 1, templateAnnotations), metav1.CreateOptions{})
		return err
	}
}

func getDeployment(ns string) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, name string) error {
		_, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}
}

// The front-end that externalUsers allows submits a Pod on behalf of a
// user: the value it gives is stored as given, byte for byte. A value that
// is not a well-formed identity is refused even from the front-end.
func TestFrontEndOnBehalf(t *testing.T) {
	start(t)
	ns := newNamespace(t, webhookMain)
	onBehalf := `{"user":"alice","groups":["dev"]}`

	_, err := client(livy).CoreV1().Pods(ns).Create(t.Context(), newPod("for-alice", map[string]string{annotationKey: onBehalf}), metav1.CreateOptions{})
	require.NoError(t, err, "livy creates a pod for alice")
	stored, err := client(admin).CoreV1().Pods(ns).Get(t.Context(), "for-alice", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, onBehalf, stored.Annotations[annotationKey])

	// A case variant of "user": YuniKorn's case-insensitive decoder would
	// read root.
	_, err = client(livy).CoreV1().Pods(ns).Create(t.Context(), newPod("smuggled", map[string]string{annotationKey: `{"user":"alice","USER":"root"}`}), metav1.CreateOptions{})
	require.Error(t, err, "a malformed value from the front-end")
	assert.Contains(t, err.Error(), fmt.Sprintf("admission webhook %q denied the request", workloadsWebhook))
	_, err = client(admin).CoreV1().Pods(ns).Get(t.Context(), "smuggled", metav1.GetOptions{})
	assert.Truef(t, apierrors.IsNotFound(err), "nothing stored: %v", err)
}

// setPodAnnotation and setTemplateAnnotation are the updates a user sends
// to change (or add) user.info: a merge patch of the annotation.
func setPodAnnotation(ctx context.Context, cs kubernetes.Interface, ns, name, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotationKey: value}}})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func setTemplateAnnotation(ctx context.Context, cs kubernetes.Interface, ns, name, value string) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotationKey: value}}}}})
	if err != nil {
		return err
	}
	_, err = cs.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// Changing user.info on an existing Pod or Deployment is refused, for the
// owner, for another user and for the cluster admin, and the stored value
// stays.
func TestAnnotationChangeRefused(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	want := e2e.identity[alice].annotation()
	_, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod("p", nil), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a pod")
	_, err = client(alice).AppsV1().Deployments(ns).Create(ctx, newDeployment("d", 1, nil), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a deployment")

	tests := []struct {
		name  string
		user  string
		value string
	}{
		{name: "owner-to-bob", user: alice, value: e2e.identity[bob].annotation()},
		{name: "other-user-to-self", user: bob, value: e2e.identity[bob].annotation()},
		{name: "admin-to-root", user: admin, value: `{"user":"root"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := setPodAnnotation(t.Context(), client(tc.user), ns, "p", tc.value)
			requireRefused(t, err, workloadsWebhook, msgChangeNotAllowed)
			err = setTemplateAnnotation(t.Context(), client(tc.user), ns, "d", tc.value)
			requireRefused(t, err, workloadsWebhook, msgChangeNotAllowed)

			p, err := client(admin).CoreV1().Pods(ns).Get(t.Context(), "p", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, want, p.Annotations[annotationKey], "pod")
			d, err := client(admin).AppsV1().Deployments(ns).Get(t.Context(), "d", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, want, d.Spec.Template.Annotations[annotationKey], "deployment template")
		})
	}
}

// Adding user.info to an existing object that has none is refused, even
// with the user's own exact value. Such objects exist where the webhook did
// not cover the namespace when they were created: the namespace is created
// unlabelled, the objects are created, then the namespace is labelled and
// the test waits until the webhook enforces there.
func TestAnnotationAddRefused(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, "")
	own := e2e.identity[alice].annotation()

	_, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod("p", nil), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a pod in the uncovered namespace")
	_, err = client(alice).AppsV1().Deployments(ns).Create(ctx, newDeployment("d", 1, nil), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a deployment in the uncovered namespace")
	p, err := client(admin).CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, p.Annotations, annotationKey, "the namespace is not covered yet")

	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, webhookLabel, webhookMain)
	_, err = client(admin).CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err, "label the namespace for the webhook")
	require.NoError(t, waitEnforced(ctx, ns))

	err = setPodAnnotation(ctx, client(alice), ns, "p", own)
	requireRefused(t, err, workloadsWebhook, msgNoOwnerNoAdopters)
	err = setTemplateAnnotation(ctx, client(alice), ns, "d", own)
	requireRefused(t, err, workloadsWebhook, msgNoOwnerNoAdopters)

	p, err = client(admin).CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, p.Annotations, annotationKey, "pod")
	d, err := client(admin).AppsV1().Deployments(ns).Get(ctx, "d", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, d.Spec.Template.Annotations, annotationKey, "deployment template")
}

// applyDeployment is the manifest a GitOps tool applies; templateAnnotations
// is nil for one that never had user.info.
func applyDeployment(ns, name string, replicas int32, templateAnnotations map[string]string) *appsv1ac.DeploymentApplyConfiguration {
	tmpl := corev1ac.PodTemplateSpec().
		WithLabels(map[string]string{"app": name}).
		WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("c").WithImage("registry.invalid/e2e:1")))
	if templateAnnotations != nil {
		tmpl = tmpl.WithAnnotations(templateAnnotations)
	}
	return appsv1ac.Deployment(name, ns).WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(replicas).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": name})).
		WithTemplate(tmpl))
}

// Server-side apply of a manifest without user.info onto an annotated
// Deployment succeeds and user.info keeps its value.
//
// What the real API server does: it computes managedFields before calling
// mutating webhooks, so the annotation the webhook adds is owned by no
// field manager, and an apply that does not list it leaves it alone (no
// UPDATE removes it, no warning). Only a manager that once applied the
// annotation itself (a manifest exported from the cluster, say) owns it;
// when its next manifest lacks it, apply removes it, and the policy puts
// the old value back with its warning. A plain update without it (kubectl
// replace) is the same removal.
func TestServerSideApply(t *testing.T) {
	start(t)
	ns := newNamespace(t, webhookMain)
	want := e2e.identity[alice].annotation()
	cs, warnings := clientWithWarnings(t, alice)
	const manager = "e2e-gitops"
	get := func(t *testing.T, name string) *appsv1.Deployment {
		t.Helper()
		d, err := client(admin).AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		return d
	}

	t.Run("reapply-by-creating-manager", func(t *testing.T) {
		ctx := t.Context()
		_, err := cs.AppsV1().Deployments(ns).Apply(ctx, applyDeployment(ns, "gitops", 1, nil), metav1.ApplyOptions{FieldManager: manager})
		require.NoError(t, err, "first apply creates the deployment")
		created := get(t, "gitops")
		require.Equal(t, want, created.Spec.Template.Annotations[annotationKey], "annotated on create")
		assert.Empty(t, annotationOwners(t, created.ManagedFields), "the webhook's addition is owned by no manager")
		warnings.take()

		_, err = cs.AppsV1().Deployments(ns).Apply(ctx, applyDeployment(ns, "gitops", 2, nil), metav1.ApplyOptions{FieldManager: manager})
		require.NoError(t, err, "re-apply without the annotation")
		got := warnings.take()
		t.Logf("warnings on re-apply: %q", got)
		assert.Empty(t, got, "nothing was removed, so nothing was restored")
		d := get(t, "gitops")
		assert.Equal(t, want, d.Spec.Template.Annotations[annotationKey], "user.info after the re-apply")
		assert.EqualValues(t, 2, *d.Spec.Replicas, "the re-apply took effect")
	})

	t.Run("apply-by-other-manager", func(t *testing.T) {
		ctx := t.Context()
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment("created", 1, nil), metav1.CreateOptions{})
		require.NoError(t, err, "alice creates a deployment")
		warnings.take()
		_, err = cs.AppsV1().Deployments(ns).Apply(ctx, applyDeployment(ns, "created", 2, nil), metav1.ApplyOptions{FieldManager: manager, Force: true})
		require.NoError(t, err, "apply without the annotation")
		got := warnings.take()
		t.Logf("warnings on apply by another manager: %q", got)
		assert.Empty(t, got)
		d := get(t, "created")
		assert.Equal(t, want, d.Spec.Template.Annotations[annotationKey], "user.info after the apply")
		assert.EqualValues(t, 2, *d.Spec.Replicas, "the apply took effect")
	})

	t.Run("apply-dropping-an-owned-annotation", func(t *testing.T) {
		ctx := t.Context()
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment("exported", 1, nil), metav1.CreateOptions{})
		require.NoError(t, err, "alice creates a deployment")
		// The exported manifest carries the stored value: unchanged, so
		// accepted, and now owned by the applier.
		_, err = cs.AppsV1().Deployments(ns).Apply(ctx, applyDeployment(ns, "exported", 1, map[string]string{annotationKey: want}), metav1.ApplyOptions{FieldManager: manager, Force: true})
		require.NoError(t, err, "apply the exported manifest")
		require.Equal(t, []string{manager}, annotationOwners(t, get(t, "exported").ManagedFields), "the applier owns the annotation")
		warnings.take()

		_, err = cs.AppsV1().Deployments(ns).Apply(ctx, applyDeployment(ns, "exported", 2, nil), metav1.ApplyOptions{FieldManager: manager, Force: true})
		require.NoError(t, err, "apply without the annotation")
		assert.Equal(t, []string{warnRestored}, warnings.take(), "the policy's warning reaches the client")
		d := get(t, "exported")
		assert.Equal(t, want, d.Spec.Template.Annotations[annotationKey], "user.info restored")
		assert.EqualValues(t, 2, *d.Spec.Replicas, "the apply took effect")
	})

	t.Run("update-removing-the-annotation", func(t *testing.T) {
		ctx := t.Context()
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment("replaced", 1, nil), metav1.CreateOptions{})
		require.NoError(t, err, "alice creates a deployment")
		warnings.take()
		// The Deployment controller writes the object too (its revision
		// annotation): on a conflict, read it again and retry, as a
		// client does. A conflicting attempt went through the webhook
		// too, so only the last attempt's warnings count.
		var got []string
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, "replaced", metav1.GetOptions{})
			if err != nil {
				return err
			}
			delete(d.Spec.Template.Annotations, annotationKey)
			warnings.take()
			_, err = cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
			got = warnings.take()
			return err
		})
		require.NoError(t, err, "update without the annotation")
		assert.Equal(t, []string{warnRestored}, got, "the policy's warning reaches the client")
		assert.Equal(t, want, get(t, "replaced").Spec.Template.Annotations[annotationKey], "user.info restored")
	})
}

// annotationOwners returns the field managers whose field set holds the
// template's user.info annotation.
func annotationOwners(t *testing.T, mf []metav1.ManagedFieldsEntry) []string {
	t.Helper()
	var owners []string
	for _, m := range mf {
		if m.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec struct {
				Template struct {
					Metadata struct {
						Annotations map[string]json.RawMessage `json:"f:annotations"`
					} `json:"f:metadata"`
				} `json:"f:template"`
			} `json:"f:spec"`
		}
		require.NoError(t, json.Unmarshal(m.FieldsV1.Raw, &fields), "decode the fields of %s", m.Manager)
		if _, ok := fields.Spec.Template.Metadata.Annotations["f:"+annotationKey]; ok {
			owners = append(owners, m.Manager)
		}
	}
	return owners
}

// dryRun=All: the answer shows the annotation that would be recorded, and
// nothing is stored.
func TestDryRunCreate(t *testing.T) {
	start(t)
	ns := newNamespace(t, webhookMain)
	want := e2e.identity[alice].annotation()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	p, err := client(alice).CoreV1().Pods(ns).Create(t.Context(), newPod("dry", nil), dry)
	require.NoError(t, err, "dry-run pod")
	assert.Equal(t, want, p.Annotations[annotationKey], "pod in the answer")
	_, err = client(admin).CoreV1().Pods(ns).Get(t.Context(), "dry", metav1.GetOptions{})
	assert.Truef(t, apierrors.IsNotFound(err), "dry-run pod not stored: %v", err)

	d, err := client(alice).AppsV1().Deployments(ns).Create(t.Context(), newDeployment("dry", 1, nil), dry)
	require.NoError(t, err, "dry-run deployment")
	assert.Equal(t, want, d.Spec.Template.Annotations[annotationKey], "deployment in the answer")
	_, err = client(admin).AppsV1().Deployments(ns).Get(t.Context(), "dry", metav1.GetOptions{})
	assert.Truef(t, apierrors.IsNotFound(err), "dry-run deployment not stored: %v", err)
}

// The admin impersonating carol in group dev: the recorded identity is
// carol's, with the groups the API server assigns to the impersonated user,
// and no trace of the admin.
func TestImpersonation(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, webhookMain)
	carol := impersonatingClient(t, "carol", "dev")
	id, err := whoAmI(ctx, carol)
	require.NoError(t, err)
	t.Logf("the API server authenticates the impersonated request as %+v", id)
	require.Equal(t, "carol", id.User)
	require.Contains(t, id.Groups, "dev")

	_, err = carol.CoreV1().Pods(ns).Create(ctx, newPod("by-carol", nil), metav1.CreateOptions{})
	require.NoError(t, err, "carol (impersonated) creates a pod")
	p, err := client(admin).CoreV1().Pods(ns).Get(ctx, "by-carol", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, id.annotation(), p.Annotations[annotationKey])
	assert.NotContains(t, p.Annotations[annotationKey], admin)

	logs := admissionsFor(t, e2e.webhook, ns)
	assert.Equal(t, 1, countAdmissions(logs, "Pod", "CREATE", "carol", "mutated"), "the webhook saw carol: %+v", logs)
}

// The two other ways to write a Pod's annotations, checked against the real
// API server: a pods/binding merges its annotations into the Pod (so one
// carrying user.info is refused, one without is allowed and merged), and a
// pods/status update keeps metadata changes (so one changing user.info is
// refused, while others never reach the webhook, thanks to the match
// condition).
func TestPodSubresources(t *testing.T) {
	start(t)
	ns := newNamespace(t, webhookMain)
	want := e2e.identity[admin].annotation()

	t.Run("binding", func(t *testing.T) {
		ctx := t.Context()
		_, err := client(admin).CoreV1().Pods(ns).Create(ctx, newPod("bound", nil), metav1.CreateOptions{})
		require.NoError(t, err)
		binding := func(annotations map[string]string) *corev1.Binding {
			return &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: "bound", Annotations: annotations},
				Target:     corev1.ObjectReference{Kind: "Node", Name: "node-e2e"},
			}
		}
		err = client(admin).CoreV1().Pods(ns).Bind(ctx, binding(map[string]string{annotationKey: `{"user":"mallory"}`}), metav1.CreateOptions{})
		requireRefused(t, err, bindingWebhook, msgChangeNotAllowed)

		err = client(admin).CoreV1().Pods(ns).Bind(ctx, binding(map[string]string{"e2e.yunikorn.apache.org/bound": "yes"}), metav1.CreateOptions{})
		require.NoError(t, err, "a binding without user.info")
		p, err := client(admin).CoreV1().Pods(ns).Get(ctx, "bound", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "node-e2e", p.Spec.NodeName)
		assert.Equal(t, "yes", p.Annotations["e2e.yunikorn.apache.org/bound"], "the binding's annotations are merged into the pod")
		assert.Equal(t, want, p.Annotations[annotationKey])

		logs := admissionsFor(t, e2e.webhook, ns)
		assert.Equal(t, 1, countAdmissions(logs, "Binding", "CREATE", "", ""), "only the binding with user.info reached the webhook: %+v", logs)
	})

	// The legacy bindings resource (POST /api/v1/namespaces/NS/bindings)
	// merges a Binding's annotations into the Pod as pods/binding does, but
	// admission sees it as another resource: without its own rule, a
	// Binding there rewrote user.info unchecked.
	t.Run("legacy binding", func(t *testing.T) {
		ctx := t.Context()
		_, err := client(admin).CoreV1().Pods(ns).Create(ctx, newPod("legacy-bound", nil), metav1.CreateOptions{})
		require.NoError(t, err)
		bind := func(annotations map[string]string) error {
			b := &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: "legacy-bound", Annotations: annotations},
				Target:     corev1.ObjectReference{Kind: "Node", Name: "node-e2e"},
			}
			return client(admin).CoreV1().RESTClient().Post().Namespace(ns).Resource("bindings").
				Body(b).Do(ctx).Error()
		}
		err = bind(map[string]string{annotationKey: `{"user":"bob","groups":["dev"]}`})
		requireRefused(t, err, bindingWebhook, msgChangeNotAllowed)
		p, err := client(admin).CoreV1().Pods(ns).Get(ctx, "legacy-bound", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want, p.Annotations[annotationKey], "the refused binding changed nothing")
		assert.Empty(t, p.Spec.NodeName)

		require.NoError(t, bind(map[string]string{"e2e.yunikorn.apache.org/bound": "legacy"}), "a legacy binding without user.info")
		p, err = client(admin).CoreV1().Pods(ns).Get(ctx, "legacy-bound", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "node-e2e", p.Spec.NodeName)
		assert.Equal(t, "legacy", p.Annotations["e2e.yunikorn.apache.org/bound"], "the legacy binding's annotations are merged into the pod")
		assert.Equal(t, want, p.Annotations[annotationKey])

		var calls []cluster.AdmissionLog
		for _, a := range admissionsFor(t, e2e.webhook, ns) {
			if a.Name == "legacy-bound" && a.Kind == "Binding" {
				calls = append(calls, a)
			}
		}
		require.Len(t, calls, 1, "only the legacy binding with user.info reached the webhook")
		assert.Equal(t, "denied", calls[0].Decision)
	})

	// pods/resize and pods/ephemeralcontainers reset metadata to the stored
	// Pod's (ResetObjectMetaForStatus in the pod strategy): a user.info
	// sent through them never reaches the Pod, whether or not the request
	// itself succeeds.
	t.Run("resize and ephemeral containers keep metadata", func(t *testing.T) {
		ctx := t.Context()
		_, err := client(admin).CoreV1().Pods(ns).Create(ctx, newPod("resized", nil), metav1.CreateOptions{})
		require.NoError(t, err)
		p, err := client(admin).CoreV1().Pods(ns).Get(ctx, "resized", metav1.GetOptions{})
		require.NoError(t, err)
		p.Annotations[annotationKey] = `{"user":"mallory"}`
		_, err = client(admin).CoreV1().Pods(ns).UpdateResize(ctx, "resized", p, metav1.UpdateOptions{})
		t.Logf("resize carrying a forged user.info: %v", err)

		p, err = client(admin).CoreV1().Pods(ns).Get(ctx, "resized", metav1.GetOptions{})
		require.NoError(t, err)
		p.Annotations[annotationKey] = `{"user":"mallory"}`
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"},
		})
		_, err = client(admin).CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, "resized", p, metav1.UpdateOptions{})
		requireRefused(t, err, subresourcesWebhook, msgChangeNotAllowed)

		p, err = client(admin).CoreV1().Pods(ns).Get(ctx, "resized", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want, p.Annotations[annotationKey])
	})

	t.Run("status", func(t *testing.T) {
		ctx := t.Context()
		_, err := client(admin).CoreV1().Pods(ns).Create(ctx, newPod("status", nil), metav1.CreateOptions{})
		require.NoError(t, err)

		p, err := client(admin).CoreV1().Pods(ns).Get(ctx, "status", metav1.GetOptions{})
		require.NoError(t, err)
		p.Annotations[annotationKey] = `{"user":"mallory"}`
		_, err = client(admin).CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		requireRefused(t, err, subresourcesWebhook, msgChangeNotAllowed)

		p, err = client(admin).CoreV1().Pods(ns).Get(ctx, "status", metav1.GetOptions{})
		require.NoError(t, err)
		p.Annotations["e2e.yunikorn.apache.org/status"] = "seen"
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: "e2e.yunikorn.apache.org/Checked", Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		})
		_, err = client(admin).CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err, "a status update that leaves user.info alone")
		p, err = client(admin).CoreV1().Pods(ns).Get(ctx, "status", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want, p.Annotations[annotationKey])
		assert.Equal(t, "seen", p.Annotations["e2e.yunikorn.apache.org/status"], "pods/status keeps metadata changes")

		var statusCalls []cluster.AdmissionLog
		for _, a := range admissionsFor(t, e2e.webhook, ns) {
			if a.SubResource == "status" {
				statusCalls = append(statusCalls, a)
			}
		}
		require.Len(t, statusCalls, 1, "only the update that changes user.info reached the webhook")
		assert.Equal(t, "denied", statusCalls[0].Decision)
	})
}
