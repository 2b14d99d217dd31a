package manifests

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// networkPolicyValues enable the NetworkPolicy with a control-plane CIDR,
// the konnectivity agents as a peer, and Prometheus for the metrics.
const networkPolicyValues = `networkPolicy:
  enabled: true
  apiServer:
    cidrs: [10.0.0.0/24, "fd00::/64"]
    peers:
      - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}
        podSelector: {matchLabels: {k8s-app: konnectivity-agent}}
  metrics:
    from:
      - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}`

// renderPolicy renders values and returns the NetworkPolicies and the
// Deployment (nil in kubewarden mode).
func renderPolicy(t *testing.T, values string) ([]*networkingv1.NetworkPolicy, *appsv1.Deployment) {
	t.Helper()
	var v map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(values), &v))
	var nps []*networkingv1.NetworkPolicy
	var dep *appsv1.Deployment
	for _, m := range mustRender(t, v, "uinfo", "platform") {
		switch o := m.obj.(type) {
		case *networkingv1.NetworkPolicy:
			nps = append(nps, o)
		case *appsv1.Deployment:
			dep = o
		}
	}
	return nps, dep
}

// TestChart_networkPolicy: off by default; enabled, it selects the
// webhook's Pods only, admits exactly the configured API server sources to
// the webhook port (and to no other), the configured scrapers to the
// metrics port, and restricts nothing else (no egress rule); the metrics
// rule is left out when nobody is configured; kubewarden mode renders
// none.
func TestChart_networkPolicy(t *testing.T) {
	t.Parallel()
	nps, _ := renderPolicy(t, "")
	assert.Empty(t, nps, "off by default")
	nps, _ = renderPolicy(t, "mode: kubewarden\n"+networkPolicyValues)
	assert.Empty(t, nps, "the webhook Deployment's policy: none under Kubewarden")

	nps, dep := renderPolicy(t, networkPolicyValues)
	require.Len(t, nps, 1)
	np := nps[0]
	assert.Equal(t, "platform", np.Namespace)
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	require.NoError(t, err)
	assert.False(t, sel.Empty(), "selects the webhook's Pods, not the whole namespace")
	assert.True(t, sel.Matches(labels.Set(dep.Spec.Template.Labels)), "selects the Deployment's Pods")
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes, "ingress only: the policy calls the API server")
	require.Len(t, np.Spec.Ingress, 2)

	c := dep.Spec.Template.Spec.Containers[0]
	portOf := func(rule networkingv1.NetworkPolicyIngressRule) corev1.ContainerPort {
		require.Len(t, rule.Ports, 1)
		require.NotNil(t, rule.Ports[0].Port)
		return containerPort(t, c, *rule.Ports[0].Port)
	}
	webhook, metrics := np.Spec.Ingress[0], np.Spec.Ingress[1]
	assert.Equal(t, int32(8443), portOf(webhook).ContainerPort, "the first rule opens the webhook port")
	assert.Equal(t, int32(9090), portOf(metrics).ContainerPort, "the second the metrics port")
	assert.Equal(t, []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/24"}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::/64"}},
		{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}},
		},
	}, webhook.From, "exactly the API server's sources")
	assert.Equal(t, []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}},
	}, metrics.From)
	for _, rule := range np.Spec.Ingress {
		assert.NotEmpty(t, rule.From, "no rule admits every source")
	}

	nps, _ = renderPolicy(t, "networkPolicy: {enabled: true, apiServer: {cidrs: [172.16.0.10/32]}}")
	require.Len(t, nps, 1)
	require.Len(t, nps[0].Spec.Ingress, 1, "no metrics rule without scrapers: only the node reaches :9090")
	assert.Equal(t, intstr.FromString("https"), *nps[0].Spec.Ingress[0].Ports[0].Port)
	assert.Equal(t, []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "172.16.0.10/32"}}}, nps[0].Spec.Ingress[0].From)
}

// TestChart_trustedSources: serve keeps its reserve and unproven budget
// from the values; serve.trustedSourceCIDRs become --trusted-source-cidrs
// (none by default) and, when networkPolicy.apiServer.cidrs is empty, the
// NetworkPolicy's sources of the webhook port.
func TestChart_trustedSources(t *testing.T) {
	t.Parallel()
	args := func(dep *appsv1.Deployment) []string {
		require.NotNil(t, dep)
		return dep.Spec.Template.Spec.Containers[0].Args
	}
	_, dep := renderPolicy(t, "")
	assert.Contains(t, args(dep), "--reserved-conns=512")
	assert.Contains(t, args(dep), "--max-pending-conns=512")
	for _, a := range args(dep) {
		assert.NotContains(t, a, "--trusted-source-cidrs", "nobody is trusted by default")
	}

	const trusted = "serve: {trustedSourceCIDRs: [10.0.0.0/24, 'fd00::/64'], reservedConns: 128, maxPendingConns: 1024}"
	nps, dep := renderPolicy(t, trusted)
	assert.Empty(t, nps, "trusting sources does not enable the NetworkPolicy")
	assert.Contains(t, args(dep), "--trusted-source-cidrs=10.0.0.0/24,fd00::/64")
	assert.Contains(t, args(dep), "--reserved-conns=128")
	assert.Contains(t, args(dep), "--max-pending-conns=1024")

	nps, _ = renderPolicy(t, trusted+"\nnetworkPolicy: {enabled: true}")
	require.Len(t, nps, 1)
	assert.Equal(t, []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/24"}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::/64"}},
	}, nps[0].Spec.Ingress[0].From, "the trusted sources, when the policy names none")

	nps, _ = renderPolicy(t, trusted+"\nnetworkPolicy: {enabled: true, apiServer: {cidrs: [172.16.0.10/32]}}")
	require.Len(t, nps, 1)
	assert.Equal(t, []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "172.16.0.10/32"}}},
		nps[0].Spec.Ingress[0].From, "the policy's own sources win")
}
