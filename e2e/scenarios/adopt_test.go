package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// sparkOperatorModule is the module whose CRDs the adoption scenario
// installs: the version the spark preset's paths were read from.
const sparkOperatorModule = "github.com/kubeflow/spark-operator/v2@v2.3.0"

// webhookAdopt labels the namespace of the adoption scenario.
const webhookAdopt = "adopt"

var sparkApps = schema.GroupVersionResource{Group: "sparkoperator.k8s.io", Version: "v1beta2", Resource: "sparkapplications"}

// The identities of the adoption scenario: the adopter the settings trust,
// and the Spark operator's controller, as their service accounts.
var (
	adopterAccount       = types.NamespacedName{Namespace: "platform-adopt", Name: "adopter"}
	sparkOperatorAccount = types.NamespacedName{Namespace: "spark-operator", Name: "spark-operator-controller"}
)

// TestAdoptPreexisting: a SparkApplication and a Deployment that alice
// created before the policy covered her namespace record no owner. Once
// the policy enforces, the Spark operator's driver for the application is
// refused (its owner proves no submitter) and the Deployment's new Pods
// are charged to the ReplicaSet controller. alice and bob may not record
// an owner; the adopter of settings.adopters records alice on both, through
// the API server. Then the operator's driver carries alice's identity, and
// so do the Pods of the Deployment's rollout and of its scale-up.
//
// The SparkApplication is the spark operator's own CRD. The operator is
// stood in for (it submits through spark-submit, a JVM this suite does not
// run): its service account creates the driver Pod as spark-operator
// v2.3.0 has it made, with spec.driver.annotations (submission.go passes
// them as spark.kubernetes.driver.annotation.*), the spark-role and app
// name labels, and the controller ownerReference its Pod webhook adds
// (sparkpod_defaulter.go, addOwnerReference).
func TestAdoptPreexisting(t *testing.T) {
	start(t)
	if !e2e.ownKube {
		t.Skipf("the adoption scenario installs the spark operator's CRD on the suite's own Kubernetes only (%s)", e2e.kubeVersion)
	}
	ctx := t.Context()
	adm := client(admin)
	// The spark operator's CRD is served only while this scenario runs:
	// TestAuditExisting expects it absent (sparkCRDMu).
	sparkCRDMu.Lock()
	t.Cleanup(sparkCRDMu.Unlock)
	installCRDFile(t, sparkCRD(t))
	t.Cleanup(func() { removeSparkCRD(t) })

	// The policy's reader may read SparkApplications (the owner proof).
	reader := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-adopt-owner-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{sparkApps.Group}, Resources: []string{sparkApps.Resource},
			Verbs: []string{"get", "list", "watch"}}},
	}
	_, err := adm.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{})
	require.NoError(t, err)
	bindClusterRole(t, reader.Name, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: ownerReaderUser})
	adopterKubeconfig := operatorAccount(t, adopterAccount)
	operatorKubeconfig := operatorAccount(t, sparkOperatorAccount)
	adopterUser := "system:serviceaccount:" + adopterAccount.Namespace + ":" + adopterAccount.Name
	operatorUser := "system:serviceaccount:" + sparkOperatorAccount.Namespace + ":" + sparkOperatorAccount.Name

	// 1. Before the policy: alice's SparkApplication and Deployment, in a
	// namespace no webhook covers.
	ns := newNamespace(t, "")
	dyn := map[string]dynamic.Interface{}
	for _, u := range []string{alice, bob} {
		cfg, err := e2e.cluster.Config(u)
		require.NoError(t, err)
		dyn[u], err = dynamic.NewForConfig(cfg)
		require.NoError(t, err)
	}
	dyn[adopterUser] = dynamicFromKubeconfig(t, adopterKubeconfig)
	dyn[operatorUser] = dynamicFromKubeconfig(t, operatorKubeconfig)
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(sparkPiManifest), &obj))
	app, err := dyn[alice].Resource(sparkApps).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a SparkApplication before the policy")
	dep := newDeployment("web", 1, nil)
	dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	_, err = client(alice).AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a Deployment before the policy")
	old := waitPods(t, ns, "app=web", 1)
	require.NotContains(t, old[0].Annotations, annotationKey, "no policy covered the namespace")
	_, err = client(alice).CoreV1().Pods(ns).Create(ctx, newPod("lone", nil), metav1.CreateOptions{})
	require.NoError(t, err, "alice creates a bare Pod before the policy")

	// 2. The policy: its own webhook with the adopter and the spark preset,
	// registered as the shipped configuration plus the SparkApplication
	// rule the chart adds for the preset; then the namespace is covered.
	wh, settingsFile := startAdoptWebhook(t, adopterUser, operatorUser)
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, webhookLabel, webhookAdopt)
	_, err = adm.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, waitEnforced(ctx, ns))

	// 3. What an object without an owner does under the policy: the
	// operator's driver is refused; a new Pod of the Deployment is charged
	// to the ReplicaSet controller.
	_, err = createDriver(ctx, dyn[operatorUser], client(admin), ns, "spark-pi")
	require.Error(t, err, "the driver of an application that records no one is refused")
	assert.Contains(t, err.Error(), "owner proof failed: SparkApplication "+ns+"/spark-pi records no submitter")
	assert.Contains(t, err.Error(), "have an adopter (settings.adopters) record its owner")
	scaleDeployment(t, ns, "web", 2)
	pods := waitPods(t, ns, "app=web", 2)
	charged := map[string]int{}
	for _, p := range pods {
		charged[p.Annotations[annotationKey]]++
	}
	rsUser := replicaSetController
	if e2e.sharedControllerCredentials {
		rsUser = "system:kube-controller-manager"
	}
	assert.Equal(t, 1, charged[""], "the Pod from before the policy records no one: %v", charged)
	for v := range charged {
		if v != "" {
			assert.Equal(t, rsUser, userOf(t, v), "the new Pod is charged to the ReplicaSet controller")
		}
	}

	// The audit lists what to adopt: the Deployment, the SparkApplication
	// and the bare Pod, not the Pods and ReplicaSet the Deployment covers;
	// the owner is a placeholder (the objects name no one).
	kubeconfig, err := e2e.cluster.WriteKubeconfig(admin)
	require.NoError(t, err)
	auditArgs := []string{"audit", "--kubeconfig", kubeconfig, "-n", ns, "-s", settingsFile, "-q", "--queue-check=false",
		"--scheduler-name", "default-scheduler"}
	listing, _ := runCLI(t, append(auditArgs, "-o", "adopt")...)
	assert.Contains(t, listing, "# 3 objects to adopt\n", listing)
	for _, cmd := range []string{
		"kubectl patch deployment.apps web -n " + ns + ` --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"OWNER\",\"groups\":[\"GROUP\"]}"}}}}}'`,
		"kubectl patch sparkapplication.sparkoperator.k8s.io spark-pi -n " + ns + ` --type=merge -p '{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"OWNER\",\"groups\":[\"GROUP\"]}"}}}'`,
		"kubectl patch pod lone -n " + ns + ` --type=merge -p '{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"OWNER\",\"groups\":[\"GROUP\"]}"}}}'`,
	} {
		assert.Contains(t, listing, "\n"+cmd+"\n")
	}
	assert.Contains(t, listing, "managedFields name only the client")
	out, _ := runCLI(t, append(auditArgs, "-o", "json")...)
	var rep struct {
		Findings []struct {
			Resource struct{ Kind, Name string }
			Adopt    *struct{ Patch string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	patches := map[string]string{}
	for _, f := range rep.Findings {
		if f.Adopt != nil {
			patches[f.Resource.Kind+"/"+f.Resource.Name] = f.Adopt.Patch
		}
	}
	require.Len(t, patches, 3, "%v", patches)

	// 4. Users may not adopt: not alice, whose objects they are, nor bob.
	aliceValue := e2e.identity[alice].annotation()
	// The audit's patches, with alice as the owner.
	metaPatch := withOwner(t, patches["SparkApplication/spark-pi"], aliceValue)
	templatePatch := withOwner(t, patches["Deployment/web"], aliceValue)
	podPatch := withOwner(t, patches["Pod/lone"], aliceValue)
	require.Equal(t, adoptPatch(aliceValue, "metadata"), metaPatch)
	require.Equal(t, adoptPatch(aliceValue, "spec", "template", "metadata"), templatePatch)
	// The adopt command prints the same patch for alice.
	aliceID := e2e.identity[alice]
	line, _ := runCLI(t, "adopt", "deployment.apps/web", "-n", ns, "--owner", aliceID.User, "--groups", strings.Join(aliceID.Groups, ","))
	prefix := "kubectl patch deployment.apps web -n " + ns + " --type=merge -p '"
	require.True(t, strings.HasPrefix(line, prefix) && strings.HasSuffix(line, "'\n"), line)
	assert.JSONEq(t, string(templatePatch), strings.TrimSuffix(strings.TrimPrefix(line, prefix), "'\n"))
	for _, u := range []string{alice, bob} {
		id := e2e.identity[u]
		notAdopter := "the object records no owner (it was created before the policy), and only an adopter may record one: user " +
			id.User + " with groups [" + strings.Join(id.Groups, ",") + "] is not one of settings.adopters"
		_, err = dyn[u].Resource(sparkApps).Namespace(ns).Patch(ctx, "spark-pi", types.MergePatchType, metaPatch, metav1.PatchOptions{})
		requireRefused(t, err, workloadsWebhook, msgChangeNotAllowed+": request.object.metadata.annotations: "+notAdopter)
		_, err = client(u).AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, templatePatch, metav1.PatchOptions{})
		requireRefused(t, err, workloadsWebhook, msgChangeNotAllowed+": "+notAdopter)
	}
	// Nor the operator, which may copy an owner's identity, not name one.
	_, err = dyn[operatorUser].Resource(sparkApps).Namespace(ns).Patch(ctx, "spark-pi", types.MergePatchType, metaPatch, metav1.PatchOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not one of settings.adopters")

	// 5. The adopter records alice on the SparkApplication's own
	// annotations: the policy writes her on the driver and executor
	// templates too.
	adopted, err := dyn[adopterUser].Resource(sparkApps).Namespace(ns).Patch(ctx, "spark-pi", types.MergePatchType, metaPatch, metav1.PatchOptions{})
	require.NoError(t, err, "the adopter records alice on the SparkApplication")
	assert.Equal(t, aliceValue, adopted.GetAnnotations()[annotationKey])
	assert.Equal(t, map[string]string{".metadata": aliceValue, ".spec.driver": aliceValue, ".spec.executor": aliceValue},
		templateAnnotations(t, adopted.Object, "spec.driver", "spec.executor", "metadata"))
	assert.Equal(t, app.GetUID(), adopted.GetUID(), "the same object, adopted")

	// The bare Pod too.
	lone, err := typedFromKubeconfig(t, adopterKubeconfig).CoreV1().Pods(ns).Patch(ctx, "lone", types.MergePatchType, podPatch, metav1.PatchOptions{})
	require.NoError(t, err, "the adopter records alice on the bare Pod")
	assert.Equal(t, aliceValue, lone.Annotations[annotationKey])

	// Adopted once: never again, not even by the adopter.
	_, err = dyn[adopterUser].Resource(sparkApps).Namespace(ns).Patch(ctx, "spark-pi", types.MergePatchType,
		adoptPatch(e2e.identity[bob].annotation(), "metadata"), metav1.PatchOptions{})
	requireRefused(t, err, workloadsWebhook, msgChangeNotAllowed+": request.object.metadata.annotations: the object already records an owner: "+
		"adoption records the owner of an object that records none, and never changes one")

	// 6. The operator's driver now carries alice's identity, proven by its
	// owner.
	driver, err := createDriver(ctx, dyn[operatorUser], client(admin), ns, "spark-pi")
	require.NoError(t, err, "the driver of the adopted application is admitted")
	assert.Equal(t, aliceValue, driver.Annotations[annotationKey], "the operator's driver is stamped with the adopted owner")

	// 7. The adopter records alice in the Deployment's template: the
	// rollout (Recreate) replaces its Pods with Pods of alice, and so does
	// a scale-up.
	_, err = typedFromKubeconfig(t, adopterKubeconfig).AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, templatePatch, metav1.PatchOptions{})
	require.NoError(t, err, "the adopter records alice on the Deployment")
	waitCharged(t, ns, "app=web", 2, aliceValue)
	scaleDeployment(t, ns, "web", 3)
	waitCharged(t, ns, "app=web", 3, aliceValue)
	_, err = client(bob).AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType,
		adoptPatch(e2e.identity[bob].annotation(), "spec", "template", "metadata"), metav1.PatchOptions{})
	requireRefused(t, err, workloadsWebhook, msgChangeNotAllowed)

	logs := admissionsFor(t, wh, ns)
	assert.Equal(t, 1, countAdmissions(logs, "SparkApplication", "UPDATE", adopterUser, "mutated"), "one adoption, copied to the templates")
	assert.Equal(t, 1, countAdmissions(logs, "Deployment", "UPDATE", adopterUser, "allowed"), "one adoption of the Deployment")
}

// startAdoptWebhook runs serve with the suite's settings plus the adopter
// and the spark preset, and registers it for the namespaces labelled
// webhookAdopt.
func startAdoptWebhook(t *testing.T, adopter, operator string) (*cluster.Webhook, string) {
	t.Helper()
	ctx := t.Context()
	raw, err := os.ReadFile(e2e.settingsFile)
	require.NoError(t, err)
	var settings map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &settings))
	settings["adopters"] = map[string]any{"users": []string{"^" + adopter + "$"}}
	settings["workloads"] = []any{map[string]any{"preset": "spark", "operators": []string{"^" + operator + "$"}}}
	out, err := yaml.Marshal(settings)
	require.NoError(t, err)
	file := filepath.Join(e2e.cluster.Dir, "settings-adopt.yaml")
	require.NoError(t, os.WriteFile(file, out, 0o600))
	kubeconfig, err := e2e.cluster.WriteKubeconfig(ownerReaderUser)
	require.NoError(t, err)
	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-adopt", Binary: e2e.serveBinary, SettingsFile: file, ExtraArgs: []string{"--kubeconfig", kubeconfig},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, wh.Stop()) })
	mwc, err := cluster.AdaptWebhookConfiguration(e2e.mwcManifest, "yunikorn-userinfo-e2e-adopt", wh.BaseURL, e2e.cluster.PKI.CAPEM,
		map[string]string{webhookLabel: webhookAdopt})
	require.NoError(t, err)
	found := false
	for i := range mwc.Webhooks {
		if mwc.Webhooks[i].Name == workloadsWebhook {
			mwc.Webhooks[i].Rules = append(mwc.Webhooks[i].Rules, admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{sparkApps.Group}, APIVersions: []string{sparkApps.Version},
					Resources: []string{sparkApps.Resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			})
			found = true
		}
	}
	require.True(t, found, "the shipped configuration has the %s webhook", workloadsWebhook)
	_, err = client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		err := client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), mwc.Name, metav1.DeleteOptions{})
		assert.NoError(t, err)
	})
	return wh, file
}

// sparkCRD is the SparkApplication CRD of the spark operator's module.
func sparkCRD(t *testing.T) string {
	t.Helper()
	return filepath.Join(moduleDir(t, sparkOperatorModule), "config", "crd", "bases", "sparkoperator.k8s.io_sparkapplications.yaml")
}

// sparkCRDMu is held by the scenarios that depend on whether the spark
// operator's CRD is served: TestAdoptPreexisting installs it for its run
// and removes it; TestAuditExisting reports it as not served.
var sparkCRDMu sync.Mutex

// removeSparkCRD deletes the SparkApplication CRD and waits until the API
// server no longer serves sparkoperator.k8s.io/v1beta2.
func removeSparkCRD(t *testing.T) {
	ctx := context.WithoutCancel(t.Context())
	cfg, err := e2e.cluster.Config(admin)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	err = dyn.Resource(crds).Delete(ctx, "sparkapplications.sparkoperator.k8s.io", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err, "delete the SparkApplication CRD")
	}
	require.NoError(t, cluster.Poll(ctx, controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		_, err := client(admin).Discovery().ServerResourcesForGroupVersion("sparkoperator.k8s.io/v1beta2")
		return apierrors.IsNotFound(err), nil
	}), "sparkoperator.k8s.io/v1beta2 still served")
}

// installCRDFile creates the CRD of file and waits until it is served.
func installCRDFile(t *testing.T, file string) {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(file)), b, 0o600))
	installCRDs(t, dir)
}

func dynamicFromKubeconfig(t *testing.T, kubeconfig string) dynamic.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	d, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return d
}

func typedFromKubeconfig(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// adoptPatch is the merge patch that writes value as user.info into the
// annotations of the metadata at path (which ends in "metadata").
func adoptPatch(value string, path ...string) []byte {
	var v any = map[string]any{"annotations": map[string]string{annotationKey: value}}
	for i := len(path) - 1; i >= 0; i-- {
		v = map[string]any{path[i]: v}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings always encode
	}
	return b
}

// withOwner replaces the audit's owner placeholder in an adoption patch by
// value.
func withOwner(t *testing.T, patch, value string) []byte {
	t.Helper()
	require.Contains(t, patch, `\"OWNER\"`)
	var v any
	require.NoError(t, json.Unmarshal([]byte(patch), &v))
	var walk func(v any) bool
	walk = func(v any) bool {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if ann, ok := m["annotations"].(map[string]any); ok {
			ann[annotationKey] = value
			return true
		}
		for _, inner := range m {
			if walk(inner) {
				return true
			}
		}
		return false
	}
	require.True(t, walk(v), "the patch writes annotations: %s", patch)
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// createDriver creates the driver Pod of SparkApplication app as the spark
// operator has it made (see TestAdoptPreexisting), from the application
// as it is now.
func createDriver(ctx context.Context, operator dynamic.Interface, cs kubernetes.Interface, ns, app string) (*corev1.Pod, error) {
	a, err := operator.Resource(sparkApps).Namespace(ns).Get(ctx, app, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read SparkApplication %s: %w", app, err)
	}
	annotations, _, _ := unstructured.NestedStringMap(a.Object, "spec", "driver", "annotations")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: app + "-driver-",
			Labels:       map[string]string{"spark-role": "driver", "sparkoperator.k8s.io/app-name": app, "sparkoperator.k8s.io/launched-by-spark-operator": "true"},
			Annotations:  annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: sparkApps.GroupVersion().String(), Kind: "SparkApplication", Name: a.GetName(),
				UID: a.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: podSpec(corev1.RestartPolicyNever),
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	var u map[string]any
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, err
	}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	created, err := operator.Resource(pods).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().Pods(ns).Get(ctx, created.GetName(), metav1.GetOptions{})
}

// scaleDeployment sets the replicas of a Deployment through its scale
// subresource, as kubectl scale does.
func scaleDeployment(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	s, err := client(admin).AppsV1().Deployments(ns).GetScale(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	s.Spec.Replicas = replicas
	_, err = client(admin).AppsV1().Deployments(ns).UpdateScale(t.Context(), name, s, metav1.UpdateOptions{})
	require.NoError(t, err, "scale %s to %d", name, replicas)
}

// waitCharged waits until exactly want Pods match selector and every one
// records value.
func waitCharged(t *testing.T, ns, selector string, want int, value string) {
	t.Helper()
	var seen map[string]int
	err := cluster.Poll(t.Context(), controllerTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		l, err := client(admin).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		seen = map[string]int{}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				seen[p.Annotations[annotationKey]]++
			}
		}
		return len(l.Items) == want && seen[value] == want, nil
	})
	require.NoErrorf(t, err, "wait for %d pods matching %q, all recording %s: have %v", want, selector, value, seen)
}

// userOf is the user a user.info value names.
func userOf(t *testing.T, value string) string {
	t.Helper()
	var id struct {
		User string `json:"user"`
	}
	require.NoError(t, json.Unmarshal([]byte(value), &id), "user.info %q", value)
	return id.User
}

// sparkPiManifest is alice's SparkApplication, as the spark operator's
// examples write one.
const sparkPiManifest = `apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata:
  name: spark-pi
spec:
  type: Scala
  mode: cluster
  image: registry.invalid/spark:3.5.5
  mainClass: org.apache.spark.examples.SparkPi
  mainApplicationFile: local:///opt/spark/examples/jars/spark-examples.jar
  sparkVersion: 3.5.5
  driver:
    cores: 1
    memory: 512m
    serviceAccount: spark
  executor:
    instances: 1
    cores: 1
    memory: 512m
`
