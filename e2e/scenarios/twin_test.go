package scenarios

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// Messages of the validating twin (docs/BEHAVIOUR.md §4.9).
const msgTwinMissing = "annotation " + annotationKey + " is missing: it must record the submitter " +
	"(the mutating policy adds it; a mutating webhook that ran after it may have removed it)"

// The webhook names Kubewarden gives the ClusterAdmissionPolicy pair.
const (
	kubewardenMutating   = "clusterwide-yunikorn-user-info.kubewarden.admission"
	kubewardenValidating = "clusterwide-yunikorn-user-info-validate.kubewarden.admission"
)

// TestHostileLaterWebhook: a mutating webhook registered to run after the
// policy strips or rewrites user.info on every Pod it sees. In both
// deployments' configurations the Pod is never stored with a value the
// rules do not allow:
//
//   - standalone (the shipped mutating and validating configurations):
//     reinvocation (IfNeeded) calls the policy again, which re-records a
//     stripped value and refuses a rewritten one; the final object then
//     carries alice's own record, which the API server checks itself
//     (the twin's match condition), so the twin is not called;
//   - Kubewarden (the configurations the controller registers for the
//     ClusterAdmissionPolicy pair: no reinvocation): the validating twin
//     refuses both.
//
// Kubewarden's policy-server cannot run here; serve answers at its place,
// at /mutate and at /validate with the shipped overlay, while the webhook
// configurations are built as the controller builds them.
func TestHostileLaterWebhook(t *testing.T) {
	start(t)
	ctx := t.Context()
	hostile := startHostileWebhook(t, e2e.identity[bob].annotation())
	adminCS := client(admin)
	// noReinvoke: the standalone pair with the mutating webhook never
	// called again, so that the twin, behind its match condition, is
	// what meets the hostile webhook's work.
	const standalone, kubewarden, noReinvoke = "twin-standalone", "twin-kubewarden", "twin-no-reinvocation"

	// The policy's configurations, one set per label.
	mwc, err := cluster.AdaptWebhookConfiguration(e2e.mwcManifest, "yunikorn-userinfo-e2e-twin", e2e.webhook.BaseURL, e2e.cluster.PKI.CAPEM,
		map[string]string{webhookLabel: standalone})
	require.NoError(t, err)
	vwc, err := cluster.AdaptValidatingWebhookConfiguration(e2e.vwcManifest, "yunikorn-userinfo-e2e-twin", e2e.webhook.BaseURL, e2e.cluster.PKI.CAPEM,
		map[string]string{webhookLabel: standalone})
	require.NoError(t, err)
	never := admissionregistrationv1.NeverReinvocationPolicy
	mwcOnce, err := cluster.AdaptWebhookConfiguration(e2e.mwcManifest, "yunikorn-userinfo-e2e-twin-once", e2e.webhook.BaseURL, e2e.cluster.PKI.CAPEM,
		map[string]string{webhookLabel: noReinvoke})
	require.NoError(t, err)
	for i := range mwcOnce.Webhooks {
		mwcOnce.Webhooks[i].ReinvocationPolicy = &never
	}
	vwcOnce, err := cluster.AdaptValidatingWebhookConfiguration(e2e.vwcManifest, "yunikorn-userinfo-e2e-twin-once", e2e.webhook.BaseURL, e2e.cluster.PKI.CAPEM,
		map[string]string{webhookLabel: noReinvoke})
	require.NoError(t, err)
	require.NotEmpty(t, vwcOnce.Webhooks[0].MatchConditions, "the shipped twin carries its match condition")
	kwMutating, err := cluster.KubewardenWebhookConfiguration(e2e.kubewardenPolicies[0], e2e.webhook.BaseURL, "/mutate", e2e.cluster.PKI.CAPEM,
		map[string]string{webhookLabel: kubewarden})
	require.NoError(t, err)
	kwValidating, err := cluster.KubewardenWebhookConfiguration(e2e.kubewardenPolicies[1], e2e.webhook.BaseURL, "/validate", e2e.cluster.PKI.CAPEM,
		map[string]string{webhookLabel: kubewarden})
	require.NoError(t, err)
	require.NotNil(t, kwMutating.Mutating, "the ClusterAdmissionPolicy is mutating")
	require.NotNil(t, kwValidating.Validating, "its twin is not")
	require.Nil(t, kwMutating.Mutating.Webhooks[0].ReinvocationPolicy, "Kubewarden sets no reinvocationPolicy")
	// The validating stage first, so that it is in force by the time the
	// hostile webhook is.
	for _, v := range []*admissionregistrationv1.ValidatingWebhookConfiguration{vwc, vwcOnce, kwValidating.Validating} {
		_, err := adminCS.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{})
		require.NoError(t, err, "create %s", v.Name)
		t.Cleanup(func() {
			_ = adminCS.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), v.Name, metav1.DeleteOptions{})
		})
	}

	for _, m := range []*admissionregistrationv1.MutatingWebhookConfiguration{mwc, mwcOnce, kwMutating.Mutating, hostile.configuration()} {
		_, err := adminCS.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{})
		require.NoError(t, err, "create %s", m.Name)
		t.Cleanup(func() {
			_ = adminCS.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), m.Name, metav1.DeleteOptions{})
		})
	}
	aliceID := e2e.identity[alice]
	tests := []struct {
		config, attack string
		// wantWebhook and wantMessage: the refusal; empty: the Pod is
		// created with alice's own identity.
		wantWebhook, wantMessage string
	}{
		{config: standalone, attack: "strip"},
		{config: standalone, attack: "rewrite", wantWebhook: workloadsWebhook, wantMessage: aliceID.notAllowed()},
		{config: noReinvoke, attack: "strip", wantWebhook: workloadsValidateWebhook, wantMessage: msgTwinMissing},
		{config: noReinvoke, attack: "rewrite", wantWebhook: workloadsValidateWebhook, wantMessage: aliceID.notAllowed()},
		{config: kubewarden, attack: "strip", wantWebhook: kubewardenValidating, wantMessage: msgTwinMissing},
		{config: kubewarden, attack: "rewrite", wantWebhook: kubewardenValidating, wantMessage: aliceID.notAllowed()},
	}
	for _, tc := range tests {
		t.Run(tc.config+"/"+tc.attack, func(t *testing.T) {
			ns, err := createNamespace(ctx, adminCS, t.Name(), map[string]string{webhookLabel: tc.config, hostileLabel: tc.attack})
			require.NoError(t, err)
			// In force once a dry run has gone through the hostile webhook
			// and then the validating stage, or been refused by the policy
			// called again (reinvocation) after the hostile webhook.
			var last string
			err = cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
				name := fmt.Sprintf("probe-%d", time.Now().UnixNano())
				_, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod(name, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				last = fmt.Sprint(err)
				return hostile.saw(ns, name) && (validated(t, ns, name) || mutateCalls(t, ns, name) >= 2), nil
			})
			require.NoError(t, err, "the configurations took effect in %s (last: %s)", ns, last)

			_, err = client(alice).CoreV1().Pods(ns).Create(ctx, newPod("victim", nil), metav1.CreateOptions{})
			assert.True(t, hostile.saw(ns, "victim"), "the hostile webhook ran after the policy")
			stored, getErr := adminCS.CoreV1().Pods(ns).Get(ctx, "victim", metav1.GetOptions{})
			if tc.wantMessage == "" {
				require.NoError(t, err)
				require.NoError(t, getErr)
				assert.Equal(t, aliceID.annotation(), stored.Annotations[annotationKey], "stored with alice's identity")
				assert.Equal(t, 2, mutateCalls(t, ns, "victim"), "the policy was called again after the hostile webhook (reinvocation)")
				assert.False(t, validated(t, ns, "victim"), "the API server judged alice's own record without the twin")
				return
			}
			requireRefused(t, err, tc.wantWebhook, tc.wantMessage)
			assert.Truef(t, apierrors.IsNotFound(getErr), "nothing stored: %v", getErr)
			t.Logf("%s/%s: refused by %s: %s", tc.config, tc.attack, tc.wantWebhook, tc.wantMessage)
		})
	}
}

// hostileLabel selects what the hostile webhook does in a namespace.
const hostileLabel = "e2e.yunikorn.apache.org/hostile"

// validated reports whether serve answered the Pod at /validate.
func validated(t *testing.T, ns, name string) bool {
	for _, a := range admissionsFor(t, e2e.webhook, ns) {
		if a.Name == name && a.Stage == "validate" {
			return true
		}
	}
	return false
}

// mutateCalls counts serve's answers for the Pod at /mutate.
func mutateCalls(t *testing.T, ns, name string) int {
	n := 0
	for _, a := range admissionsFor(t, e2e.webhook, ns) {
		if a.Name == name && a.Stage == "mutate" {
			n++
		}
	}
	return n
}

// hostileWebhook is a mutating webhook that undoes the policy's work on
// the Pods it sees: /strip removes user.info, /rewrite sets another
// identity. It records which Pods it was called for.
type hostileWebhook struct {
	url     string
	rewrite string // the value /rewrite writes
	mu      sync.Mutex
	seen    map[string]bool // namespace/name
}

func startHostileWebhook(t *testing.T, rewrite string) *hostileWebhook {
	t.Helper()
	certFile, keyFile, err := e2e.cluster.PKI.IssueServing("hostile", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	require.NoError(t, err)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	h := &hostileWebhook{url: "https://" + ln.Addr().String(), rewrite: rewrite, seen: map[string]bool{}}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return h
}

func (h *hostileWebhook) saw(ns, name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[ns+"/"+name]
}

func (h *hostileWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	var review admissionv1.AdmissionReview
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil || review.Request == nil {
		http.Error(w, "want an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	var pod corev1.Pod
	if json.Unmarshal(req.Object.Raw, &pod) == nil {
		h.mu.Lock()
		h.seen[req.Namespace+"/"+pod.Name] = true
		h.mu.Unlock()
		key := "/metadata/annotations/" + strings.ReplaceAll(annotationKey, "/", "~1")
		var patch []map[string]any
		switch {
		case r.URL.Path == "/strip" && pod.Annotations[annotationKey] != "":
			patch = []map[string]any{{"op": "remove", "path": key}}
		case r.URL.Path == "/rewrite" && pod.Annotations == nil:
			patch = []map[string]any{{"op": "add", "path": "/metadata/annotations", "value": map[string]string{annotationKey: h.rewrite}}}
		case r.URL.Path == "/rewrite":
			patch = []map[string]any{{"op": "add", "path": key, "value": h.rewrite}}
		}
		if patch != nil {
			resp.Patch, _ = json.Marshal(patch)
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType = &pt
		}
	}
	review.Request, review.Response = nil, resp
	out, _ := json.Marshal(review)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// configuration registers the hostile webhook after every other mutating
// webhook (configurations are called in name order), for Pod CREATE in the
// namespaces labelled hostileLabel=strip or rewrite, without reinvocation.
func (h *hostileWebhook) configuration() *admissionregistrationv1.MutatingWebhookConfiguration {
	never := admissionregistrationv1.NeverReinvocationPolicy
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	var hooks []admissionregistrationv1.MutatingWebhook
	for _, attack := range []string{"strip", "rewrite"} {
		u := h.url + "/" + attack
		hooks = append(hooks, admissionregistrationv1.MutatingWebhook{
			Name:                    attack + ".hostile.e2e.yunikorn.apache.org",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: e2e.cluster.PKI.CAPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			ReinvocationPolicy:      &never,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{hostileLabel: attack}},
		})
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "zz-e2e-hostile"}, Webhooks: hooks}
}

// deploymentFlag returns the value of --name=value in the container args
// of a Deployment manifest.
func deploymentFlag(manifest []byte, name string) (string, error) {
	var d appsv1.Deployment
	if err := yaml.Unmarshal(manifest, &d); err != nil {
		return "", fmt.Errorf("decode the deployment: %w", err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v, nil
			}
		}
	}
	return "", errors.New("the deployment sets no --" + name)
}
