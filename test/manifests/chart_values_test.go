package manifests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	jsonpatch "github.com/evanphx/json-patch/v5"
	policiesv1 "github.com/kubewarden/adm-controller/api/policies/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/test/manifests/internal/chartrender"
)

// values decodes inline YAML values.
func values(t *testing.T, y string) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(y), &v))
	return v
}

// only returns the one object of type T in ms.
func only[T any](t *testing.T, ms []manifest) T {
	t.Helper()
	var out []T
	for _, m := range ms {
		if o, ok := m.obj.(T); ok {
			out = append(out, o)
		}
	}
	require.Len(t, out, 1, "one %T", *new(T))
	return out[0]
}

func all[T any](ms []manifest) []T {
	var out []T
	for _, m := range ms {
		if o, ok := m.obj.(T); ok {
			out = append(out, o)
		}
	}
	return out
}

// TestChart_podSettings: the webhook Deployment's scheduling, pull secrets,
// extra labels and annotations, and host networking on other ports.
func TestChart_podSettings(t *testing.T) {
	t.Parallel()
	v := values(t, `
imagePullSecrets: [{name: regcred}]
nodeSelector: {node-role.example.com/infra: "true"}
tolerations: [{key: infra, operator: Exists, effect: NoSchedule}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]}]
priorityClassName: system-cluster-critical
podLabels: {team: platform, app.kubernetes.io/name: hijacked}
podAnnotations: {prometheus.io/scrape: "false", example.com/owner: platform}
hostNetwork: true
webhookPort: 10443
metricsPort: 10090
`)
	dep := only[*appsv1.Deployment](t, mustRender(t, v, "uinfo", "platform"))
	spec := dep.Spec.Template.Spec
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}}, spec.ImagePullSecrets)
	assert.Equal(t, map[string]string{"node-role.example.com/infra": "true"}, spec.NodeSelector)
	assert.Equal(t, []corev1.Toleration{{Key: "infra", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, spec.Tolerations)
	require.NotNil(t, spec.Affinity)
	require.NotNil(t, spec.Affinity.NodeAffinity)
	assert.Equal(t, "system-cluster-critical", spec.PriorityClassName)
	assert.True(t, spec.HostNetwork)
	assert.Equal(t, corev1.DNSClusterFirstWithHostNet, spec.DNSPolicy, "host network Pods must still resolve Services")

	podLabels := dep.Spec.Template.Labels
	assert.Equal(t, "platform", podLabels["team"])
	assert.Equal(t, "yunikorn-userinfo", podLabels["app.kubernetes.io/name"], "podLabels never override the chart's own")
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(podLabels)), "the Deployment still selects its Pods")
	assert.Equal(t, "false", dep.Spec.Template.Annotations["prometheus.io/scrape"], "podAnnotations win over the chart's")
	assert.Equal(t, "10090", dep.Spec.Template.Annotations["prometheus.io/port"])
	assert.Equal(t, "platform", dep.Spec.Template.Annotations["example.com/owner"])

	c := spec.Containers[0]
	assert.Contains(t, c.Args, "--listen=:10443")
	assert.Contains(t, c.Args, "--metrics-listen=:10090")
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	assert.Equal(t, map[string]int32{"https": 10443, "metrics": 10090}, ports)
	// The Service and the probes name the ports, so they follow.
	assert.Equal(t, intstr.FromString("https"), c.ReadinessProbe.HTTPGet.Port)
	svc := only[*corev1.Service](t, mustRender(t, v, "uinfo", "platform"))
	for _, p := range svc.Spec.Ports {
		assert.Equal(t, intstr.FromString(p.Name), p.TargetPort, "Service port %s", p.Name)
	}

	// The defaults add nothing: deploy/ is still the rendering
	// (TestChart_renderingIsDeploy); here, the fields stay unset.
	def := only[*appsv1.Deployment](t, mustRender(t, nil, "uinfo", "platform")).Spec.Template.Spec
	assert.False(t, def.HostNetwork)
	assert.Empty(t, def.DNSPolicy)
	assert.Empty(t, def.PriorityClassName)
	assert.Nil(t, def.Affinity)

	// The registration gate's Job runs where the webhook may run.
	job := only[*batchv1.Job](t, mustRenderInstall(t, v, "uinfo", "platform"))
	assert.Equal(t, spec.ImagePullSecrets, job.Spec.Template.Spec.ImagePullSecrets)
	assert.Equal(t, spec.NodeSelector, job.Spec.Template.Spec.NodeSelector)
	assert.Equal(t, spec.Tolerations, job.Spec.Template.Spec.Tolerations)
}

func mustRenderInstall(t *testing.T, values map[string]any, release, namespace string) []manifest {
	t.Helper()
	ms, err := renderInstall(t, values, release, namespace)
	require.NoError(t, err)
	return ms
}

// TestChart_policyServer: the PolicyServer fields the chart maps, decoded
// strictly into the controller's own types, and the verification
// ConfigMap it may create.
func TestChart_policyServer(t *testing.T) {
	t.Parallel()
	v := values(t, `
mode: kubewarden
kubewarden:
  policyServer:
    imagePullSecret: policy-registry
    tolerations: [{key: infra, operator: Exists}]
    affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: kubernetes.io/hostname}}]}}
    priorityClassName: system-cluster-critical
    annotations: {example.com/a: b}
    labels: {team: platform}
    resources: {requests: {cpu: 250m, memory: 128Mi}, limits: {memory: 512Mi}}
    securityContexts: {pod: {runAsNonRoot: true}, container: {readOnlyRootFilesystem: true}}
    env: [{name: KUBEWARDEN_LOG_LEVEL, value: info}]
    verification:
      config:
        apiVersion: v1
        allOf:
          - kind: pubKey
            owner: yunikorn-userinfo
            key: |
              -----BEGIN PUBLIC KEY-----
              MFkw
              -----END PUBLIC KEY-----
`)
	ms := mustRender(t, v, "yui", "kubewarden")
	ps := only[*policiesv1.PolicyServer](t, ms)
	s := ps.Spec
	assert.Equal(t, "policy-registry", s.ImagePullSecret)
	assert.Len(t, s.Tolerations, 1)
	require.NotNil(t, s.Affinity.PodAntiAffinity)
	assert.Equal(t, "system-cluster-critical", s.PriorityClassName)
	assert.Equal(t, map[string]string{"example.com/a": "b"}, s.Annotations)
	assert.Equal(t, map[string]string{"team": "platform"}, s.Labels)
	assert.Equal(t, "250m", ptrQ(s.Requests, corev1.ResourceCPU))
	assert.Equal(t, "512Mi", ptrQ(s.Limits, corev1.ResourceMemory))
	require.NotNil(t, s.SecurityContexts.Pod)
	require.NotNil(t, s.SecurityContexts.Container)
	assert.Equal(t, []corev1.EnvVar{{Name: "KUBEWARDEN_LOG_LEVEL", Value: "info"}}, s.Env)
	assert.Equal(t, "yui-verification", s.VerificationConfig)
	cm := only[*corev1.ConfigMap](t, ms)
	assert.Equal(t, "yui-verification", cm.Name)
	assert.Equal(t, "kubewarden", cm.Namespace, "the controller's namespace, where the PolicyServer reads it")
	var vc map[string]any
	require.NoError(t, yaml.UnmarshalStrict([]byte(cm.Data["verification-config"]), &vc))
	assert.Equal(t, "v1", vc["apiVersion"])
	assert.Equal(t, "pubKey", vc["allOf"].([]any)[0].(map[string]any)["kind"])
	assert.Contains(t, vc["allOf"].([]any)[0].(map[string]any)["key"], "BEGIN PUBLIC KEY")

	// An existing ConfigMap by name: referenced, none created.
	ms = mustRender(t, values(t, "mode: kubewarden\nkubewarden: {policyServer: {verification: {configMapName: signed-only}}}"), "yui", "kubewarden")
	assert.Equal(t, "signed-only", only[*policiesv1.PolicyServer](t, ms).Spec.VerificationConfig)
	assert.Empty(t, all[*corev1.ConfigMap](ms))

	// The defaults set none of them.
	def := only[*policiesv1.PolicyServer](t, mustRender(t, values(t, "mode: kubewarden"), "yui", "kubewarden")).Spec
	assert.Empty(t, def.ImagePullSecret)
	assert.Empty(t, def.VerificationConfig)
	assert.Empty(t, def.Requests)
	assert.Nil(t, def.SecurityContexts.Pod)
}

func ptrQ(l corev1.ResourceList, n corev1.ResourceName) string {
	q, ok := l[n]
	if !ok {
		return ""
	}
	return q.String()
}

// TestChart_namespaces: cert-manager's namespace is left out by default,
// and namespaceSelector excludes by label, in both modes, ANDed with the
// name exclusion.
func TestChart_namespaces(t *testing.T) {
	t.Parallel()
	ns := func(name string, extra map[string]string) labels.Set {
		l := labels.Set{corev1.LabelMetadataName: name}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	optOut := map[string]string{"example.com/no-user-info": "true"}
	for _, mode := range []string{"standalone", "kubewarden"} {
		for _, withLabel := range []bool{false, true} {
			y := "mode: " + mode
			if withLabel {
				y += "\nnamespaceSelector: {matchExpressions: [{key: example.com/no-user-info, operator: DoesNotExist}], matchLabels: {}}"
			}
			ms := mustRender(t, values(t, y), "yunikorn-userinfo", "platform")
			var selectors []*metav1.LabelSelector
			for _, m := range all[*admissionregistrationv1.MutatingWebhookConfiguration](ms) {
				for _, w := range m.Webhooks {
					selectors = append(selectors, w.NamespaceSelector)
				}
			}
			for _, m := range all[*admissionregistrationv1.ValidatingWebhookConfiguration](ms) {
				if settingsWebhook(m) { // the release's own namespace only
					continue
				}
				for _, w := range m.Webhooks {
					selectors = append(selectors, w.NamespaceSelector)
				}
			}
			for _, p := range all[*policiesv1.ClusterAdmissionPolicy](ms) {
				selectors = append(selectors, p.Spec.NamespaceSelector)
			}
			require.NotEmpty(t, selectors, mode)
			for _, ls := range selectors {
				s, err := metav1.LabelSelectorAsSelector(ls)
				require.NoError(t, err)
				assert.False(t, s.Matches(ns("cert-manager", nil)), "%s: cert-manager is left out", mode)
				assert.False(t, s.Matches(ns("kube-system", nil)), "%s: kube-system is left out", mode)
				assert.False(t, s.Matches(ns("kube-system", nil)), "%s: kube-system is left out", mode)
				assert.True(t, s.Matches(ns("spark", nil)), "%s: spark is selected", mode)
				assert.Equal(t, !withLabel, s.Matches(ns("legacy", optOut)), "%s: a namespace labelled to opt out (selector %v)", mode, withLabel)
				assert.False(t, s.Matches(ns("kube-system", map[string]string{"other": "x"})), "%s: labels never bring back an excluded name", mode)
			}
		}
	}
}

// TestChart_disruptionBudget: with one replica no budget (minAvailable 1
// of 1 would forbid every eviction and block drains); with two or more, a
// budget that always allows one eviction; in both modes.
func TestChart_disruptionBudget(t *testing.T) {
	t.Parallel()
	for _, replicas := range []int{1, 2, 3} {
		ms := mustRender(t, map[string]any{"replicas": replicas}, "yunikorn-userinfo", "yunikorn-userinfo")
		pdbs := all[*policyv1.PodDisruptionBudget](ms)
		if replicas < 2 {
			assert.Empty(t, pdbs, "replicas %d: no budget", replicas)
		} else if assert.Len(t, pdbs, 1, "replicas %d", replicas) {
			minAvailable := pdbs[0].Spec.MinAvailable.IntValue()
			assert.GreaterOrEqual(t, replicas-minAvailable, 1, "replicas %d: a drain may always evict one Pod", replicas)
		}

		ps := only[*policiesv1.PolicyServer](t, mustRender(t, values(t, "mode: kubewarden\nkubewarden: {policyServer: {replicas: "+itoa(replicas)+"}}"), "yunikorn-userinfo", "kubewarden"))
		if replicas < 2 {
			assert.Nil(t, ps.Spec.MinAvailable, "policyServer.replicas %d: no minAvailable, so the controller makes no budget", replicas)
		} else if assert.NotNil(t, ps.Spec.MinAvailable) {
			assert.GreaterOrEqual(t, replicas-ps.Spec.MinAvailable.IntValue(), 1)
		}
		assert.Nil(t, ps.Spec.MaxUnavailable)
	}
	// A budget that would forbid every eviction is refused.
	for y, want := range map[string]string{
		"replicas: 2\npodDisruptionBudget: {minAvailable: 2}":      "podDisruptionBudget.minAvailable: 2 with 2 replicas would forbid every eviction",
		"replicas: 3\npodDisruptionBudget: {minAvailable: '100%'}": "podDisruptionBudget.minAvailable: 100% would forbid every eviction",
	} {
		_, err := render(t, values(t, y), "yunikorn-userinfo", "yunikorn-userinfo")
		if assert.Error(t, err, y) {
			assert.Contains(t, err.Error(), want)
		}
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// regexSettings are the settings whose values are Go regular expressions,
// each with the values path the schema names in its error.
var regexSettings = []struct{ values, path, template string }{
	{"settings: {systemUsers: ['^ok$', '(']}", "/settings/systemUsers/1", "settings.systemUsers"},
	{"settings: {externalUsers: '[a-'}", "/settings/externalUsers", "settings.externalUsers"},
	{"settings: {externalGroups: ['^a$', '^b(?<x>)$', '\\q']}", "/settings/externalGroups/2", "settings.externalGroups"},
	{"settings: {schedulerUsers: ['x{2,1}']}", "/settings/schedulerUsers/0", "settings.schedulerUsers"},
	{"settings: {recordedGroups: {include: ['a**']}}", "/settings/recordedGroups", "settings.recordedGroups.include"},
	{"settings: {recordedGroups: {exclude: ['(?P<n>a']}}", "/settings/recordedGroups", "settings.recordedGroups.exclude"},
	{"settings: {adopters: {users: ['^ok$', 'x{2,1}']}}", "/settings/adopters", "settings.adopters.users"},
	{"settings: {adopters: {groups: '[a-'}}", "/settings/adopters", "settings.adopters.groups"},
	{"settings: {workloads: [{preset: kuberay, operators: ['^x$', ')']}]}", "/settings/workloads/0", "settings.workloads[].operators"},
	{"settings: {scheduling: {processNamespaces: ['(']}}", "/settings/scheduling/processNamespaces/0", "settings.scheduling.processNamespaces"},
	{"settings: {scheduling: {bypassNamespaces: ['^kube-system$', '[']}}", "/settings/scheduling/bypassNamespaces/1", "settings.scheduling.bypassNamespaces"},
	{"settings: {scheduling: {labelNamespaces: '*'}}", "/settings/scheduling/labelNamespaces", "settings.scheduling.labelNamespaces"},
	{"settings: {scheduling: {noLabelNamespaces: ['a(?=b)']}}", "/settings/scheduling/noLabelNamespaces/0", "settings.scheduling.noLabelNamespaces"},
}

// TestChart_refusesBadRegexes: a pattern Go's regexp (the policy's dialect)
// cannot compile fails the rendering, naming the value: through
// values.schema.json ("format": "regex", which Helm checks with Go's
// regexp), and through the chart's own check when the schema is skipped
// (--skip-schema-validation); in both modes.
func TestChart_refusesBadRegexes(t *testing.T) {
	t.Parallel()
	for _, tc := range regexSettings {
		for _, mode := range []string{"standalone", "kubewarden"} {
			v := values(t, tc.values)
			v["mode"] = mode
			_, err := render(t, v, "yunikorn-userinfo", "yunikorn-userinfo")
			if assert.Error(t, err, "%s %s: schema", mode, tc.values) {
				assert.Contains(t, err.Error(), tc.path, tc.values)
			}
			_, err = renderWith(t, v, "yunikorn-userinfo", "yunikorn-userinfo", chartrender.Options{Upgrade: true, SkipSchema: true})
			if assert.Error(t, err, "%s %s: the chart's check", mode, tc.values) {
				assert.Contains(t, err.Error(), tc.template+": a pattern is not a Go regular expression", tc.values)
				assert.Contains(t, err.Error(), "error parsing regexp", tc.values)
			}
		}
	}
	// What Go accepts and a JavaScript-dialect checker would not (inline
	// flags, \A, \z, Unicode classes), in every form, passes both.
	ok := values(t, `settings:
  systemUsers: ['(?i)^system:serviceaccount:kube-system:', '\A(?:admin)\z']
  externalUsers: '^livy$,^hue$'
  externalGroups: ['^\p{L}+$']
  recordedGroups: {include: ['^team-'], exclude: '^system:'}
  scheduling: {processNamespaces: ['^spark-'], bypassNamespaces: '^kube-system$', labelNamespaces: [], noLabelNamespaces: ['^x$']}
  workloads: [{preset: kuberay, operators: '^system:serviceaccount:ray:op$'}]`)
	for _, skip := range []bool{false, true} {
		_, err := renderWith(t, ok, "yunikorn-userinfo", "yunikorn-userinfo", chartrender.Options{Upgrade: true, SkipSchema: skip})
		assert.NoError(t, err, "skip schema %v", skip)
	}
	// Wrong types fail the schema, naming the value.
	for y, want := range map[string]string{
		"settings: {systemUsers: [1]}":                                    "/settings/systemUsers",
		"settings: {systemUsers: {a: b}}":                                 "/settings/systemUsers",
		"settings: {scheduling: {processNamespaces: true}}":               "/settings/scheduling/processNamespaces",
		"hostNetwork: 'yes'":                                              "/hostNetwork",
		"webhookPort: 70000":                                              "/webhookPort",
		"podLabels: {a: 1}":                                               "/podLabels/a",
		"imagePullSecrets: [regcred]":                                     "/imagePullSecrets/0",
		"namespaceSelector: {matchExpressions: [{key: a, operator: In}]}": "/namespaceSelector/matchExpressions/0",
		"namespaceSelector: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}": "/namespaceSelector/matchExpressions/0",
		"kubewarden: {policyServer: {nodeSelector: {a: b}}}":                               "nodeSelector",
		"kubewarden: {policyServer: {verification: {config: {apiVersion: v2}}}}":           "/kubewarden/policyServer/verification/config/apiVersion",
		"excludedNamespaces: ['Not A Namespace']":                                          "/excludedNamespaces/0",
		"registrationGate: {timeoutSeconds: '5m'}":                                         "/registrationGate/timeoutSeconds",
	} {
		_, err := render(t, values(t, y), "yunikorn-userinfo", "yunikorn-userinfo")
		if assert.Error(t, err, y) {
			assert.Contains(t, err.Error(), want, y)
		}
	}
	// Port clashes and a verification config without a PolicyServer of
	// the chart's own fail the chart's checks.
	for y, want := range map[string]string{
		"webhookPort: 9090": "webhookPort and metricsPort: both are 9090",
		"mode: kubewarden\nkubewarden: {policyServer: {create: false, name: default, verification: {config: {apiVersion: v1}}}}": "kubewarden.policyServer.verification.config: the chart creates the verification ConfigMap only for a PolicyServer of its own",
	} {
		_, err := render(t, values(t, y), "yunikorn-userinfo", "yunikorn-userinfo")
		if assert.Error(t, err, y) {
			assert.Contains(t, err.Error(), want, y)
		}
	}
}

// hooksAndManifests splits a rendering as Helm does before installing it
// (its own sorter): the hooks, and the release's resources in install
// order.
func hooksAndManifests(t *testing.T, v map[string]any, o chartrender.Options) ([]*releasev1.Hook, []releaseutil.Manifest) {
	t.Helper()
	files, err := chartrender.RenderFiles(filepath.Join(repoRoot, chartDir), v, "yunikorn-userinfo", "yunikorn-userinfo", o)
	require.NoError(t, err)
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	require.NoError(t, err)
	return hooks, manifests
}

// TestChart_registrationGate: install ordering. On a first install the
// webhook configurations are ordinary release resources (upgraded in place,
// removed first on uninstall) registered with failurePolicy Ignore, and a
// post-install hook Job, after its RBAC, waits for the serving Certificate
// and the Deployment's rollout, then patches failurePolicy: applying its
// patches to the first install's configurations gives exactly the steady
// state `helm upgrade` renders.
func TestChart_registrationGate(t *testing.T) {
	t.Parallel()
	hooks, manifests := hooksAndManifests(t, nil, chartrender.Options{})
	kinds := map[string]string{}
	for _, m := range manifests {
		kinds[m.Head.Kind] = m.Content
	}
	require.Contains(t, kinds, "MutatingWebhookConfiguration", "the configurations are release resources, not hooks")
	require.Contains(t, kinds, "ValidatingWebhookConfiguration")

	var job *batchv1.Job
	var order []string
	for _, h := range hooks {
		assert.ElementsMatch(t, []releasev1.HookEvent{releasev1.HookPostInstall, releasev1.HookPostRollback}, h.Events, "%s %s", h.Kind, h.Name)
		assert.ElementsMatch(t, []releasev1.HookDeletePolicy{releasev1.HookBeforeHookCreation, releasev1.HookSucceeded}, h.DeletePolicies, "%s %s", h.Kind, h.Name)
		if h.Kind == "Job" {
			ms, err := decodeManifests("gate", []byte(h.Manifest))
			require.NoError(t, err)
			job = ms[0].obj.(*batchv1.Job)
			assert.Equal(t, 0, h.Weight)
		} else {
			assert.Less(t, h.Weight, 0, "%s before the Job", h.Kind)
		}
		order = append(order, h.Kind)
	}
	assert.ElementsMatch(t, []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Job"}, order)
	require.NotNil(t, job)

	install := mustRenderInstall(t, nil, "yunikorn-userinfo", "yunikorn-userinfo")
	steady := mustRender(t, nil, "yunikorn-userinfo", "yunikorn-userinfo")
	dep := only[*appsv1.Deployment](t, steady)
	spec := job.Spec.Template.Spec
	require.Len(t, spec.InitContainers, 2)
	assert.Equal(t, []string{"wait", "--namespace=yunikorn-userinfo", "--for=condition=Ready", "--timeout=240s", "--cache-dir=/tmp/kube-cache",
		"certificate.cert-manager.io/yunikorn-userinfo-serving"}, spec.InitContainers[0].Args)
	assert.Equal(t, []string{"rollout", "status", "--namespace=yunikorn-userinfo", "--timeout=240s", "--cache-dir=/tmp/kube-cache",
		"deployment/" + dep.Name}, spec.InitContainers[1].Args)
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		require.NotNil(t, c.SecurityContext, c.Name)
		assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, c.Name)
		assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation, c.Name)
	}
	servingName := ""
	for _, m := range install {
		if c, ok := m.obj.(interface{ GetName() string }); ok && m.gvk.Kind == "Certificate" && strings.HasSuffix(c.GetName(), "-serving") {
			servingName = c.GetName()
		}
	}
	assert.Equal(t, "yunikorn-userinfo-serving", servingName, "the Job waits for the Certificate the chart renders")

	// Each configuration: Ignore on install, and the Job's patch of it
	// gives the steady state exactly.
	patches := map[string]string{}
	for _, c := range spec.Containers {
		require.Len(t, c.Args, 6, c.Name)
		assert.Equal(t, "patch", c.Args[0])
		patches[c.Args[1]+"/"+c.Args[2]] = strings.TrimPrefix(c.Args[5], "--patch=")
	}
	check := func(kind, name string, installed, wanted any) {
		t.Helper()
		p, ok := patches[kind+"/"+name]
		require.True(t, ok, "the Job patches %s %s", kind, name)
		patch, err := jsonpatch.DecodePatch([]byte(p))
		require.NoError(t, err)
		doc, err := json.Marshal(installed)
		require.NoError(t, err)
		patched, err := patch.Apply(doc)
		require.NoError(t, err, "%s: every test operation holds on the installed object", name)
		want, err := json.Marshal(wanted)
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(patched), "%s: the gate's patch gives the steady state", name)
	}
	im := only[*admissionregistrationv1.MutatingWebhookConfiguration](t, install)
	sm := only[*admissionregistrationv1.MutatingWebhookConfiguration](t, steady)
	for _, w := range im.Webhooks {
		assert.Equal(t, admissionregistrationv1.Ignore, *w.FailurePolicy, "%s: Ignore until the webhook serves", w.Name)
	}
	for _, w := range sm.Webhooks {
		assert.Equal(t, admissionregistrationv1.Fail, *w.FailurePolicy, "%s: helm upgrade renders Fail", w.Name)
	}
	check("mutatingwebhookconfiguration", im.Name, im, sm)
	notSettings := func(m manifest) bool {
		v, ok := m.obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		return ok && settingsWebhook(v)
	}
	iv := only[*admissionregistrationv1.ValidatingWebhookConfiguration](t, slices.DeleteFunc(slices.Clone(install), notSettings))
	sv := only[*admissionregistrationv1.ValidatingWebhookConfiguration](t, slices.DeleteFunc(slices.Clone(steady), notSettings))
	check("validatingwebhookconfiguration", iv.Name, iv, sv)
	assert.Len(t, patches, 2)

	// The Job's account may read and patch these two configurations only.
	var cr *rbacv1.ClusterRole
	for _, h := range hooks {
		if h.Kind == "ClusterRole" {
			ms, err := decodeManifests("gate", []byte(h.Manifest))
			require.NoError(t, err)
			cr = ms[0].obj.(*rbacv1.ClusterRole)
		}
	}
	require.NotNil(t, cr)
	var names []string
	for _, r := range cr.Rules {
		assert.Equal(t, []string{"get", "patch"}, r.Verbs)
		assert.Equal(t, []string{"admissionregistration.k8s.io"}, r.APIGroups)
		names = append(names, r.ResourceNames...)
	}
	assert.ElementsMatch(t, []string{im.Name, iv.Name}, names)

	// helm upgrade: no hook at all, Fail from the start.
	hooks, _ = hooksAndManifests(t, nil, chartrender.Options{Upgrade: true})
	assert.Empty(t, hooks)
	// No gate where there is nothing to open: Ignore by choice, the gate
	// turned off (Fail from the start, as before), Kubewarden (whose
	// controller registers a policy's webhook once its PolicyServer is
	// ready), or no twin (one patch).
	for y, wantJob := range map[string]bool{
		"failurePolicy: Ignore":              false,
		"registrationGate: {enabled: false}": false,
		"mode: kubewarden":                   false,
		"validatingTwin: false":              true,
		"tls: {certManager: false, existingSecret: s, caBundle: Q0EK}": true,
	} {
		v := values(t, y)
		ms := mustRenderInstall(t, v, "yunikorn-userinfo", "yunikorn-userinfo")
		jobs := all[*batchv1.Job](ms)
		assert.Equal(t, wantJob, len(jobs) == 1, y)
		for _, m := range all[*admissionregistrationv1.MutatingWebhookConfiguration](ms) {
			for _, w := range m.Webhooks {
				want := admissionregistrationv1.Fail
				if wantJob || y == "failurePolicy: Ignore" {
					want = admissionregistrationv1.Ignore
				}
				assert.Equal(t, want, *w.FailurePolicy, y)
			}
		}
		if wantJob {
			j := jobs[0].Spec.Template.Spec
			if y == "validatingTwin: false" {
				assert.Len(t, j.Containers, 1, y)
			}
			if strings.Contains(y, "certManager: false") {
				assert.Len(t, j.InitContainers, 1, "%s: no Certificate to wait for", y)
			}
		}
	}
}

// TestChart_uninstallOrder: Helm deletes the webhook configurations
// before anything they call (its uninstall order, applied to the steady
// state), so an uninstall never leaves a fail-closed webhook without a
// server; they are release resources, which a hook would not be.
func TestChart_uninstallOrder(t *testing.T) {
	t.Parallel()
	files, err := chartrender.RenderFiles(filepath.Join(repoRoot, chartDir), nil, "yunikorn-userinfo", "yunikorn-userinfo", chartrender.Options{Upgrade: true})
	require.NoError(t, err)
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.UninstallOrder)
	require.NoError(t, err)
	assert.Empty(t, hooks)
	var kinds []string
	for _, m := range manifests {
		kinds = append(kinds, m.Head.Kind)
	}
	require.GreaterOrEqual(t, len(kinds), 3)
	assert.ElementsMatch(t, []string{"ValidatingWebhookConfiguration", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}, kinds[:3],
		"deleted first (the twin, the settings ConfigMap's, the mutating): %v", kinds)
	assert.Less(t, slices.Index(kinds, "MutatingWebhookConfiguration"), slices.Index(kinds, "Deployment"))
	assert.Less(t, slices.Index(kinds, "MutatingWebhookConfiguration"), slices.Index(kinds, "Service"))
}

// TestChart_kubeVersionIsTested: Chart.yaml claims exactly the Kubernetes
// minor versions the end-to-end suite runs, from the oldest to the newest
// it builds a kube-apiserver of: the e2e module's own k8s.io/kubernetes pin
// (the newest) and the control-plane wrapper modules e2e/kube<N> (older
// versions, E2E_KUBE_VERSION), and none older. The upper side stays open
// (RATIONALE.md, "Why does kubeVersion start at 1.33?"). Widening the claim
// takes a test on the older version (docs/UPGRADING.md, "Kubernetes
// versions").
func TestChart_kubeVersionIsTested(t *testing.T) {
	t.Parallel()
	pinned := func(gomod string) *semver.Version {
		t.Helper()
		data, err := os.ReadFile(gomod)
		require.NoError(t, err)
		var pin string
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
				pin = f[1]
			}
		}
		require.NotEmpty(t, pin, "%s pins k8s.io/kubernetes", gomod)
		v, err := semver.NewVersion(pin)
		require.NoError(t, err)
		return v
	}
	wrappers, err := filepath.Glob(filepath.Join(repoRoot, "e2e", "kube[0-9]*", "go.mod"))
	require.NoError(t, err)
	require.NotEmpty(t, wrappers, "the suite runs on an older Kubernetes too (e2e/kube<N>)")
	newest := pinned(filepath.Join(repoRoot, "e2e", "go.mod"))
	oldest := newest
	for _, gomod := range wrappers {
		v := pinned(gomod)
		// The directory names the version it builds: kube133 is 1.33.
		assert.Equal(t, fmt.Sprintf("kube%d%d", v.Major(), v.Minor()), filepath.Base(filepath.Dir(gomod)))
		if v.LessThan(oldest) {
			oldest = v
		}
	}
	require.Less(t, oldest.Minor(), newest.Minor(), "a wrapper module pins an older version than e2e/go.mod")

	data, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "Chart.yaml"))
	require.NoError(t, err)
	var md struct {
		KubeVersion string `json:"kubeVersion"`
	}
	require.NoError(t, yaml.Unmarshal(data, &md))
	c, err := semver.NewConstraint(md.KubeVersion)
	require.NoError(t, err)
	admits := func(v string) {
		t.Helper()
		sv, err := semver.NewVersion(v)
		require.NoError(t, err)
		assert.True(t, c.Check(sv), "kubeVersion %q admits %s", md.KubeVersion, v)
	}
	for minor := oldest.Minor(); minor <= newest.Minor(); minor++ {
		admits(fmt.Sprintf("v%d.%d.0", oldest.Major(), minor))
		// As the API server reports itself on managed clusters, with a
		// suffix.
		admits(fmt.Sprintf("v%d.%d.3-eks-1a2b3c", oldest.Major(), minor))
	}
	admits(oldest.Original())
	admits(newest.Original())
	older, err := semver.NewVersion(fmt.Sprintf("v%d.%d.99", oldest.Major(), oldest.Minor()-1))
	require.NoError(t, err)
	assert.False(t, c.Check(older), "kubeVersion %q claims the untested %s", md.KubeVersion, older)
	admits(fmt.Sprintf("v%d.%d.0", newest.Major(), newest.Minor()+1))
}

// TestChart_notes: NOTES.txt renders in every mode and says what the
// operator must know about the gate, one replica and host networking.
func TestChart_notes(t *testing.T) {
	t.Parallel()
	notes := func(y string, upgrade bool) string {
		t.Helper()
		files, err := chartrender.RenderFiles(filepath.Join(repoRoot, chartDir), values(t, y), "yunikorn-userinfo", "yunikorn-userinfo",
			chartrender.Options{Notes: true, Upgrade: upgrade})
		require.NoError(t, err)
		n, ok := files["yunikorn-userinfo/templates/NOTES.txt"]
		require.True(t, ok)
		return n
	}
	n := notes("", false)
	assert.Contains(t, n, "registered with failurePolicy Ignore")
	assert.Contains(t, n, "yunikorn-userinfo-registration")
	assert.NotContains(t, n, "One replica")
	assert.Contains(t, n, "Set serve.trustedSourceCIDRs", "the webhook port is open to every Pod by default")
	assert.NotContains(t, notes("serve: {trustedSourceCIDRs: [10.0.0.0/24]}", false), "Any Pod can connect")
	assert.NotContains(t, notes("", true), "registered with failurePolicy Ignore", "helm upgrade runs no gate")
	n = notes("replicas: 1\nhostNetwork: true\nwebhookPort: 10443", false)
	assert.Contains(t, n, "One replica: no PodDisruptionBudget")
	assert.Contains(t, n, "ports 10443 and 9090")
	assert.Contains(t, notes("mode: kubewarden", false), "ClusterAdmissionPolicy yunikorn-user-info")
	n = notes("mode: cel\ncel: {mapAPIVersion: v1}", false)
	assert.Contains(t, n, "no webhook runs")
	assert.Contains(t, n, "yunikorn-userinfo/yunikorn-userinfo-cel")
	assert.NotContains(t, n, "rollout status")
	n = notes("mode: hybrid\ncel: {mapAPIVersion: v1}", false)
	assert.Contains(t, n, "they hold while the webhook is down")
	assert.Contains(t, n, "failurePolicy Ignore: skipped while it is down")
	assert.Contains(t, n, "rollout status deployment/yunikorn-userinfo")
}
