package manifests

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The standalone webhook's manifests.
const (
	namespaceFile      = "deploy/webhook/namespace.yaml"
	serviceAccountFile = "deploy/webhook/serviceaccount.yaml"
	configMapFile      = "deploy/webhook/configmap.yaml"
	deploymentFile     = "deploy/webhook/deployment.yaml"
	serviceFile        = "deploy/webhook/service.yaml"
	pdbFile            = "deploy/webhook/poddisruptionbudget.yaml"
	webhookFile        = "deploy/webhook/registration/mutatingwebhookconfiguration.yaml"
	validatingFile     = "deploy/webhook/registration/validatingwebhookconfiguration.yaml"
	// The settings ConfigMap's check (serve's /settings), which fails open.
	settingsWebhookFile = "deploy/webhook/registration/settingswebhookconfiguration.yaml"
	policyTwinFile      = "deploy/kubewarden/clusteradmissionpolicy-validate.yaml"
	servingCertFile     = "deploy/webhook/cert-manager/certificate-serving.yaml"
	caCertFile          = "deploy/webhook/cert-manager/certificate-ca.yaml"
	caIssuerFile        = "deploy/webhook/cert-manager/issuer-ca.yaml"
	selfSignedFile      = "deploy/webhook/cert-manager/issuer-selfsigned.yaml"
	policyFile          = "deploy/kubewarden/clusteradmissionpolicy.yaml"
	settingsKey         = "settings.yaml"
	webhookNamespace    = "yunikorn-userinfo"
	kubewardenNS        = "kubewarden"
	image               = "ghcr.io/yunikorn-userinfo/yunikorn-userinfo:0.1.0"
)

// serveFlags are the flags `yunikorn-userinfo serve` accepts, its own and
// the global ones (cmd/yunikorn-userinfo/serve.go and root.go): a
// misspelt flag in the Deployment would stop the container at start.
var serveFlags = []string{
	"listen", "metrics-listen", "cert-file", "key-file", "client-ca-file", "self-signed", "self-signed-dir",
	"settings-path", "settings-json", "settings-configmap", "validate-overlay", "settings-reload-interval", "cert-reload-interval", "instances",
	"timeout", "memory-limit", "max-request-bytes", "shutdown-delay", "shutdown-timeout", "pprof", "monitor",
	"log-level", "log-format", "verbose", "cache-dir", "max-json-depth", "max-body-bytes-in-flight",
	"large-request-bytes", "max-concurrent-large", "max-conns-per-client", "max-conns", "max-requests-per-client",
	"max-concurrent-streams", "read-header-timeout", "idle-timeout", "sync-before-ready", "cache",
	"reserved-conns", "max-pending-conns", "trusted-source-cidrs",
}

// webhookContainer returns the Deployment's only container and its flags.
func webhookContainer(t *testing.T) (*appsv1.Deployment, corev1.Container, map[string]string) {
	t.Helper()
	d := object[*appsv1.Deployment](t, deploymentFile)
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	c := d.Spec.Template.Spec.Containers[0]
	require.NotEmpty(t, c.Args)
	require.Equal(t, "serve", c.Args[0], "the container runs `yunikorn-userinfo serve`")
	flags := map[string]string{}
	for _, arg := range c.Args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		require.True(t, strings.HasPrefix(arg, "--") && ok, "%q: write flags as --name=value", arg)
		require.Contains(t, serveFlags, name, "unknown serve flag --%s", name)
		require.NotContains(t, flags, name, "--%s given twice", name)
		flags[name] = value
	}
	return d, c, flags
}

// containerPort resolves a port given by name or number against the
// container's ports.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) corev1.ContainerPort {
	t.Helper()
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp
		}
	}
	require.Failf(t, "no such container port", "%s", p.String())
	return corev1.ContainerPort{}
}

// listenPort is the port of a --listen style address.
func listenPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err, addr)
	n, err := strconv.ParseInt(port, 10, 32)
	require.NoError(t, err, addr)
	return int32(n)
}

func TestDeployment_replicasAndSpread(t *testing.T) {
	t.Parallel()
	d, _, _ := webhookContainer(t)
	require.NotNil(t, d.Spec.Replicas)
	assert.GreaterOrEqual(t, *d.Spec.Replicas, int32(2), "one replica is a single point of failure with failurePolicy: Fail")

	podLabels := labels.Set(d.Spec.Template.Labels)
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, selector.Matches(podLabels), "the Deployment's selector matches its Pods")

	// Replicas are spread over nodes, by a hard topology spread on the host
	// name or a required anti-affinity.
	spread := false
	for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
		s, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		require.NoError(t, err)
		assert.True(t, s.Matches(podLabels), "topology spread %s selects the webhook's own Pods", c.TopologyKey)
		if c.TopologyKey == corev1.LabelHostname && c.WhenUnsatisfiable == corev1.DoNotSchedule {
			spread = true
		}
	}
	if a := d.Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			s, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
			require.NoError(t, err)
			if term.TopologyKey == corev1.LabelHostname && s.Matches(podLabels) {
				spread = true
			}
		}
	}
	assert.True(t, spread, "replicas must be spread across nodes")

	if s := d.Spec.Strategy.RollingUpdate; assert.NotNil(t, s) {
		assert.Equal(t, intstr.FromInt32(0), *s.MaxUnavailable, "a rollout never lowers the number of serving replicas")
	}
}

// TestDeployment_imageIsTheRelease: the Deployment's image is the tag
// a release is pushed with (docs/INSTALL.md), metadata.yml's version (the Makefile's VERSION).
func TestDeployment_imageIsTheRelease(t *testing.T) {
	t.Parallel()
	md, err := parsePolicyMetadata(readRepoFile(t, "metadata.yml"))
	require.NoError(t, err)
	assert.Equal(t, "ghcr.io/yunikorn-userinfo/yunikorn-userinfo:"+md.Annotations["io.kubewarden.policy.version"], image)
}

func TestDeployment_container(t *testing.T) {
	t.Parallel()
	d, c, flags := webhookContainer(t)
	assert.Equal(t, image, c.Image)

	for _, name := range []string{"listen", "metrics-listen", "cert-file", "key-file", "settings-path", "shutdown-delay", "shutdown-timeout"} {
		assert.Contains(t, flags, name, "--%s is set explicitly", name)
	}
	assert.Equal(t, "5s", flags["shutdown-delay"])
	assert.Equal(t, "json", flags["log-format"])

	// Ports: the flags, the container ports and the probes agree.
	https := containerPort(t, c, intstr.FromString("https"))
	assert.Equal(t, listenPort(t, flags["listen"]), https.ContainerPort, "--listen serves the https port")
	metrics := containerPort(t, c, intstr.FromString("metrics"))
	assert.Equal(t, listenPort(t, flags["metrics-listen"]), metrics.ContainerPort, "--metrics-listen serves the metrics port")
	for _, probe := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{name: "readiness", probe: c.ReadinessProbe, path: "/readyz"},
		{name: "liveness", probe: c.LivenessProbe, path: "/healthz"},
	} {
		require.NotNil(t, probe.probe, "%s probe", probe.name)
		get := probe.probe.HTTPGet
		require.NotNil(t, get, "%s probe: httpGet", probe.name)
		assert.Equal(t, probe.path, get.Path, "%s probe path", probe.name)
		assert.Equal(t, corev1.URISchemeHTTPS, get.Scheme, "%s probe scheme", probe.name)
		assert.Equal(t, https.ContainerPort, containerPort(t, c, get.Port).ContainerPort, "%s probe port", probe.name)
	}

	// Resources: requests and limits for CPU and memory.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		assert.Contains(t, c.Resources.Requests, r, "requests.%s", r)
		assert.Contains(t, c.Resources.Limits, r, "limits.%s", r)
	}
	instances, err := strconv.Atoi(flags["instances"])
	require.NoError(t, err, "--instances")
	memoryLimit, err := strconv.Atoi(flags["memory-limit"])
	require.NoError(t, err, "--memory-limit")
	limit := c.Resources.Limits[corev1.ResourceMemory]
	assert.Greater(t, limit.Value(), int64(instances*memoryLimit)<<20, "the container limit leaves room above instances x --memory-limit")

	// The kubelet waits for the whole drain.
	delay, err := time.ParseDuration(flags["shutdown-delay"])
	require.NoError(t, err)
	timeout, err := time.ParseDuration(flags["shutdown-timeout"])
	require.NoError(t, err)
	grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	require.NotNil(t, grace)
	assert.Greater(t, time.Duration(*grace)*time.Second, delay+timeout, "terminationGracePeriodSeconds > --shutdown-delay + --shutdown-timeout")
}

func TestDeployment_securityContext(t *testing.T) {
	t.Parallel()
	d, c, _ := webhookContainer(t)
	pod := d.Spec.Template.Spec
	psc, sc := pod.SecurityContext, c.SecurityContext
	require.NotNil(t, sc)

	// The container's setting wins over the Pod's.
	runAsNonRoot := sc.RunAsNonRoot
	if runAsNonRoot == nil && psc != nil {
		runAsNonRoot = psc.RunAsNonRoot
	}
	runAsUser := sc.RunAsUser
	if runAsUser == nil && psc != nil {
		runAsUser = psc.RunAsUser
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil && psc != nil {
		seccomp = psc.SeccompProfile
	}
	if assert.NotNil(t, runAsNonRoot) {
		assert.True(t, *runAsNonRoot, "runAsNonRoot")
	}
	if assert.NotNil(t, runAsUser) {
		assert.Equal(t, int64(65532), *runAsUser, "runAsUser")
	}
	if assert.NotNil(t, seccomp) {
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, seccomp.Type, "seccompProfile")
	}
	if assert.NotNil(t, sc.ReadOnlyRootFilesystem) {
		assert.True(t, *sc.ReadOnlyRootFilesystem, "readOnlyRootFilesystem")
	}
	if assert.NotNil(t, sc.AllowPrivilegeEscalation) {
		assert.False(t, *sc.AllowPrivilegeEscalation, "allowPrivilegeEscalation")
	}
	if sc.Privileged != nil {
		assert.False(t, *sc.Privileged, "privileged")
	}
	if assert.NotNil(t, sc.Capabilities) {
		assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "capabilities.drop")
		assert.Empty(t, sc.Capabilities.Add, "capabilities.add")
	}
	assert.False(t, pod.HostNetwork || pod.HostPID || pod.HostIPC, "no host namespaces")

	// No API token: the webhook never calls the API.
	if assert.NotNil(t, pod.AutomountServiceAccountToken) {
		assert.False(t, *pod.AutomountServiceAccountToken)
	}
	sa := object[*corev1.ServiceAccount](t, serviceAccountFile)
	assert.Equal(t, sa.Name, pod.ServiceAccountName)
	if assert.NotNil(t, sa.AutomountServiceAccountToken) {
		assert.False(t, *sa.AutomountServiceAccountToken)
	}
	ns := object[*corev1.Namespace](t, namespaceFile)
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"], "the namespace enforces what the Pods follow")
}

// TestDeployment_volumes: the certificate, key and settings flags point into
// the mounted Secret and ConfigMap.
func TestDeployment_volumes(t *testing.T) {
	t.Parallel()
	d, c, flags := webhookContainer(t)
	volumes := map[string]corev1.Volume{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	mountOf := func(file string) (corev1.VolumeMount, corev1.Volume) {
		t.Helper()
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
				require.Empty(t, m.SubPath, "%s: a subPath mount never sees updates, so nothing would be reloaded", m.Name)
				assert.True(t, m.ReadOnly, "%s is mounted read-only", m.Name)
				v, ok := volumes[m.Name]
				require.True(t, ok, "volume %s", m.Name)
				return m, v
			}
		}
		require.Failf(t, "not mounted", "%s is in no volume mount", file)
		return corev1.VolumeMount{}, corev1.Volume{}
	}

	serving := object[*certmanagerv1.Certificate](t, servingCertFile)
	for _, flag := range []string{"cert-file", "key-file"} {
		m, v := mountOf(flags[flag])
		require.NotNil(t, v.Secret, "--%s: volume %s is a Secret", flag, v.Name)
		assert.Equal(t, serving.Spec.SecretName, v.Secret.SecretName, "--%s: the Secret cert-manager writes", flag)
		want := map[string]string{"cert-file": corev1.TLSCertKey, "key-file": corev1.TLSPrivateKeyKey}[flag]
		assert.Equal(t, m.MountPath+"/"+want, flags[flag])
	}
	m, v := mountOf(flags["settings-path"])
	require.NotNil(t, v.ConfigMap, "--settings-path: volume %s is a ConfigMap", v.Name)
	cm := object[*corev1.ConfigMap](t, configMapFile)
	assert.Equal(t, cm.Name, v.ConfigMap.Name)
	assert.Equal(t, m.MountPath+"/"+settingsKey, flags["settings-path"])
	assert.Contains(t, cm.Data, settingsKey)
}

func TestService(t *testing.T) {
	t.Parallel()
	d, c, _ := webhookContainer(t)
	svc := object[*corev1.Service](t, serviceFile)
	require.NotEmpty(t, svc.Spec.Selector)
	assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)), "the Service selects the webhook Pods")
	ports := map[string]corev1.ServicePort{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name] = p
	}
	require.Contains(t, ports, "https")
	assert.Equal(t, int32(443), ports["https"].Port)
	assert.Equal(t, int32(8443), containerPort(t, c, ports["https"].TargetPort).ContainerPort)
	require.Contains(t, ports, "metrics")
	assert.Equal(t, int32(9090), containerPort(t, c, ports["metrics"].TargetPort).ContainerPort)
}

func TestPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	d, _, _ := webhookContainer(t)
	pdb := object[*policyv1.PodDisruptionBudget](t, pdbFile)
	selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, selector.Matches(labels.Set(d.Spec.Template.Labels)), "the PodDisruptionBudget covers the webhook Pods")
	require.NotNil(t, pdb.Spec.MinAvailable)
	assert.Equal(t, intstr.FromInt32(1), *pdb.Spec.MinAvailable)
	assert.Less(t, pdb.Spec.MinAvailable.IntVal, *d.Spec.Replicas, "a drain can still evict one replica")
}

func TestCertificates(t *testing.T) {
	t.Parallel()
	svc := object[*corev1.Service](t, serviceFile)
	serving := object[*certmanagerv1.Certificate](t, servingCertFile)
	// The API server dials <service>.<namespace>.svc and checks that name.
	assert.Contains(t, serving.Spec.DNSNames, svc.Name+"."+svc.Namespace+".svc")
	assert.Contains(t, serving.Spec.DNSNames, svc.Name+"."+svc.Namespace+".svc.cluster.local")
	assert.Contains(t, serving.Spec.Usages, certmanagerv1.UsageServerAuth)
	assert.False(t, serving.Spec.IsCA)
	for _, cert := range []*certmanagerv1.Certificate{serving, object[*certmanagerv1.Certificate](t, caCertFile)} {
		require.NotNil(t, cert.Spec.Duration, "%s: duration", cert.Name)
		require.NotNil(t, cert.Spec.RenewBefore, "%s: renewBefore rotates it before it expires", cert.Name)
		assert.Less(t, cert.Spec.RenewBefore.Duration, cert.Spec.Duration.Duration, "%s: renewBefore < duration", cert.Name)
	}

	// serving <- CA Issuer <- CA Certificate <- self-signed Issuer.
	caIssuer := object[*certmanagerv1.Issuer](t, caIssuerFile)
	assert.Equal(t, "Issuer", serving.Spec.IssuerRef.Kind)
	assert.Equal(t, caIssuer.Name, serving.Spec.IssuerRef.Name)
	require.NotNil(t, caIssuer.Spec.CA, "the serving certificate's issuer is a CA issuer")
	ca := object[*certmanagerv1.Certificate](t, caCertFile)
	assert.True(t, ca.Spec.IsCA)
	assert.Equal(t, ca.Spec.SecretName, caIssuer.Spec.CA.SecretName)
	selfSigned := object[*certmanagerv1.Issuer](t, selfSignedFile)
	assert.Equal(t, selfSigned.Name, ca.Spec.IssuerRef.Name)
	assert.NotNil(t, selfSigned.Spec.SelfSigned)
	assert.NotEqual(t, ca.Spec.SecretName, serving.Spec.SecretName)

	for _, issuer := range objects[*certmanagerv1.Issuer](t) {
		assert.Equal(t, webhookNamespace, issuer.Namespace)
	}
}

// TestMutatingWebhookConfiguration_settings checks what every webhook of the
// configuration must say (the YAML comments and deploy/README.md explain
// each choice).
func TestMutatingWebhookConfiguration_settings(t *testing.T) {
	t.Parallel()
	cfg := object[*admissionregistrationv1.MutatingWebhookConfiguration](t, webhookFile)
	svc := object[*corev1.Service](t, serviceFile)
	serving := object[*certmanagerv1.Certificate](t, servingCertFile)
	assert.Equal(t, serving.Namespace+"/"+serving.Name, cfg.Annotations["cert-manager.io/inject-ca-from"],
		"cainjector fills the caBundle from the serving certificate")

	var names []string
	for _, w := range cfg.Webhooks {
		t.Run(w.Name, func(t *testing.T) {
			// Kubernetes requires a fully qualified name: a DNS subdomain of at
			// least three segments.
			assert.Empty(t, validation.IsDNS1123Subdomain(w.Name))
			assert.GreaterOrEqual(t, strings.Count(w.Name, "."), 2, "fully qualified name")
			assert.True(t, strings.HasSuffix(w.Name, ".user-info.yunikorn.apache.org"))
			assert.Equal(t, []string{"v1"}, w.AdmissionReviewVersions)
			assert.Equal(t, ptrTo(admissionregistrationv1.SideEffectClassNone), w.SideEffects)
			assert.Equal(t, ptrTo(admissionregistrationv1.Fail), w.FailurePolicy)
			assert.Equal(t, ptrTo(admissionregistrationv1.Equivalent), w.MatchPolicy)
			assert.Equal(t, ptrTo(admissionregistrationv1.IfNeededReinvocationPolicy), w.ReinvocationPolicy)
			assert.Equal(t, ptrTo(int32(5)), w.TimeoutSeconds)
			assert.Nil(t, w.ObjectSelector, "an object selector would let users opt out by labelling")

			// The Service of this repository, on its https port.
			cc := w.ClientConfig
			assert.Nil(t, cc.URL)
			assert.Empty(t, cc.CABundle, "injected by cainjector, not committed")
			require.NotNil(t, cc.Service)
			assert.Equal(t, svc.Namespace, cc.Service.Namespace)
			assert.Equal(t, svc.Name, cc.Service.Name)
			assert.Equal(t, ptrTo("/mutate"), cc.Service.Path)
			assert.Equal(t, ptrTo(int32(443)), cc.Service.Port)
			assert.True(t, slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
				return p.Name == "https" && p.Port == *cc.Service.Port
			}), "the Service's https port")

			checkNamespaceSelector(t, w.NamespaceSelector, webhookNamespace)
		})
		names = append(names, w.Name)
	}
	assert.Equal(t, []string{
		"workloads.user-info.yunikorn.apache.org",
		"pod-subresources.user-info.yunikorn.apache.org",
		"pod-binding.user-info.yunikorn.apache.org",
	}, names)
}

// checkNamespaceSelector: kube-system and the controller's own namespace are
// left out, any other namespace is in.
func checkNamespaceSelector(t *testing.T, ls *metav1.LabelSelector, ownNamespace string) {
	t.Helper()
	require.NotNil(t, ls, "namespaceSelector")
	s, err := metav1.LabelSelectorAsSelector(ls)
	require.NoError(t, err)
	ns := func(name string) labels.Set { return labels.Set{corev1.LabelMetadataName: name} }
	assert.False(t, s.Matches(ns("kube-system")), "kube-system is left out")
	assert.False(t, s.Matches(ns(ownNamespace)), "%s is left out", ownNamespace)
	for _, name := range []string{"default", "spark", "kube-public"} {
		assert.True(t, s.Matches(ns(name)), "%s is selected", name)
	}
}

func TestSettings_configMapEqualsPolicy(t *testing.T) {
	t.Parallel()
	cm := object[*corev1.ConfigMap](t, configMapFile)
	var fromConfigMap map[string]any
	require.NoError(t, yaml.UnmarshalStrict([]byte(cm.Data[settingsKey]), &fromConfigMap), "settings.yaml")

	policy := clusterAdmissionPolicy(t)
	var fromPolicy map[string]any
	require.NoError(t, yaml.UnmarshalStrict(policy.Spec.Settings.Raw, &fromPolicy), "spec.settings")
	assert.Equal(t, fromConfigMap, fromPolicy, "the ConfigMap and the ClusterAdmissionPolicy carry the same settings")

	// The keys of docs/BEHAVIOUR.md §3 with their types; the values themselves are
	// validate_settings' business.
	known := map[string]string{
		"bypassAuth": "bool", "trustControllers": "bool", "systemUsers": "list",
		"externalUsers": "list", "externalGroups": "list", "userLabelKey": "string", "schedulerUsers": "list",
	}
	for key, value := range fromConfigMap {
		switch known[key] {
		case "bool":
			assert.IsType(t, true, value, "setting %s", key)
		case "string":
			assert.IsType(t, "", value, "setting %s", key)
		case "list": // a list, or YuniKorn's comma-separated string
			_, list := value.([]any)
			_, str := value.(string)
			assert.True(t, list || str, "setting %s: want a list or a string", key)
		default:
			t.Errorf("unknown setting %s", key)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// ruleKey is one (group, version, resource, operation) a rule matches.
type ruleKey struct {
	group, version, resource string
	operation                admissionregistrationv1.OperationType
}

func (k ruleKey) String() string {
	return fmt.Sprintf("%s %s/%s %s", k.operation, k.group, k.version, k.resource)
}

// expand lists every key the rules name; the rules here use no wildcards.
func expand(t *testing.T, rules []admissionregistrationv1.RuleWithOperations) []ruleKey {
	t.Helper()
	var keys []ruleKey
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					for _, op := range r.Operations {
						require.False(t, g == "*" || v == "*" || strings.Contains(res, "*") || op == "*", "no wildcards")
						keys = append(keys, ruleKey{group: g, version: v, resource: res, operation: op})
					}
				}
			}
		}
	}
	return keys
}

func TestMutatingWebhookConfiguration_rulesEqualMetadata(t *testing.T) {
	t.Parallel()
	cfg := object[*admissionregistrationv1.MutatingWebhookConfiguration](t, webhookFile)
	want := expand(t, metadataRules(t))

	seen := map[ruleKey]string{}
	var union []ruleKey
	for _, w := range cfg.Webhooks {
		for _, r := range w.Rules {
			assert.True(t, r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes, "%s: scope", w.Name)
		}
		for _, k := range expand(t, w.Rules) {
			// Two webhooks matching one request would call the policy twice.
			if other, dup := seen[k]; dup {
				t.Errorf("%s is matched by both %s and %s", k, other, w.Name)
			}
			seen[k] = w.Name
			union = append(union, k)
		}
	}
	assert.ElementsMatch(t, want, union, "the webhooks' rules together are metadata.yml's rules")
}
