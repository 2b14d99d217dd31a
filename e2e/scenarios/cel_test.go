package scenarios

// The in-apiserver (CEL) mode against a real kube-apiserver: the policies
// `yunikorn-userinfo cel` prints, installed as printed, judge the fixture
// table and an identity corpus, and every verdict and stored annotation is
// compared with the policy module's own answer (`yunikorn-userinfo run`)
// for the same request as the API server saw it (docs/CEL.md,
// docs/BEHAVIOUR.md §6).
//
// Each scenario runs a control plane of its own (etcd, kube-apiserver and
// the service account controllers): the policies apply to every namespace
// of the cluster they are in, and the static manifests need flags at start.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// celPlane is a control plane of a CEL scenario.
type celPlane struct {
	c         *cluster.Cluster
	admin     *kubernetes.Clientset
	adminREST rest.Interface
	adminCfg  *rest.Config
	dyn       dynamic.Interface
	// kube is the --kube-version the policies are printed for.
	kube string

	mu      sync.Mutex
	clients map[string]*celClient // by identityKey
}

// celClient is a client of one certificate identity, and who the API
// server says it is.
type celClient struct {
	cs  *kubernetes.Clientset
	rc  rest.Interface
	who identity
}

// celVersion is the MutatingAdmissionPolicy version of the suite's
// Kubernetes, and the flags that serve it: GA and on from 1.36; beta and
// off by default on 1.34 and 1.35, so gate and API are turned on there.
func celVersion(t *testing.T) (kube string, args []string) {
	t.Helper()
	switch m := e2e.kubeMinor; {
	case m >= 36:
		return fmt.Sprintf("1.%d", m), nil
	case m >= 34:
		return fmt.Sprintf("1.%d", m), []string{"--feature-gates=MutatingAdmissionPolicy=true",
			"--runtime-config=admissionregistration.k8s.io/v1beta1=true"}
	}
	t.Skipf("Kubernetes 1.%d has no MutatingAdmissionPolicy (beta from 1.34): the in-apiserver mode needs 1.34 or later", e2e.kubeMinor)
	return "", nil
}

var celStartMu sync.Mutex

// startCELPlane starts a control plane with extra kube-apiserver flags,
// stopped when the test ends, in which every authenticated user may write
// the guarded kinds (what the scenarios judge is admission, not RBAC).
func startCELPlane(t *testing.T, args ...string) *celPlane {
	t.Helper()
	kube, gates := celVersion(t)
	ctx := t.Context()
	// One start at a time: a start clears the pid records of dead runs,
	// and a record whose owner is still being written looks dead.
	celStartMu.Lock()
	c, err := cluster.Start(ctx, cluster.Options{
		BinDir:        e2e.binDir,
		PidRoot:       e2e.pidRoot,
		Users:         []cluster.User{{Name: admin, Groups: []string{"system:masters"}}},
		Controllers:   []string{"serviceaccount-controller", "serviceaccount-token-controller"},
		APIServerArgs: append(gates, args...),
		Log:           slog.New(slog.DiscardHandler),
	})
	celStartMu.Unlock()
	require.NoError(t, err, "start the CEL control plane")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("CEL control plane logs:\n%s", c.LogTails(30))
		}
		assert.NoError(t, c.Stop())
		if !t.Failed() {
			_ = os.RemoveAll(c.Dir)
		}
	})
	cfg, err := c.Config(admin)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "cel-writers"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/status", "pods/binding", "pods/ephemeralcontainers", "bindings", "replicationcontrollers"},
				Verbs: []string{"get", "list", "create", "update", "patch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"},
				Verbs: []string{"get", "list", "create", "update", "patch"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cel-writers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cel-writers"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:authenticated"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return &celPlane{c: c, admin: cs, adminREST: jsonREST(t, cfg), adminCfg: cfg, dyn: dyn, kube: kube, clients: map[string]*celClient{}}
}

// identityKey names a certificate identity.
func identityKey(user string, groups []string) string {
	b, _ := json.Marshal(append([]string{user}, groups...))
	return string(b)
}

// certClient returns the client of a certificate with CN=user and
// O=groups, and asks the API server who that is.
func (p *celPlane) certClient(t *testing.T, user string, groups []string) *celClient {
	t.Helper()
	key := identityKey(user, groups)
	p.mu.Lock()
	defer p.mu.Unlock()
	if cc, ok := p.clients[key]; ok {
		return cc
	}
	cfg, err := p.c.CertConfig(user, groups)
	require.NoError(t, err, "issue the certificate of %q", user)
	cc := &celClient{}
	cc.cs, err = kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	cc.rc = jsonREST(t, cfg)
	cc.who, err = whoAmI(t.Context(), cc.cs)
	require.NoError(t, err, "who is %q", user)
	p.clients[key] = cc
	return cc
}

// jsonREST is a REST client of cfg that speaks JSON both ways, for
// requests whose bodies are the fixtures' JSON.
func jsonREST(t *testing.T, cfg *rest.Config) rest.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &schema.GroupVersion{Version: "v1"}
	cfg.APIPath = "/api"
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	rc, err := rest.RESTClientFor(cfg)
	require.NoError(t, err)
	return rc
}

// namespace creates a namespace with labels and its default
// ServiceAccount (Pod creation needs it; no need to wait for the
// controller).
func (p *celPlane) namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ctx := t.Context()
	_, err := p.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = p.admin.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// celOutput runs `yunikorn-userinfo cel` with settings and returns its
// standard output; a refusal is an error with its message.
func celOutput(ctx context.Context, args ...string) ([]byte, error) {
	// The module compiled once for every call (wazero's cache).
	cache := filepath.Join(e2e.cluster.Dir, "cel-wazero-cache")
	cmd := exec.CommandContext(ctx, e2e.serveBinary, append([]string{"cel", "--cache-dir", cache}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("yunikorn-userinfo cel %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// policyResources are the admission policy kinds `cel` prints.
var policyResources = map[string]string{
	"ValidatingAdmissionPolicy":        "validatingadmissionpolicies",
	"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
	"MutatingAdmissionPolicy":          "mutatingadmissionpolicies",
	"MutatingAdmissionPolicyBinding":   "mutatingadmissionpolicybindings",
}

// install creates the objects of a `cel` YAML stream. With selector, each
// binding is narrowed to the namespaces with those labels (a binding's
// matchResources, the API's own way to scope a policy), so policies of
// several settings can share the cluster; the policies stay as printed.
// The Pod policies come last: once they enforce, the rest do too (each
// kind's informer delivers objects in the order they were created).
func (p *celPlane) install(t *testing.T, stream []byte, selector map[string]string) {
	t.Helper()
	var first, last []*unstructured.Unstructured
	for _, doc := range strings.Split(string(stream), "\n---\n") {
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &m))
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if selector != nil && strings.HasSuffix(u.GetKind(), "Binding") {
			sel := map[string]any{}
			for k, v := range selector {
				sel[k] = v
			}
			require.NoError(t, unstructured.SetNestedMap(u.Object, map[string]any{"matchLabels": sel}, "spec", "matchResources", "namespaceSelector"))
		}
		if strings.HasSuffix(u.GetName(), "-pods") {
			last = append(last, u)
		} else {
			first = append(first, u)
		}
	}
	require.NotEmpty(t, last, "the stream has no Pod policies")
	for _, u := range append(first, last...) {
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		require.NoError(t, err)
		res, ok := policyResources[u.GetKind()]
		require.True(t, ok, "unexpected kind %s in the cel output", u.GetKind())
		_, err = p.dyn.Resource(gv.WithResource(res)).Create(t.Context(), u, metav1.CreateOptions{})
		require.NoError(t, err, "create %s %s", u.GetKind(), u.GetName())
	}
}

// waitPolicies waits until the policies enforce in namespace ns: a probe
// Pod, annotated before they were installed, can no longer have its value
// changed (the validating policy) and, with the mutating policy, gets a
// removed value back. Both as dry runs.
func (p *celPlane) waitPolicies(t *testing.T, ns, probe, value string, mutating bool) {
	t.Helper()
	ctx := t.Context()
	var last string
	err := cluster.Poll(ctx, enforceTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		pod, err := p.admin.CoreV1().Pods(ns).Get(ctx, probe, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		changed := pod.DeepCopy()
		changed.Annotations[annotationKey] = `{"user":"someone-else"}`
		_, err = p.admin.CoreV1().Pods(ns).Update(ctx, changed, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), msgChangeNotAllowed) {
			last = fmt.Sprintf("change: %v", err)
			return false, nil
		}
		if !mutating {
			return true, nil
		}
		removed := pod.DeepCopy()
		delete(removed.Annotations, annotationKey)
		got, err := p.admin.CoreV1().Pods(ns).Update(ctx, removed, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil || got.Annotations[annotationKey] != value {
			last = fmt.Sprintf("removal: %v", err)
			return false, nil
		}
		return true, nil
	})
	require.NoError(t, err, "the policies do not enforce in %s: %s", ns, last)
}

// moduleAnswer is the policy module's answer to one request.
type moduleAnswer struct {
	Allowed bool   `json:"allowed"`
	Patch   []byte `json:"patch"`
	Status  *struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	} `json:"status"`
}

// module runs `yunikorn-userinfo run` (the embedded policy module, as
// serve runs it) on an AdmissionRequest with settings.
func module(ctx context.Context, cacheDir string, settings []byte, request any) (moduleAnswer, error) {
	body, err := json.Marshal(request)
	if err != nil {
		return moduleAnswer{}, err
	}
	cmd := exec.CommandContext(ctx, e2e.serveBinary, "run", "--cache-dir", cacheDir, "--settings-json", string(settings), "-r", "-")
	cmd.Stdin = bytes.NewReader(body)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return moduleAnswer{}, fmt.Errorf("yunikorn-userinfo run: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var a moduleAnswer
	if err := json.Unmarshal(stdout.Bytes(), &a); err != nil {
		return moduleAnswer{}, fmt.Errorf("read the answer of yunikorn-userinfo run: %w: %s", err, stdout.String())
	}
	return a, nil
}

// reviewer asks a running `yunikorn-userinfo serve` (the module, as the
// webhook runs it) for its answer to AdmissionRequests.
type reviewer struct {
	wh  *cluster.Webhook
	hc  *http.Client
	url string
}

// startReviewer starts serve with settings next to the plane.
func (p *celPlane) startReviewer(t *testing.T, name string, settings []byte) *reviewer {
	t.Helper()
	file := filepath.Join(t.TempDir(), name+".json")
	require.NoError(t, os.WriteFile(file, settings, 0o600))
	// One compilation of the module for all of them.
	wh, err := p.c.StartWebhook(t.Context(), cluster.WebhookOptions{Name: name, Binary: e2e.serveBinary, SettingsFile: file,
		ExtraArgs: []string{"--cache-dir", filepath.Join(p.c.Dir, "wazero-cache")}})
	require.NoError(t, err, "start serve with settings %s", settings)
	hc, err := p.c.HTTPClient()
	require.NoError(t, err)
	hc.Timeout = 30 * time.Second
	return &reviewer{wh: wh, hc: hc, url: wh.BaseURL + "/mutate"}
}

func (rv *reviewer) review(ctx context.Context, request map[string]any) (moduleAnswer, error) {
	if _, ok := request["uid"]; !ok {
		request["uid"] = "cel-e2e"
	}
	body, err := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
	if err != nil {
		return moduleAnswer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rv.url, bytes.NewReader(body))
	if err != nil {
		return moduleAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rv.hc.Do(req)
	if err != nil {
		return moduleAnswer{}, fmt.Errorf("ask serve: %w", err)
	}
	defer resp.Body.Close()
	var review struct {
		Response *moduleAnswer `json:"response"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || review.Response == nil {
		return moduleAnswer{}, fmt.Errorf("read serve's answer (%s): %v", resp.Status, err)
	}
	return *review.Response, nil
}

// patched applies the module's JSON patch to object.
func (a moduleAnswer) patched(object []byte) ([]byte, error) {
	if len(a.Patch) == 0 {
		return object, nil
	}
	p, err := jsonpatch.DecodePatch(a.Patch)
	if err != nil {
		return nil, fmt.Errorf("decode the module's patch: %w", err)
	}
	return p.Apply(object)
}

func (a moduleAnswer) message() string {
	if a.Status == nil {
		return ""
	}
	return a.Status.Message
}

// annotationAt reads the user.info annotation at path (the metadata that
// carries it) of a JSON object.
func annotationAt(object []byte, path []string) (string, bool) {
	var m map[string]any
	if json.Unmarshal(object, &m) != nil {
		return "", false
	}
	v, ok, _ := unstructured.NestedString(m, append(append([]string(nil), path...), "annotations", annotationKey)...)
	return v, ok
}

// celMetaPath is where a kind keeps the annotation.
func celMetaPath(kind string) []string {
	switch kind {
	case "Pod", "Binding":
		return []string{"metadata"}
	case "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template", "metadata"}
	}
	return []string{"spec", "template", "metadata"}
}

// byPolicy reports whether a refusal came from an admission policy (not
// from the API server's own validation).
func byPolicy(err error) bool {
	s := err.Error()
	return strings.Contains(s, "ValidatingAdmissionPolicy") || strings.Contains(s, "MutatingAdmissionPolicy")
}

// --- the fixture table ---

// fixtureRow is one materialised fixture (internal/fixtures/cmd/fixturedump).
type fixtureRow struct {
	Name     string          `json:"name"`
	Kind     string          `json:"kind"`
	Request  json.RawMessage `json:"request"`
	Settings json.RawMessage `json:"settings"`
}

// loadFixtureRows materialises the fixture table with the root module's
// own loader.
func loadFixtureRows(t *testing.T) []fixtureRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./internal/fixtures/cmd/fixturedump")
	cmd.Dir = e2e.repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "materialise the fixtures: %s", stderr.String())
	var rows []fixtureRow
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rows))
	require.NotEmpty(t, rows)
	return rows
}

// celGuarded are the kinds the printed policies guard, by resource.
var celGuarded = map[schema.GroupVersionKind]schema.GroupVersionResource{
	{Version: "v1", Kind: "Pod"}:                        {Version: "v1", Resource: "pods"},
	{Version: "v1", Kind: "ReplicationController"}:      {Version: "v1", Resource: "replicationcontrollers"},
	{Group: "apps", Version: "v1", Kind: "Deployment"}:  {Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "apps", Version: "v1", Kind: "ReplicaSet"}:  {Group: "apps", Version: "v1", Resource: "replicasets"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"}: {Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"}:   {Group: "apps", Version: "v1", Resource: "daemonsets"},
	{Group: "batch", Version: "v1", Kind: "Job"}:        {Group: "batch", Version: "v1", Resource: "jobs"},
	{Group: "batch", Version: "v1", Kind: "CronJob"}:    {Group: "batch", Version: "v1", Resource: "cronjobs"},
	{Version: "v1", Kind: "Binding"}:                    {Version: "v1", Resource: "bindings"},
}

// replay is one fixture as the API server receives it.
type replay struct {
	row       fixtureRow
	gvk       schema.GroupVersionKind
	gvr       schema.GroupVersionResource
	sub       string // status, ephemeralcontainers, binding
	op        string
	user      string
	groups    []string
	object    map[string]any
	oldObject map[string]any
	raw       map[string]any // the whole AdmissionRequest
	name      string
	ns        string
	// oldStored is the old object (UPDATE) or the bound Pod (binding) as
	// stored before the policies were installed.
	oldStored []byte
}

// typedRoundTrip decodes an object into its Go type and back, as the API
// server holds it: unknown fields dropped, types enforced.
func typedRoundTrip(gvk schema.GroupVersionKind, raw json.RawMessage) (map[string]any, bool) {
	obj, err := scheme.Scheme.New(gvk)
	if err != nil || json.Unmarshal(raw, obj) != nil {
		return nil, false
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil, false
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return m, true
}

// asReplay reads a fixture; false for a request the API server never
// sends these policies (another kind or operation, no user, malformed).
func asReplay(row fixtureRow) (*replay, bool) {
	var ar struct {
		Kind        metav1.GroupVersionKind     `json:"kind"`
		Resource    metav1.GroupVersionResource `json:"resource"`
		SubResource string                      `json:"subResource"`
		Operation   string                      `json:"operation"`
		UserInfo    struct {
			Username string   `json:"username"`
			Groups   []string `json:"groups"`
		} `json:"userInfo"`
		Object    json.RawMessage `json:"object"`
		OldObject json.RawMessage `json:"oldObject"`
	}
	var raw map[string]any
	if json.Unmarshal(row.Request, &ar) != nil || json.Unmarshal(row.Request, &raw) != nil || ar.UserInfo.Username == "" {
		return nil, false
	}
	gvk := schema.GroupVersionKind{Group: ar.Kind.Group, Version: ar.Kind.Version, Kind: ar.Kind.Kind}
	gvr, ok := celGuarded[gvk]
	if !ok || (ar.Operation != "CREATE" && ar.Operation != "UPDATE") {
		return nil, false
	}
	r := &replay{row: row, gvk: gvk, gvr: gvr, sub: ar.SubResource, op: ar.Operation, user: ar.UserInfo.Username, raw: raw}
	switch {
	case gvk.Kind == "Binding" && ar.Resource.Resource == "pods":
		r.gvr.Resource, r.sub = "pods", "binding"
	case gvk.Kind == "Binding" && ar.Operation != "CREATE":
		return nil, false
	case r.sub != "" && (gvk.Kind != "Pod" || ar.Operation != "UPDATE" || (r.sub != "status" && r.sub != "ephemeralcontainers")):
		return nil, false
	}
	for _, g := range ar.UserInfo.Groups {
		// The API server adds it to every authenticated user itself.
		if g != "system:authenticated" {
			r.groups = append(r.groups, g)
		}
	}
	if r.object, ok = typedRoundTrip(gvk, ar.Object); !ok {
		return nil, false
	}
	if r.op == "UPDATE" {
		if len(ar.OldObject) == 0 || string(ar.OldObject) == "null" {
			return nil, false
		}
		if r.oldObject, ok = typedRoundTrip(gvk, ar.OldObject); !ok {
			return nil, false
		}
	}
	return r, true
}

// collection is the REST path of the replay's resource in namespace ns.
func (r *replay) collection(ns string) string {
	prefix := "/api/v1"
	if r.gvr.Group != "" {
		prefix = "/apis/" + r.gvr.Group + "/" + r.gvr.Version
	}
	return prefix + "/namespaces/" + ns + "/" + r.gvr.Resource
}

// rename puts an object at name in ns, dropping what only the stored
// object may carry.
func rename(obj map[string]any, name, ns string) map[string]any {
	out := map[string]any{}
	b, _ := json.Marshal(obj)
	_ = json.Unmarshal(b, &out)
	meta, _ := out["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		out["metadata"] = meta
	}
	meta["name"], meta["namespace"] = name, ns
	for _, k := range []string{"resourceVersion", "uid", "creationTimestamp", "generateName", "managedFields", "ownerReferences", "deletionTimestamp", "generation"} {
		delete(meta, k)
	}
	delete(out, "status")
	return out
}

// templatePaths are the pod templates of a kind.
func templatePaths(kind string) [][]string {
	switch kind {
	case "Pod", "Binding":
		return nil
	case "CronJob":
		return [][]string{{"spec", "jobTemplate", "spec", "template"}}
	}
	return [][]string{{"spec", "template"}}
}

// storable makes an object one the API server stores, in ways the
// policies and the module never look at: labels and annotation keys the
// API server refuses are dropped (the fixtures' requests are shaped like
// the API server's, not always valid), and a workload's selector is one
// that matches its template. Both sides then judge the same object.
func storable(obj map[string]any, kind, name string) {
	clean := func(meta map[string]any) {
		if meta == nil {
			return
		}
		for _, field := range []string{"labels", "annotations"} {
			m, _ := meta[field].(map[string]any)
			for k, v := range m {
				sv, _ := v.(string)
				if len(validation.IsQualifiedName(k)) > 0 || (field == "labels" && len(validation.IsValidLabelValue(sv)) > 0) {
					delete(m, k)
				}
			}
		}
	}
	meta, _ := obj["metadata"].(map[string]any)
	clean(meta)
	for _, tp := range templatePaths(kind) {
		tmpl, ok, _ := unstructured.NestedMap(obj, tp...)
		if !ok {
			continue
		}
		tmeta, _ := tmpl["metadata"].(map[string]any)
		if tmeta == nil {
			tmeta = map[string]any{}
		}
		clean(tmeta)
		labels, _ := tmeta["labels"].(map[string]any)
		if labels == nil {
			labels = map[string]any{}
		}
		labels["cel.e2e/name"] = name
		tmeta["labels"] = labels
		tmpl["metadata"] = tmeta
		_ = unstructured.SetNestedMap(obj, tmpl, tp...)
	}
	spec, _ := obj["spec"].(map[string]any)
	switch kind {
	case "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet":
		spec["selector"] = map[string]any{"matchLabels": map[string]any{"cel.e2e/name": name}}
	case "ReplicationController":
		spec["selector"] = map[string]any{"cel.e2e/name": name}
	case "Job":
		delete(spec, "selector")
		delete(spec, "manualSelector")
		if tmpl, ok, _ := unstructured.NestedMap(spec, "template", "metadata", "labels"); ok {
			for k := range tmpl {
				if strings.Contains(k, "controller-uid") || k == "job-name" || k == "batch.kubernetes.io/job-name" {
					unstructured.RemoveNestedField(spec, "template", "metadata", "labels", k)
				}
			}
		}
	}
}

// prepare stores, with no policy installed yet, what the replay needs to
// exist: the old object of an UPDATE, the Pod of a Binding.
func (p *celPlane) prepare(ctx context.Context, r *replay) error {
	switch {
	case r.gvk.Kind == "Binding":
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: r.name}, Spec: podSpec(corev1.RestartPolicyNever)}
		body, _ := json.Marshal(pod)
		stored, err := rawBody(p.adminREST.Post().AbsPath("/api/v1/namespaces/" + r.ns + "/pods").Body(body).Do(ctx))
		if err != nil {
			return err
		}
		r.oldStored = stored
		r.object = rename(r.object, r.name, r.ns)
		return nil
	case r.op == "UPDATE":
		old := rename(r.oldObject, r.name, r.ns)
		storable(old, r.gvk.Kind, r.name)
		body, _ := json.Marshal(old)
		stored, err := rawBody(p.adminREST.Post().AbsPath(r.collection(r.ns)).Param("fieldValidation", "Ignore").Body(body).Do(ctx))
		if err != nil {
			return err
		}
		r.oldStored = stored
		obj := rename(r.object, r.name, r.ns)
		var st map[string]any
		_ = json.Unmarshal(stored, &st)
		rv, _, _ := unstructured.NestedString(st, "metadata", "resourceVersion")
		_ = unstructured.SetNestedField(obj, rv, "metadata", "resourceVersion")
		if status, ok := r.object["status"]; ok && r.sub == "status" {
			obj["status"] = status
		}
		storable(obj, r.gvk.Kind, r.name)
		if r.gvk.Kind == "Job" {
			// The selector the API server generated, and the labels it
			// added to the template: immutable, so the update keeps them.
			sel, _, _ := unstructured.NestedFieldCopy(st, "spec", "selector")
			_ = unstructured.SetNestedField(obj, sel, "spec", "selector")
			labels, _, _ := unstructured.NestedMap(st, "spec", "template", "metadata", "labels")
			_ = unstructured.SetNestedMap(obj, labels, "spec", "template", "metadata", "labels")
		}
		r.object = obj
		return nil
	}
	r.object = rename(r.object, r.name, r.ns)
	storable(r.object, r.gvk.Kind, r.name)
	return nil
}

// rawBody is the body of a response, or its error with the Status the
// API server answered.
func rawBody(res rest.Result) ([]byte, error) {
	body, err := res.Raw()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, body)
	}
	return body, nil
}

// send makes the replay's request as cc; it returns the stored object.
func (r *replay) send(ctx context.Context, cc *celClient) ([]byte, error) {
	body, _ := json.Marshal(r.object)
	var req *rest.Request
	switch {
	case r.sub == "binding":
		req = cc.rc.Post().AbsPath(r.collection(r.ns), r.name, "binding")
	case r.gvk.Kind == "Binding":
		req = cc.rc.Post().AbsPath(r.collection(r.ns))
	case r.op == "CREATE":
		req = cc.rc.Post().AbsPath(r.collection(r.ns))
	case r.sub != "":
		req = cc.rc.Put().AbsPath(r.collection(r.ns), r.name, r.sub)
	default:
		req = cc.rc.Put().AbsPath(r.collection(r.ns), r.name)
	}
	if _, err := rawBody(req.Param("fieldValidation", "Ignore").Body(body).Do(ctx)); err != nil {
		return nil, err
	}
	path := r.collection(r.ns)
	if r.gvk.Kind == "Binding" {
		path = "/api/v1/namespaces/" + r.ns + "/pods"
	}
	return cc.rc.Get().AbsPath(path, r.name).Do(ctx).Raw()
}

// moduleRequest is the AdmissionRequest the module judges: the fixture's,
// with the identity, names and old object the API server had.
func (r *replay) moduleRequest(who identity) map[string]any {
	req := map[string]any{}
	for k, v := range r.raw {
		req[k] = v
	}
	ui := map[string]any{"username": who.User}
	if len(who.Groups) > 0 {
		ui["groups"] = who.Groups
	}
	req["userInfo"] = ui
	req["namespace"], req["name"] = r.ns, r.name
	req["object"] = r.object
	if r.oldStored != nil && r.op == "UPDATE" {
		var old map[string]any
		_ = json.Unmarshal(r.oldStored, &old)
		req["oldObject"] = old
	}
	req["dryRun"] = false
	return req
}

// TestCELFixtures replays every fixture whose settings the in-apiserver
// mode expresses through a real kube-apiserver with the policies `cel`
// prints for those settings, each as the fixture's submitter (a client
// certificate with its name and groups), and compares verdict and stored
// annotation with the module's answer to the same request. The one
// difference allowed is documented (docs/CEL.md): an allowed submitter's
// value that is valid but not in encoding/json's form is refused.
func TestCELFixtures(t *testing.T) {
	start(t)
	p := startCELPlane(t)
	ctx := t.Context()
	rows := loadFixtureRows(t)

	// Group by settings, in table order; keep the settings cel prints.
	type set struct {
		settings []byte
		stream   []byte
		replays  []*replay
	}
	var sets []*set
	bySettings := map[string]*set{}
	needWebhook, refusedSettings, notSent := 0, 0, 0
	listed := time.Now()
	for _, row := range rows {
		s, seen := bySettings[string(row.Settings)]
		if !seen {
			out, err := celOutput(ctx, "--settings-json", string(row.Settings), "--kube-version", p.kube, "--name", fmt.Sprintf("fx%d", len(sets)))
			s = &set{settings: row.Settings, stream: out}
			switch {
			case err != nil && strings.Contains(err.Error(), "need the webhook"):
				s = nil
				needWebhook++
			case err != nil:
				// Settings the module's validate_settings refuses.
				s = nil
				refusedSettings++
			default:
				sets = append(sets, s)
			}
			bySettings[string(row.Settings)] = s
		}
		if s == nil {
			continue
		}
		r, ok := asReplay(row)
		if !ok {
			notSent++
			continue
		}
		s.replays = append(s.replays, r)
	}

	var mu sync.Mutex
	compared, documented, serverRefused := 0, 0, 0
	count := func(n *int) {
		mu.Lock()
		*n++
		mu.Unlock()
	}
	// The sets side by side, each in its namespace with its bindings.
	t.Logf("settings judged and printed by cel in %.1fs", time.Since(listed).Seconds())
	began := time.Now()
	t.Run("replay", func(t *testing.T) {
		for i, s := range sets {
			if len(s.replays) == 0 {
				continue
			}
			ns := fmt.Sprintf("fx%d", i)
			// One set at a time, its replays in parallel, its serve
			// stopped when they are done.
			t.Run(ns, func(t *testing.T) {
				label := map[string]string{"cel.e2e/set": fmt.Sprint(i)}
				p.namespace(t, ns, label)
				_, err := p.admin.CoreV1().Pods(ns).Create(ctx, newPod("probe", map[string]string{annotationKey: `{"user":"probe"}`}), metav1.CreateOptions{})
				require.NoError(t, err)
				var ready []*replay
				for j, r := range s.replays {
					r.name, r.ns = fmt.Sprintf("r%d", j), ns
					if err := p.prepare(ctx, r); err != nil {
						// An old object the API server will not store: the
						// update never happens.
						t.Logf("%s: not replayed: its old object cannot be stored: %.300v", r.row.Name, err)
						notSent++
						continue
					}
					ready = append(ready, r)
				}
				p.install(t, s.stream, label)
				p.waitPolicies(t, ns, "probe", `{"user":"probe"}`, strings.Contains(string(s.stream), "kind: MutatingAdmissionPolicy\n"))
				rv := p.startReviewer(t, ns, s.settings)
				t.Cleanup(func() { assert.NoError(t, rv.wh.Stop()) })

				for _, r := range ready {
					t.Run(r.row.Name, func(t *testing.T) {
						t.Parallel()
						cc := p.certClient(t, r.user, r.groups)
						want, err := rv.review(ctx, r.moduleRequest(cc.who))
						require.NoError(t, err)
						stored, err := r.send(ctx, cc)
						if err != nil && !byPolicy(err) {
							// Refused by the API server itself (a field it
							// does not accept) where no policy had a say: not
							// a verdict of the policies.
							t.Logf("refused by the API server, not by a policy: %.300v (module: allowed %v %q)", err, want.Allowed, want.message())
							count(&serverRefused)
							return
						}
						count(&compared)
						if want.Allowed && err != nil {
							// The documented difference, and only it.
							require.Contains(t, err.Error(), "accepts a supplied value only in the form encoding/json writes",
								"CEL refused what the module admits (module: %q)", want.message())
							value, _ := annotationAt(celJSON(t, r.object), celMetaPath(r.gvk.Kind))
							var id struct {
								User   string   `json:"user"`
								Groups []string `json:"groups,omitempty"`
							}
							require.NoError(t, json.Unmarshal([]byte(value), &id), "the refused value is JSON")
							again, _ := json.Marshal(id)
							require.NotEqual(t, value, string(again), "CEL refused a value in encoding/json's form")
							count(&documented)
							return
						}
						path := celMetaPath(r.gvk.Kind)
						if !want.Allowed && err == nil && r.sub == "ephemeralcontainers" {
							// The second documented difference: the module,
							// asked before the API server's strategy, refuses
							// the change; the strategy discards every metadata
							// change of this subresource before the validating
							// policy sees it, so CEL admits, and nothing changes.
							wv, wok := annotationAt(r.oldStored, path)
							gv, gok := annotationAt(stored, path)
							require.Equal(t, wok, gok)
							require.Equal(t, wv, gv, "the stored value is the old one")
							count(&documented)
							return
						}
						require.Equal(t, want.Allowed, err == nil, "module: allowed %v %q; API server: %v", want.Allowed, want.message(), err)
						if err != nil {
							return
						}
						modObj, perr := want.patched(celJSON(t, r.object))
						require.NoError(t, perr)
						if r.gvk.Kind == "Binding" {
							// A Binding is judged, not changed: the Pod keeps
							// the value it had.
							modObj = r.oldStored
						}
						wv, wok := annotationAt(modObj, path)
						gv, gok := annotationAt(stored, path)
						assert.Equal(t, wok, gok, "annotation present: module %v, API server %v", wok, gok)
						sameBytes(t, wv, gv, "stored annotation")
					})
				}
			})
		}
	})
	t.Logf("%d settings installed and their fixtures replayed in %.1fs", len(sets), time.Since(began).Seconds())
	t.Logf("%d settings the in-apiserver mode expresses (%d need the webhook, %d the module refuses); %d fixtures compared through kube-apiserver %s, %d of them a documented difference; %d refused by the API server's own validation; %d requests the API server never sends",
		len(sets), needWebhook, refusedSettings, compared, e2e.kubeVersion, documented, serverRefused, notSent)
	require.Greater(t, compared, 400, "too few fixtures compared: the filter is wrong")
	require.Less(t, serverRefused, 20, "too many fixtures the API server refuses itself: the replay no longer sends what the fixtures mean")
}

// sameBytes asserts got is want byte for byte, and names the first byte
// that differs (identities run to tens of kilobytes).
func sameBytes(t *testing.T, want, got, what string) {
	t.Helper()
	if want == got {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(0, i-40)
	t.Errorf("%s: %d bytes from the module, %d stored; first difference at byte %d: module %q, stored %q",
		what, len(want), len(got), i, want[lo:min(len(want), i+40)], got[lo:min(len(got), i+40)])
}

func celJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// --- the identity corpus ---

// celIdentities are names a client certificate carries that no
// impersonation header or token file can: every character encoding/json
// escapes, and sizes up to the bounds of the CEL encoding.
func celIdentities() []identity {
	long := strings.Repeat("é<&>\"\\\u2028x", 1500) // 12,000 characters
	manyGroups := make([]string, 200)
	for i := range manyGroups {
		manyGroups[i] = fmt.Sprintf("team-%03d-\u00e9\"", i)
	}
	return []identity{
		{User: `quote"d`, Groups: []string{`a"b`, `"`}},
		{User: `back\slash`, Groups: []string{`\`, `\\n`}},
		{User: "ctl\x01\x02\x1f\x7f", Groups: []string{"tab\there", "nl\nhere", "cr\rbs\bff\f"}},
		{User: "html<b>&amp;</b>", Groups: []string{"<", ">", "&"}},
		{User: "sep\u2028line\u2029para", Groups: []string{"\u2028", "\u2029"}},
		{User: "日本語ユーザー", Groups: []string{"équipe", "ü", "🚀 rocket", "\ufffd real replacement", "combining e\u0301"}},
		{User: "plain", Groups: []string{"", "empty-before"}},
		{User: "comma,in,name", Groups: []string{"a,b", "c d"}},
		{User: long, Groups: []string{"g"}},
		{User: "many", Groups: manyGroups},
	}
}

// TestCELIdentities creates a Pod as each identity of the corpus, through
// a client certificate, and compares the stored annotation with the
// module's value for the identity the API server reports; then the same
// submitter supplies its own value (admitted), and a forged one (refused).
// Identities past the CEL encoding's bounds, and invalid UTF-8 that only
// impersonation can send, are refused by the validating policy with its
// own message, never recorded differently.
func TestCELIdentities(t *testing.T) {
	start(t)
	p := startCELPlane(t)
	ctx := t.Context()
	out, err := celOutput(ctx, "--kube-version", p.kube)
	require.NoError(t, err)
	ns := "identities"
	p.namespace(t, ns, nil)
	_, err = p.admin.CoreV1().Pods(ns).Create(ctx, newPod("probe", map[string]string{annotationKey: `{"user":"probe"}`}), metav1.CreateOptions{})
	require.NoError(t, err)
	p.install(t, out, nil)
	p.waitPolicies(t, ns, "probe", `{"user":"probe"}`, true)
	cacheDir := t.TempDir()

	for i, id := range celIdentities() {
		t.Run(fmt.Sprintf("identity-%d", i), func(t *testing.T) {
			cc := p.certClient(t, id.User, id.Groups)
			require.Equal(t, id.User, cc.who.User, "the certificate carries the name unchanged")
			name := fmt.Sprintf("id%d", i)
			pod := newPod(name, nil)
			pod.Namespace = ns
			want, err := module(ctx, cacheDir, []byte("{}"), map[string]any{
				"uid": "x", "kind": map[string]any{"group": "", "version": "v1", "kind": "Pod"},
				"resource": map[string]any{"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
				"namespace": ns, "name": name, "userInfo": map[string]any{"username": cc.who.User, "groups": cc.who.Groups},
				"object": pod,
			})
			require.NoError(t, err)
			require.True(t, want.Allowed, want.message())
			modObj, err := want.patched(celJSON(t, pod))
			require.NoError(t, err)
			wantValue, ok := annotationAt(modObj, []string{"metadata"})
			require.True(t, ok, "the module records the submitter")
			require.Equal(t, cc.who.annotation(), wantValue, "the module writes encoding/json's text")

			got, err := cc.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			require.NoError(t, err)
			stored, err := p.admin.CoreV1().Pods(ns).Get(ctx, got.Name, metav1.GetOptions{})
			require.NoError(t, err)
			sameBytes(t, wantValue, stored.Annotations[annotationKey], "stored annotation")
			t.Logf("stored %d bytes: %.120q", len(wantValue), stored.Annotations[annotationKey])

			// Supplying its own value exactly: admitted, as the module does.
			own := newPod(name+"-own", map[string]string{annotationKey: wantValue})
			_, err = cc.cs.CoreV1().Pods(ns).Create(ctx, own, metav1.CreateOptions{})
			assert.NoError(t, err, "the submitter's own value")
			// Someone else's: refused.
			forged := newPod(name+"-forged", map[string]string{annotationKey: `{"user":"alice"}`})
			_, err = cc.cs.CoreV1().Pods(ns).Create(ctx, forged, metav1.CreateOptions{})
			require.Error(t, err, "a forged value")
			assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%v", err)
			assert.True(t, byPolicy(err), "refused by the policy: %v", err)
		})
	}

	t.Run("past-the-bounds", func(t *testing.T) {
		// Over 24,576 characters in all, or over 1,024 recorded groups: the
		// module would record them; CEL cannot within its cost limits.
		tooMany := make([]string, 1025)
		for i := range tooMany {
			tooMany[i] = fmt.Sprint("g", i)
		}
		for i, id := range []identity{{User: strings.Repeat("n", 24577)}, {User: "crowd", Groups: tooMany}} {
			cc := p.certClient(t, id.User, id.Groups)
			_, err := cc.cs.CoreV1().Pods(ns).Create(ctx, newPod(fmt.Sprint("big", i), nil), metav1.CreateOptions{})
			require.Error(t, err, "identity %d is past the bounds", i)
			t.Logf("identity %d refused: %.300s", i, err)
			assert.Contains(t, err.Error(), "cannot be recorded exactly by the in-apiserver (CEL) policy")
			assert.Contains(t, err.Error(), "within the API server's CEL cost limits")
		}
	})

	t.Run("invalid-UTF-8-by-impersonation", func(t *testing.T) {
		// A certificate cannot carry it (a UTF8String must be UTF-8), an
		// impersonation header can. encoding/json would write U+FFFD.
		for i, id := range []identity{{User: "bad\xffname"}, {User: "good", Groups: []string{"grp\xfe\xfd"}}} {
			require.False(t, utf8.ValidString(id.User) && !strings.ContainsFunc(strings.Join(id.Groups, ""), func(r rune) bool { return r == utf8.RuneError }))
			cfg := rest.CopyConfig(p.adminCfg)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: id.User, Groups: id.Groups}
			cs, err := kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			who, err := whoAmI(ctx, cs)
			require.NoError(t, err)
			require.Equal(t, id.User, who.User, "the API server keeps the bytes")
			_, err = cs.CoreV1().Pods(ns).Create(ctx, newPod(fmt.Sprint("utf", i), nil), metav1.CreateOptions{})
			require.Error(t, err, "identity %d is not UTF-8", i)
			t.Logf("identity %d refused: %v", i, err)
			assert.Contains(t, err.Error(), "is not valid UTF-8")
			_, err = p.admin.CoreV1().Pods(ns).Get(ctx, fmt.Sprint("utf", i), metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "nothing stored: %v", err)
		}
	})
}

// --- static manifests ---

// TestCELStaticManifests starts an API server that loads the policies of
// `cel --static` from disk (staticManifestsDir of the
// ValidatingAdmissionPolicy and MutatingAdmissionPolicy admission plugins,
// beta and on by default in 1.37): they enforce, and an admin can neither
// delete nor replace them through the API.
func TestCELStaticManifests(t *testing.T) {
	if e2e.kubeMinor < 37 {
		t.Skipf("static admission manifests are beta (on by default) from Kubernetes 1.37, alpha in 1.36; this is 1.%d", e2e.kubeMinor)
	}
	start(t)
	ctx := t.Context()
	dir := t.TempDir()
	_, err := celOutput(ctx, "--kube-version", fmt.Sprintf("1.%d", e2e.kubeMinor), "--static", dir)
	require.NoError(t, err)
	p := startCELPlane(t, "--admission-control-config-file", filepath.Join(dir, "admission-configuration.yaml"))
	ns := "static"
	p.namespace(t, ns, nil)
	alice := p.certClient(t, "alice", []string{"dev"})

	enforced := func(t *testing.T, name string) {
		t.Helper()
		got, err := alice.cs.CoreV1().Pods(ns).Create(ctx, newPod(name, nil), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, alice.who.annotation(), got.Annotations[annotationKey], "recorded by the static mutating policy")
		_, err = alice.cs.CoreV1().Pods(ns).Create(ctx, newPod(name+"-forged", map[string]string{annotationKey: `{"user":"bob"}`}), metav1.CreateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy 'yunikorn-userinfo-pods.static.k8s.io'")
		changed := got.DeepCopy()
		changed.Annotations[annotationKey] = `{"user":"bob"}`
		_, err = p.admin.CoreV1().Pods(ns).Update(ctx, changed, metav1.UpdateOptions{})
		require.Error(t, err, "even an admin cannot change the recorded value")
		assert.Contains(t, err.Error(), msgChangeNotAllowed)
	}
	// No polling: static policies are in force when the API server is ready.
	enforced(t, "before")

	vaps := p.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	maps := p.admin.AdmissionregistrationV1().MutatingAdmissionPolicies()
	// Not API objects: nothing to list, delete or edit.
	list, err := vaps.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, v := range list.Items {
		assert.NotContains(t, v.Name, ".static.k8s.io", "listed through the API")
	}
	err = vaps.Delete(ctx, "yunikorn-userinfo-pods.static.k8s.io", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsNotFound(err), "delete the static validating policy: %v", err)
	err = maps.Delete(ctx, "yunikorn-userinfo-pods.static.k8s.io", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsNotFound(err), "delete the static mutating policy: %v", err)
	require.NoError(t, vaps.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	require.NoError(t, p.admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	require.NoError(t, maps.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	require.NoError(t, p.admin.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	// Nor shadow one: the suffix is reserved.
	_, err = p.admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionBindingShadow, metav1.CreateOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "reserved for static manifest-based configurations")
	// A JSON merge patch on the name answers NotFound too.
	_, err = vaps.Patch(ctx, "yunikorn-userinfo-pods.static.k8s.io", types.MergePatchType, []byte(`{"spec":{"failurePolicy":"Ignore"}}`), metav1.PatchOptions{})
	assert.True(t, apierrors.IsNotFound(err), "patch the static validating policy: %v", err)

	enforced(t, "after")
}

// admissionBindingShadow tries to take a static binding's name.
var admissionBindingShadow = admissionregistrationv1.ValidatingAdmissionPolicyBinding{
	ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-userinfo-pods.static.k8s.io"},
	Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName:        "yunikorn-userinfo-pods.static.k8s.io",
		ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit},
	},
}
