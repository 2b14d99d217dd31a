package scenarios

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// TestInstallLines: the README's and docs/INSTALL.md's install lines, read
// from their fenced blocks (the two pages must carry the same ones), applied
// line by line against the real API server, with a Pod created after each
// line: not one is refused. The plain-manifest lines run for real: the
// webhook configurations are registered last, with the serving Secret's CA,
// and from then on the Pod is stamped. Before them, `kubectl apply -f
// deploy/webhook/` (the old, half-wrong line) registers nothing, and the
// registration step applied without its CA replacement is refused whole.
//
// This cluster has no kubectl, cert-manager, Kubewarden controller or
// kubelet, so the test plays them: each line is matched against the forms
// installLine knows (an unknown line fails the test, so the pages cannot
// drift from what runs here); kubectl's apply is a create, or a
// server-side apply of what exists, with strict field validation, kustomize the subset the kustomizations use
// (resources, JSON patches), cert-manager's CRDs come from the module
// test/manifests pins, and cert-manager's part (the serving Secret, the
// Certificate's Ready) and the kubelet's (a replica of serve, behind the
// Service as an ExternalName on a loopback address) are done here. The
// Kubewarden objects are created with Kubewarden's CRDs and no controller,
// which registers their webhooks only once a PolicyServer serves them. The
// Helm lines are not run (no Helm here): TestChartRegistrationGate runs the
// first install's rendering.
//
// It registers cluster-wide webhooks, as the lines say, so it runs alone.
func TestInstallLines(t *testing.T) {
	startAlone(t)
	ctx := t.Context()
	readme := installBlocks(t, "README.md")
	install := installBlocks(t, filepath.Join("docs", "INSTALL.md"))
	require.Equal(t, readme, install, "README.md and docs/INSTALL.md carry the same install lines")
	var lines []string
	for _, b := range readme {
		if strings.Contains(b, "deploy/webhook/registration") {
			lines = shellLines(b)
		}
	}
	require.NotEmpty(t, lines, "the plain-manifest install block")

	in := newInstaller(t)
	podNS := newNamespace(t, "") // selected by the shipped configurations, by no test's

	// The old line, kubectl apply -f on the directory: it fails on the
	// kustomization and, on a first run, on the namespaced objects, but it
	// registers nothing that refuses.
	errs := in.apply(ctx, in.readFiles(t, "deploy/webhook/"))
	assert.NotEmpty(t, errs, "kubectl apply -f deploy/webhook/ is not an install")
	t.Logf("kubectl apply -f deploy/webhook/: %v", errors.Join(errs...))
	in.requireNoRegistration(t)
	in.requireAdmitted(t, podNS, "after kubectl apply -f deploy/webhook/", false)

	for _, line := range lines {
		if strings.HasPrefix(line, "kubectl kustomize deploy/webhook/registration") {
			// First the step without its CA: refused, nothing registered.
			errs := in.apply(ctx, in.kustomize(t, "deploy/webhook/registration"))
			require.Len(t, errs, 3, "kubectl apply -k deploy/webhook/registration, as is: the two configurations and the settings check")
			t.Logf("kubectl apply -k deploy/webhook/registration: %v", errors.Join(errs...))
			for _, err := range errs {
				assert.Contains(t, err.Error(), "base64", "the placeholder is refused")
			}
			in.requireNoRegistration(t)
			in.requireAdmitted(t, podNS, "after apply -k registration without its CA", false)
		}
		in.run(t, line)
		registered := in.registered(t)
		in.requireAdmitted(t, podNS, "after "+line, registered)
	}
	require.True(t, in.registered(t), "the lines register the webhook")

	// Running the registration again changes nothing and refuses nothing.
	before, err := client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "yunikorn-userinfo", metav1.GetOptions{})
	require.NoError(t, err)
	for _, line := range lines {
		if strings.HasPrefix(line, "CA=") || strings.HasPrefix(line, "kubectl kustomize") {
			in.run(t, line)
			in.requireAdmitted(t, podNS, "after again "+line, true)
		}
	}
	after, err := client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "yunikorn-userinfo", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.Webhooks, after.Webhooks, "a second registration changes nothing")
	for _, w := range after.Webhooks {
		assert.Equal(t, e2e.cluster.PKI.CAPEM, w.ClientConfig.CABundle, "%s: the serving Secret's CA", w.Name)
	}
}

// installBlocks returns a page's fenced bash blocks that install: those
// with a helm install or a kubectl apply of deploy/.
func installBlocks(t *testing.T, page string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(e2e.repo, page))
	require.NoError(t, err)
	var blocks []string
	var cur *strings.Builder
	for line := range strings.SplitSeq(string(raw), "\n") {
		switch {
		case cur == nil && line == "```bash":
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			b := cur.String()
			if strings.Contains(b, "helm install yunikorn-userinfo") || strings.Contains(b, "kubectl apply -k deploy/") {
				blocks = append(blocks, b)
			}
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	require.NotEmpty(t, blocks, "%s has install blocks", page)
	return blocks
}

// shellLines joins continued lines and drops comments and blank lines.
func shellLines(block string) []string {
	var out []string
	var cont string
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cont += l
			continue
		}
		out = append(out, cont+line)
		cont = ""
	}
	return out
}

// installer plays what the lines call on: kubectl, cert-manager, the
// kubelet.
type installer struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
	vars   map[string]string
	t      *testing.T
}

func newInstaller(t *testing.T) *installer {
	cfg, err := e2e.cluster.Config(admin)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	in := &installer{
		dyn:    dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client(admin).Discovery())),
		vars:   map[string]string{},
		t:      t,
	}
	// Delete what the lines create, the fail-closed configurations first
	// (the Cleanups run last-registered first).
	t.Cleanup(in.cleanUp)
	return in
}

var (
	kubectlApplyFiles = regexp.MustCompile(`^kubectl apply((?: -f \S+)+)$`)
	kubectlApplyDir   = regexp.MustCompile(`^kubectl apply -k (\S+)$`)
	kubectlWaitCert   = regexp.MustCompile(`^kubectl -n (\S+) wait --for=condition=Ready certificate/(\S+) --timeout=(\S+)$`)
	kubectlRollout    = regexp.MustCompile(`^kubectl -n (\S+) rollout status deployment/(\S+) --timeout=(\S+)$`)
	kubectlGetCA      = regexp.MustCompile(`^(\w+)=\$\(kubectl -n (\S+) get secret (\S+) -o jsonpath='\{\.data\.ca\\\.crt\}'\)$`)
	kubectlRegister   = regexp.MustCompile(`^kubectl kustomize (\S+) \| sed "s\|([A-Z-]+)\|\$\{(\w+):\?[^}]*\}\|" \| kubectl apply -f -$`)
)

// run runs one install line as a shell with kubectl would.
func (in *installer) run(t *testing.T, line string) {
	t.Helper()
	ctx := t.Context()
	t.Logf("$ %s", line)
	switch {
	case kubectlApplyFiles.MatchString(line):
		var objs []*unstructured.Unstructured
		for f := range strings.FieldsSeq(strings.ReplaceAll(kubectlApplyFiles.FindStringSubmatch(line)[1], "-f ", "")) {
			if strings.HasPrefix(f, "deploy/kubewarden/") {
				in.installCRDs(t, "github.com/kubewarden/adm-controller", "charts/kubewarden-crds/templates/crds")
			}
			objs = append(objs, in.readFiles(t, f)...)
		}
		require.Empty(t, in.apply(ctx, objs), line)
	case kubectlApplyDir.MatchString(line):
		dir := kubectlApplyDir.FindStringSubmatch(line)[1]
		if dir == "deploy/webhook/cert-manager" {
			in.installCRDs(t, "github.com/cert-manager/cert-manager", "deploy/crds")
		}
		require.Empty(t, in.apply(ctx, in.kustomize(t, dir)), line)
	case kubectlWaitCert.MatchString(line):
		m := kubectlWaitCert.FindStringSubmatch(line)
		in.issueCertificate(t, m[1], m[2])
	case kubectlRollout.MatchString(line):
		m := kubectlRollout.FindStringSubmatch(line)
		in.serve(t, m[1], m[2])
	case kubectlGetCA.MatchString(line):
		m := kubectlGetCA.FindStringSubmatch(line)
		s, err := client(admin).CoreV1().Secrets(m[2]).Get(ctx, m[3], metav1.GetOptions{})
		require.NoError(t, err, line)
		// jsonpath prints .data as stored: base64.
		in.vars[m[1]] = base64.StdEncoding.EncodeToString(s.Data["ca.crt"])
	case kubectlRegister.MatchString(line):
		m := kubectlRegister.FindStringSubmatch(line)
		value := in.vars[m[3]]
		require.NotEmpty(t, value, "%s: ${%s:?} stops the line when it is empty", line, m[3])
		objs := in.kustomize(t, m[1])
		for i, o := range objs {
			raw, err := json.Marshal(o.Object)
			require.NoError(t, err)
			raw = bytes.ReplaceAll(raw, []byte(m[2]), []byte(value))
			objs[i] = &unstructured.Unstructured{}
			require.NoError(t, json.Unmarshal(raw, &objs[i].Object))
		}
		require.Empty(t, in.apply(ctx, objs), line)
		// Delete them before the replica stops (Cleanups run last first).
		t.Cleanup(in.deleteRegistration)
	default:
		t.Fatalf("an install line this test does not know: %q (teach installer.run, or write it as the others)", line)
	}
}

// readFiles reads what kubectl apply -f reads: a file, or a directory's
// YAML and JSON files (not recursively), in name order.
func (in *installer) readFiles(t *testing.T, rel string) []*unstructured.Unstructured {
	t.Helper()
	full := filepath.Join(e2e.repo, filepath.FromSlash(rel))
	info, err := os.Stat(full)
	require.NoError(t, err)
	files := []string{full}
	if info.IsDir() {
		entries, err := os.ReadDir(full)
		require.NoError(t, err)
		files = nil
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				files = append(files, filepath.Join(full, e.Name()))
			}
		}
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		out = append(out, readObjects(t, f)...)
	}
	return out
}

// readObjects decodes every document of a manifest file.
func readObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, file)
		var o map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &o), file)
		if len(o) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: o})
	}
	return out
}

// kustomization is what the repository's kustomizations use; a field
// beyond it fails the strict decoding, so the test cannot silently build
// something else than kubectl kustomize.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Patches    []struct {
		Target struct {
			Group string `json:"group"`
			Kind  string `json:"kind"`
			Name  string `json:"name"`
		} `json:"target"`
		Patch string `json:"patch"`
	} `json:"patches"`
}

// kustomize builds a kustomization directory as kubectl kustomize does for
// this subset: its resources in order, then its JSON patches on the
// targets they name.
func (in *installer) kustomize(t *testing.T, rel string) []*unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join(e2e.repo, filepath.FromSlash(rel))
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	require.NoError(t, err)
	var k kustomization
	require.NoError(t, yaml.UnmarshalStrict(raw, &k), "%s: a kustomization beyond what the test builds", rel)
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		if info, err := os.Stat(filepath.Join(dir, r)); err == nil && info.IsDir() {
			out = append(out, in.kustomize(t, filepath.ToSlash(filepath.Join(rel, r)))...)
			continue
		}
		out = append(out, readObjects(t, filepath.Join(dir, r))...)
	}
	for _, p := range k.Patches {
		ops, err := yaml.YAMLToJSON([]byte(p.Patch))
		require.NoError(t, err)
		patch, err := jsonpatch.DecodePatch(ops)
		require.NoError(t, err)
		matched := 0
		for i, o := range out {
			gvk := o.GroupVersionKind()
			if gvk.Group != p.Target.Group || gvk.Kind != p.Target.Kind || o.GetName() != p.Target.Name {
				continue
			}
			doc, err := json.Marshal(o.Object)
			require.NoError(t, err)
			doc, err = patch.Apply(doc)
			require.NoError(t, err, "%s: patch %s %s", rel, gvk.Kind, o.GetName())
			out[i] = &unstructured.Unstructured{}
			require.NoError(t, json.Unmarshal(doc, &out[i].Object))
			matched++
		}
		require.Equal(t, 1, matched, "%s: the patch for %s %s", rel, p.Target.Kind, p.Target.Name)
	}
	// kustomize puts Namespaces first (and webhook configurations last).
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int {
		return boolRank(b.GetKind() == "Namespace") - boolRank(a.GetKind() == "Namespace")
	})
	return out
}

// apply creates or updates each object as kubectl apply does, in order,
// one error per object refused (kubectl goes on with the others).
func (in *installer) apply(ctx context.Context, objs []*unstructured.Unstructured) []error {
	var errs []error
	for _, o := range objs {
		if err := in.applyOne(ctx, o); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err))
		}
	}
	return errs
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (in *installer) applyOne(ctx context.Context, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	m, err := in.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		in.mapper.Reset()
		m, err = in.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return err
	}
	var res dynamic.ResourceInterface = in.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		res = in.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	// kubectl apply creates what is missing (a POST of the object), and
	// patches what exists; the patch here is a server-side apply.
	_, err = res.Get(ctx, o.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = res.Create(ctx, o, metav1.CreateOptions{FieldManager: "kubectl", FieldValidation: metav1.FieldValidationStrict})
		return err
	}
	if err != nil {
		return err
	}
	body, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	_, err = res.Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager: "kubectl", Force: ptrBool(true), FieldValidation: metav1.FieldValidationStrict,
	})
	return err
}

func ptrBool(b bool) *bool { return &b }

// installCRDs creates the CustomResourceDefinitions of a module that
// test/manifests pins, from the module cache (go mod download fetches it
// if it is missing), and waits until they are served.
func (in *installer) installCRDs(t *testing.T, module, dir string) {
	t.Helper()
	ctx := t.Context()
	if in.vars["crds "+module] != "" {
		return
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = filepath.Join(e2e.repo, "test", "manifests")
	out, err := cmd.Output()
	require.NoError(t, err, "go mod download %s in test/manifests", module)
	var mod struct{ Dir string }
	require.NoError(t, json.Unmarshal(out, &mod))
	files, err := filepath.Glob(filepath.Join(mod.Dir, filepath.FromSlash(dir), "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "%s: CRDs in %s", module, dir)
	var crds []*unstructured.Unstructured
	for _, f := range files {
		for _, o := range readObjects(t, f) {
			if o.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, o)
			}
		}
	}
	require.Empty(t, in.apply(ctx, crds), "%s CRDs", module)
	crdRes := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, c := range crds {
		name := c.GetName()
		t.Cleanup(func() {
			err := in.dyn.Resource(crdRes).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
			assert.True(t, err == nil || apierrors.IsNotFound(err), "delete CRD %s: %v", name, err)
		})
		err := cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
			got, err := in.dyn.Resource(crdRes).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		require.NoError(t, err, "CRD %s established", name)
	}
	in.mapper.Reset()
	in.vars["crds "+module] = "installed"
}

var certificateRes = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

// issueCertificate plays cert-manager for kubectl wait on a Certificate:
// the Secret it names, signed by the cluster's CA (ca.crt included, as
// cert-manager's CA issuer writes it), and the Ready condition; then waits
// as kubectl does.
func (in *installer) issueCertificate(t *testing.T, ns, name string) {
	t.Helper()
	ctx := t.Context()
	cert, err := in.dyn.Resource(certificateRes).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "the Certificate the line waits for")
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	require.NotEmpty(t, secretName)
	certFile, keyFile, err := e2e.cluster.PKI.IssueServing("install-"+name, nil, dnsNames)
	require.NoError(t, err)
	crt, err := os.ReadFile(certFile)
	require.NoError(t, err)
	key, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	_, err = client(admin).CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": e2e.cluster.PKI.CAPEM},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "the serving Secret")
	require.NoError(t, unstructured.SetNestedSlice(cert.Object, []any{map[string]any{
		"type": "Ready", "status": "True", "reason": "Ready", "message": "issued by the e2e test",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}, "status", "conditions"))
	_, err = in.dyn.Resource(certificateRes).Namespace(ns).UpdateStatus(ctx, cert, metav1.UpdateOptions{})
	require.NoError(t, err, "the Certificate's Ready condition")
	got, err := in.dyn.Resource(certificateRes).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	require.Len(t, conds, 1)
}

// serve plays the kubelet for kubectl rollout status: one replica of serve
// (as the suite runs it), behind the Deployment's Service, which becomes an
// ExternalName on a loopback address whose port 443 forwards to it, as the
// YuniKorn admission scenarios do. StartWebhook returns once /readyz
// answers: the replica is ready.
func (in *installer) serve(t *testing.T, ns, deployment string) {
	t.Helper()
	ctx := t.Context()
	_, err := client(admin).AppsV1().Deployments(ns).Get(ctx, deployment, metav1.GetOptions{})
	require.NoError(t, err, "the Deployment the line waits for")
	svc, err := client(admin).CoreV1().Services(ns).Get(ctx, deployment, metav1.GetOptions{})
	require.NoError(t, err, "the Deployment's Service")
	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-install", Binary: e2e.serveBinary, SettingsFile: e2e.settingsFile,
		DNSNames: []string{svc.Name + "." + ns + ".svc"},
	})
	require.NoError(t, err, "a replica of the Deployment")
	t.Cleanup(func() { assert.NoError(t, wh.Stop(), "stop the installed webhook") })
	var ln net.Listener
	for range 20 {
		ip := net.IPv4(127, byte(1+rand.IntN(254)), byte(rand.IntN(256)), byte(1+rand.IntN(254)))
		if ln, err = net.Listen("tcp", net.JoinHostPort(ip.String(), "443")); err == nil {
			break
		}
	}
	require.NoError(t, err, "listen for the Service")
	fwd := cluster.Forward(ln, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", wh.Addr)
	})
	t.Cleanup(func() { assert.NoError(t, fwd.Close()) })
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, client(admin).CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}))
	_, err = client(admin).CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Labels: svc.Labels},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeExternalName, ExternalName: host,
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromString("https")}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "the Service, pointed at the replica")
}

// registered reports whether the shipped mutating configuration exists.
func (in *installer) registered(t *testing.T) bool {
	t.Helper()
	_, err := client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), "yunikorn-userinfo", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// requireNoRegistration: no shipped configuration exists.
func (in *installer) requireNoRegistration(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	_, err := client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "yunikorn-userinfo", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no mutating configuration: %v", err)
	for _, name := range []string{"yunikorn-userinfo-validate", "yunikorn-userinfo-settings"} {
		_, err = client(admin).AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "no validating configuration %s: %v", name, err)
	}
}

// requireAdmitted creates a Pod as alice: it must be admitted, and once the
// webhook is registered it must be stamped with her record (after the
// moment the configuration takes to reach the admission chain).
func (in *installer) requireAdmitted(t *testing.T, ns, when string, stamped bool) {
	t.Helper()
	ctx := t.Context()
	want := e2e.identity[alice].annotation()
	var last *corev1.Pod
	err := cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		p, err := client(alice).CoreV1().Pods(ns).Create(ctx, installPod(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, fmt.Errorf("a Pod refused %s: %w", when, err)
		}
		last = p
		return !stamped || p.Annotations[annotationKey] == want, nil
	})
	require.NoError(t, err, "%s (last annotations %v)", when, annotationsOf(last))
	// And one stored, not dry-run, as a user would.
	_, err = client(alice).CoreV1().Pods(ns).Create(ctx, installPod(), metav1.CreateOptions{})
	require.NoError(t, err, "a Pod %s", when)
}

// installPod is a Pod with a generated name.
func installPod() *corev1.Pod {
	p := newPod("", nil)
	p.GenerateName = "install-"
	return p
}

func annotationsOf(p *corev1.Pod) map[string]string {
	if p == nil {
		return nil
	}
	return p.Annotations
}

// cleanUp deletes what the lines created: the webhook configurations
// first, then the Kubewarden policies and the namespace, waiting until it
// is gone so the scenarios that follow can use the name.
func (in *installer) cleanUp() {
	ctx := context.Background()
	t := in.t
	in.deleteRegistration()
	capRes := schema.GroupVersionResource{Group: "policies.kubewarden.io", Version: "v1", Resource: "clusteradmissionpolicies"}
	for _, name := range []string{"yunikorn-user-info", "yunikorn-user-info-validate"} {
		err := in.dyn.Resource(capRes).Delete(ctx, name, metav1.DeleteOptions{})
		assert.True(t, err == nil || apierrors.IsNotFound(err) || meta.IsNoMatchError(err), "delete ClusterAdmissionPolicy %s: %v", name, err)
	}
	err := client(admin).CoreV1().Namespaces().Delete(ctx, "yunikorn-userinfo", metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	assert.NoError(t, err, "delete the namespace")
	err = cluster.Poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		_, err := client(admin).CoreV1().Namespaces().Get(ctx, "yunikorn-userinfo", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	assert.NoError(t, err, "the namespace yunikorn-userinfo is gone")
}

// deleteRegistration deletes the shipped webhook configurations, if any.
func (in *installer) deleteRegistration() {
	ctx := context.Background()
	adm := client(admin).AdmissionregistrationV1()
	err := adm.MutatingWebhookConfigurations().Delete(ctx, "yunikorn-userinfo", metav1.DeleteOptions{})
	assert.True(in.t, err == nil || apierrors.IsNotFound(err), "delete the mutating configuration: %v", err)
	for _, name := range []string{"yunikorn-userinfo-validate", "yunikorn-userinfo-settings"} {
		err = adm.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		assert.True(in.t, err == nil || apierrors.IsNotFound(err), "delete the validating configuration %s: %v", name, err)
	}
}
