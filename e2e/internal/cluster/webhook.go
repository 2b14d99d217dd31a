package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// WebhookOptions configure StartWebhook.
type WebhookOptions struct {
	// Name names the process, its log and its certificate. Required.
	Name string
	// Binary is the yunikorn-userinfo executable. Required.
	Binary string
	// SettingsFile is passed as --settings-path. Required.
	SettingsFile string
	// ExtraArgs are appended to serve's arguments.
	ExtraArgs []string
	// ListenIP is the loopback address serve listens on, as a Pod has an
	// address of its own. Default: 127.0.0.1. The serving certificate is
	// valid for it and for 127.0.0.1 (where a balancer in front listens).
	ListenIP string
	// DNSNames are more names the serving certificate is valid for,
	// besides localhost.
	DNSNames []string
}

// Webhook is a running `yunikorn-userinfo serve`.
type Webhook struct {
	// BaseURL is https://127.0.0.1:<port>; the admission endpoint is
	// BaseURL + "/mutate".
	BaseURL string
	// Process is the serve process; Stop and Restart act on it.
	Process *Process
	// Addr is the host:port serve listens on; MetricsURL its /metrics.
	Addr       string
	MetricsURL string
	// ReadyzURL is its readiness endpoint.
	ReadyzURL string

	c        *Cluster
	readyz   string
	timeout  time.Duration
	certName string
	certIPs  []net.IP
	certDNS  []string
}

// StartWebhook starts `serve` on free loopback ports with a serving
// certificate from the cluster's CA, and waits until /readyz answers 200
// (module compiled, settings accepted).
func (c *Cluster) StartWebhook(ctx context.Context, opts WebhookOptions) (*Webhook, error) {
	if opts.Name == "" || opts.Binary == "" || opts.SettingsFile == "" {
		return nil, errors.New("start webhook: name, binary and settings file are required")
	}
	binary, err := filepath.Abs(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("start webhook %s: %w", opts.Name, err)
	}
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("start webhook %s: %w (build it with `make build`, or set E2E_SERVE_BINARY)", opts.Name, err)
	}
	ip := opts.ListenIP
	if ip == "" {
		ip = "127.0.0.1"
	}
	parsed := net.ParseIP(ip)
	if parsed == nil || !parsed.IsLoopback() {
		return nil, fmt.Errorf("start webhook %s: listen address %q is not a loopback address", opts.Name, ip)
	}
	certIPs := []net.IP{net.ParseIP("127.0.0.1")}
	if ip != "127.0.0.1" {
		certIPs = append(certIPs, parsed)
	}
	certDNS := append([]string{"localhost"}, opts.DNSNames...)
	certFile, keyFile, err := c.PKI.IssueServing(opts.Name, certIPs, certDNS)
	if err != nil {
		return nil, err
	}
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	listen := net.JoinHostPort(ip, strconv.Itoa(ports[0]))
	metricsListen := net.JoinHostPort(ip, strconv.Itoa(ports[1]))
	p := c.track(&Process{
		Name: opts.Name,
		Path: binary,
		Args: append([]string{"serve",
			"--listen", listen,
			"--metrics-listen", metricsListen,
			"--cert-file", certFile, "--key-file", keyFile,
			"-s", opts.SettingsFile,
			// One JSON line per admission: the scenarios read them to see
			// who the API server said was asking.
			"--log-format", "json", "--log-level", "info",
		}, opts.ExtraArgs...),
	})
	w := &Webhook{
		BaseURL: "https://" + listen, Process: p, Addr: listen,
		MetricsURL: "http://" + metricsListen + "/metrics", ReadyzURL: "https://" + listen + "/readyz",
		c: c, readyz: "https://" + listen + "/readyz", timeout: c.opts.StartTimeout,
		certName: opts.Name, certIPs: certIPs, certDNS: certDNS,
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// Start starts the serve process (again, after Stop) on the same ports and
// waits for /readyz.
func (w *Webhook) Start(ctx context.Context) error {
	if err := w.Process.start(); err != nil {
		return err
	}
	hc, err := w.c.httpClient()
	if err != nil {
		return err
	}
	return w.c.waitHealthy(ctx, w.Process, w.Process.Name+" /readyz", func(ctx context.Context) error {
		return getOK(ctx, hc, w.readyz, "")
	})
}

// StartUnready starts the serve process (again, after Stop) and waits only
// for /healthz: for a serve expected to stay up not ready (its settings
// refused).
func (w *Webhook) StartUnready(ctx context.Context) error {
	if err := w.Process.start(); err != nil {
		return err
	}
	hc, err := w.c.httpClient()
	if err != nil {
		return err
	}
	healthz := strings.TrimSuffix(w.readyz, "/readyz") + "/healthz"
	return w.c.waitHealthy(ctx, w.Process, w.Process.Name+" /healthz", func(ctx context.Context) error {
		return getOK(ctx, hc, healthz, "")
	})
}

// Stop stops the serve process.
func (w *Webhook) Stop() error {
	return w.Process.Stop(w.c.opts.StopTimeout)
}

// StopWithin stops the serve process with SIGTERM, allowing it grace to
// drain (its --shutdown-delay and --shutdown-timeout) before SIGKILL.
func (w *Webhook) StopWithin(grace time.Duration) error {
	return w.Process.Stop(grace)
}

// RotateCertificate writes a new serving certificate and key (a new key
// pair, from the same CA, for the same addresses) over the files serve
// reads, as cert-manager renews a Secret, and returns the new
// certificate's serial number. serve picks it up at its next
// --cert-reload-interval.
func (w *Webhook) RotateCertificate() (*big.Int, error) {
	certFile, _, err := w.c.PKI.IssueServing(w.certName, w.certIPs, w.certDNS)
	if err != nil {
		return nil, fmt.Errorf("rotate the certificate of %s: %w", w.Process.Name, err)
	}
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("rotate the certificate of %s: %w", w.Process.Name, err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("rotate the certificate of %s: no PEM block in %s", w.Process.Name, certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("rotate the certificate of %s: %w", w.Process.Name, err)
	}
	return cert.SerialNumber, nil
}

// ServingSerial connects to serve and returns the serial number of the
// certificate it presents (verified against the cluster's CA).
func (w *Webhook) ServingSerial(ctx context.Context) (*big.Int, error) {
	d := tls.Dialer{Config: &tls.Config{RootCAs: w.c.caPool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", w.Addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", w.Process.Name, err)
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, fmt.Errorf("connect to %s: no certificate", w.Process.Name)
	}
	return certs[0].SerialNumber, nil
}

// AdmissionLog is one line that serve logs per admission request.
type AdmissionLog struct {
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	User        string `json:"user"`
	Operation   string `json:"operation"`
	SubResource string `json:"subresource"`
	Stage       string `json:"stage"`
	Decision    string `json:"decision"`
	Code        int    `json:"code"`
	Message     string `json:"message"`
}

// Admissions returns the admission lines serve has logged so far.
func (w *Webhook) Admissions() ([]AdmissionLog, error) {
	f, err := os.Open(w.Process.LogFile)
	if err != nil {
		return nil, fmt.Errorf("read the webhook log: %w", err)
	}
	defer f.Close()
	var out []AdmissionLog
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var line struct {
			Msg string `json:"msg"`
			AdmissionLog
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "admission" {
			continue
		}
		out = append(out, line.AdmissionLog)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the webhook log: %w", err)
	}
	return out, nil
}

// AdaptSettings takes the settings file out of the webhook ConfigMap
// manifest (deploy/webhook/configmap.yaml, key settings.yaml) and returns it
// with externalUsers replaced; everything else is kept as shipped.
func AdaptSettings(configMapYAML []byte, externalUsers []string) ([]byte, error) {
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(configMapYAML, &cm); err != nil {
		return nil, fmt.Errorf("decode the settings configmap: %w", err)
	}
	raw, ok := cm.Data["settings.yaml"]
	if !ok {
		return nil, errors.New("decode the settings configmap: no data key settings.yaml")
	}
	var settings map[string]any
	if err := yaml.Unmarshal([]byte(raw), &settings); err != nil {
		return nil, fmt.Errorf("decode settings.yaml: %w", err)
	}
	if _, ok := settings["externalUsers"]; !ok {
		return nil, errors.New("decode settings.yaml: no externalUsers key to replace")
	}
	settings["externalUsers"] = externalUsers
	out, err := yaml.Marshal(settings)
	if err != nil {
		return nil, fmt.Errorf("encode settings.yaml: %w", err)
	}
	return out, nil
}

// AdaptWebhookConfiguration turns the shipped MutatingWebhookConfiguration
// (deploy/webhook/mutatingwebhookconfiguration.yaml) into one for a webhook
// at baseURL (https://host:port): each webhook's service reference becomes
// baseURL plus the service's path, with the CA bundle, and its namespaceSelector additionally
// requires the given labels, so only the tests' namespaces are covered.
// Rules, match conditions, failure, reinvocation and match policies and
// timeouts stay exactly as shipped: they are what is under test.
func AdaptWebhookConfiguration(manifest []byte, name, baseURL string, caBundle []byte, nsLabels map[string]string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(manifest, &mwc); err != nil {
		return nil, fmt.Errorf("decode the webhook configuration: %w", err)
	}
	if len(mwc.Webhooks) == 0 {
		return nil, errors.New("decode the webhook configuration: no webhooks")
	}
	mwc.Name = name
	// cert-manager's CA injection annotation means nothing here: the CA
	// bundle is set below.
	delete(mwc.Annotations, "cert-manager.io/inject-ca-from")
	for i := range mwc.Webhooks {
		wh := &mwc.Webhooks[i]
		if err := adapt(wh.Name, &wh.ClientConfig, &wh.NamespaceSelector, baseURL, caBundle, nsLabels); err != nil {
			return nil, err
		}
	}
	return &mwc, nil
}

// AdaptValidatingWebhookConfiguration is AdaptWebhookConfiguration for the
// shipped ValidatingWebhookConfiguration (the validating twin).
func AdaptValidatingWebhookConfiguration(manifest []byte, name, baseURL string, caBundle []byte, nsLabels map[string]string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(manifest, &vwc); err != nil {
		return nil, fmt.Errorf("decode the validating webhook configuration: %w", err)
	}
	if len(vwc.Webhooks) == 0 {
		return nil, errors.New("decode the validating webhook configuration: no webhooks")
	}
	vwc.Name = name
	delete(vwc.Annotations, "cert-manager.io/inject-ca-from")
	for i := range vwc.Webhooks {
		wh := &vwc.Webhooks[i]
		if err := adapt(wh.Name, &wh.ClientConfig, &wh.NamespaceSelector, baseURL, caBundle, nsLabels); err != nil {
			return nil, err
		}
	}
	return &vwc, nil
}

// adapt points one webhook's client configuration at baseURL and narrows
// its namespace selector to the given labels.
func adapt(name string, cc *admissionregistrationv1.WebhookClientConfig, sel **metav1.LabelSelector, baseURL string, caBundle []byte, nsLabels map[string]string) error {
	svc := cc.Service
	if svc == nil {
		return fmt.Errorf("adapt webhook %s: clientConfig has no service", name)
	}
	// A service without a path is called at "/", as the API server does.
	u := baseURL + "/"
	if svc.Path != nil {
		u = baseURL + *svc.Path
	}
	*cc = admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caBundle}
	if *sel == nil {
		*sel = &metav1.LabelSelector{}
	}
	if (*sel).MatchLabels == nil {
		(*sel).MatchLabels = map[string]string{}
	}
	for k, v := range nsLabels {
		(*sel).MatchLabels[k] = v
	}
	return nil
}

// clusterAdmissionPolicy is what KubewardenWebhookConfigurations reads of a
// ClusterAdmissionPolicy manifest (policies.kubewarden.io/v1).
type clusterAdmissionPolicy struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Mutating          bool                                         `json:"mutating"`
		Rules             []admissionregistrationv1.RuleWithOperations `json:"rules"`
		FailurePolicy     *admissionregistrationv1.FailurePolicyType   `json:"failurePolicy"`
		MatchPolicy       *admissionregistrationv1.MatchPolicyType     `json:"matchPolicy"`
		NamespaceSelector *metav1.LabelSelector                        `json:"namespaceSelector"`
		ObjectSelector    *metav1.LabelSelector                        `json:"objectSelector"`
		SideEffects       *admissionregistrationv1.SideEffectClass     `json:"sideEffects"`
		TimeoutSeconds    *int32                                       `json:"timeoutSeconds"`
		MatchConditions   []admissionregistrationv1.MatchCondition     `json:"matchConditions"`
	} `json:"spec"`
}

// KubewardenWebhook is the webhook configuration the Kubewarden controller
// creates for a ClusterAdmissionPolicy: Mutating when the policy may
// mutate, else Validating.
type KubewardenWebhook struct {
	Mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
}

// KubewardenWebhookConfiguration builds, from a ClusterAdmissionPolicy
// manifest, the configuration the Kubewarden controller registers for it
// (policy_subreconciler_webhook.go: one webhook named
// clusterwide-NAME.kubewarden.admission with the policy's rules, failure
// and match policies, selectors, side effects, timeout and match
// conditions, review version v1, and no reinvocationPolicy), but calling
// baseURL+path instead of a policy-server Service, and with its namespace
// selector narrowed to nsLabels. The policy-server is what these tests
// cannot run; the registration is Kubewarden's.
func KubewardenWebhookConfiguration(manifest []byte, baseURL, path string, caBundle []byte, nsLabels map[string]string) (*KubewardenWebhook, error) {
	var p clusterAdmissionPolicy
	if err := yaml.Unmarshal(manifest, &p); err != nil {
		return nil, fmt.Errorf("decode the ClusterAdmissionPolicy: %w", err)
	}
	name := "clusterwide-" + p.Metadata.Name
	u := baseURL + path
	none := admissionregistrationv1.SideEffectClassNone
	side := p.Spec.SideEffects
	if side == nil {
		side = &none
	}
	sel := p.Spec.NamespaceSelector.DeepCopy()
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	for k, v := range nsLabels {
		sel.MatchLabels[k] = v
	}
	meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "kubewarden"}}
	hook := admissionregistrationv1.MutatingWebhook{
		Name: name + ".kubewarden.admission", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caBundle},
		Rules: p.Spec.Rules, FailurePolicy: p.Spec.FailurePolicy, MatchPolicy: p.Spec.MatchPolicy,
		NamespaceSelector: sel, ObjectSelector: p.Spec.ObjectSelector, SideEffects: side,
		TimeoutSeconds: p.Spec.TimeoutSeconds, AdmissionReviewVersions: []string{"v1"},
		MatchConditions: p.Spec.MatchConditions,
	}
	if p.Spec.Mutating {
		return &KubewardenWebhook{Mutating: &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: meta, Webhooks: []admissionregistrationv1.MutatingWebhook{hook}}}, nil
	}
	return &KubewardenWebhook{Validating: &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: meta, Webhooks: []admissionregistrationv1.ValidatingWebhook{validating(hook)}}}, nil
}

// validating is the same webhook registered for validation, which has no
// reinvocation policy.
func validating(m admissionregistrationv1.MutatingWebhook) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: m.Name, ClientConfig: m.ClientConfig, Rules: m.Rules, FailurePolicy: m.FailurePolicy,
		MatchPolicy: m.MatchPolicy, NamespaceSelector: m.NamespaceSelector, ObjectSelector: m.ObjectSelector,
		SideEffects: m.SideEffects, TimeoutSeconds: m.TimeoutSeconds,
		AdmissionReviewVersions: m.AdmissionReviewVersions, MatchConditions: m.MatchConditions,
	}
}

// Rendering is a multi-document manifest (a chart's rendering), its
// documents grouped by kind.
type Rendering struct {
	path   string
	byKind map[string][][]byte
}

// ReadRendering reads a multi-document YAML file.
func ReadRendering(path string) (*Rendering, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the chart rendering (make e2e writes it): %w", err)
	}
	r := &Rendering{path: path, byKind: map[string][][]byte{}}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return r, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if tm.Kind != "" {
			r.byKind[tm.Kind] = append(r.byKind[tm.Kind], doc)
		}
	}
}

// All returns the documents of a kind.
func (r *Rendering) All(kind string) [][]byte { return r.byKind[kind] }

// Kinds returns the kinds of the documents, sorted.
func (r *Rendering) Kinds() []string { return slices.Sorted(maps.Keys(r.byKind)) }

// OneValidating returns the only ValidatingWebhookConfiguration of the
// rendering besides the settings ConfigMap's (RELEASE-settings, which
// every rendering with serve has).
func (r *Rendering) OneValidating() ([]byte, error) {
	var docs [][]byte
	for _, doc := range r.byKind["ValidatingWebhookConfiguration"] {
		var m metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("read %s: %w", r.path, err)
		}
		if !strings.HasSuffix(m.Name, "-settings") {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 1 {
		return docs[0], nil
	}
	return nil, fmt.Errorf("%s: want exactly one ValidatingWebhookConfiguration besides the settings one, have %d", r.path, len(docs))
}

// One returns the only document of a kind.
func (r *Rendering) One(kind string) ([]byte, error) {
	if docs := r.byKind[kind]; len(docs) == 1 {
		return docs[0], nil
	}
	return nil, fmt.Errorf("%s: want exactly one %s, have %d", r.path, kind, len(r.byKind[kind]))
}
