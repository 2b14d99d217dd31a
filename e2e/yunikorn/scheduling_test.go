package yunikorn

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	informerscorev1 "k8s.io/client-go/informers/core/v1"
	informersschedulingv1 "k8s.io/client-go/informers/scheduling/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/apache/yunikorn-k8shim/pkg/admission"
	"github.com/apache/yunikorn-k8shim/pkg/admission/conf"
)

// Annotations and labels the comparison reads.
const (
	userInfoKey     = "yunikorn.apache.org/user.info"
	enableYuniKorn  = "yunikorn.apache.org/namespace.enableYuniKorn"
	generateAppID   = "yunikorn.apache.org/namespace.generateAppId"
	allowPreemption = "yunikorn.apache.org/allow-preemption"
)

// TestSchedulingMatchesK8shim checks the policy's scheduling jobs against
// YuniKorn's admission controller itself: k8shim v1.9.0's
// admission.InitAdmissionController, with its namespace and PriorityClass
// caches fed by informers over a fake clientset, serves the same Pod
// CREATEs as `yunikorn-userinfo serve` with the settings `migrate` makes
// from the same admissionController.filtering keys (answering its reads
// from the same Namespaces and PriorityClasses). For a generated matrix of
// Pods, namespaces and configurations, both patches are applied to the
// same Pod, and the labels, the annotations and spec.schedulerName must
// come out the same. user.info is compared where the admission controller
// keeps it: it drops it in namespaces it does not process, for the
// scheduler's own Pods, and (its ignore-application patch replaces the
// whole annotations map) in processed namespaces it does not label, where
// this policy records the submitter all the same (docs/BEHAVIOUR.md §3.9).
func TestSchedulingMatchesK8shim(t *testing.T) {
	binary := serveBinary(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SCHEDULING_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SCHEDULING_SEED: %v", err)
		}
	}
	t.Logf("seed %d (SCHEDULING_SEED=%d repeats this run)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	long := strings.Repeat("n", 59) + "-end" // 63 characters, a namespace's limit
	namespaces := []*v1.Namespace{
		ns("default", nil), ns("kube-system", nil), ns("team-a", nil), ns("team-b", nil), ns("e2e", nil), ns(long, nil),
		ns("ns-on", map[string]string{enableYuniKorn: "true"}),
		ns("ns-off", map[string]string{enableYuniKorn: "false"}),
		ns("ns-odd", map[string]string{enableYuniKorn: "yes"}),
		ns("gen-on", map[string]string{generateAppID: "true"}),
		ns("gen-off", map[string]string{generateAppID: "false"}),
		ns("gen-odd", map[string]string{generateAppID: "TRUE"}),
		ns("both-on", map[string]string{enableYuniKorn: "true", generateAppID: "true"}),
		ns("mixed", map[string]string{enableYuniKorn: "true", generateAppID: "false"}),
	}
	requestNamespaces := []string{"ghost"} // in no cache and no cluster
	for _, n := range namespaces {
		requestNamespaces = append(requestNamespaces, n.Name)
	}
	classes := []*schedulingv1.PriorityClass{
		pc("no-preempt", map[string]string{allowPreemption: "false"}),
		pc("preempt", map[string]string{allowPreemption: "true"}),
		pc("plain", nil),
		pc("odd", map[string]string{allowPreemption: "no"}),
	}
	ac := admissionController(t, namespaces, classes)
	contextDir := writeCluster(t, namespaces, classes)

	configs := []map[string]string{
		{},
		{conf.AMFilteringProcessNamespaces: "^team-,^e2e$,^ns-", conf.AMFilteringBypassNamespaces: "^team-b$"},
		{conf.AMFilteringLabelNamespaces: "^team-", conf.AMFilteringNoLabelNamespaces: "team-b, ^gen-", conf.AMFilteringGenerateUniqueAppIds: "true"},
		{conf.AMFilteringBypassNamespaces: "", conf.AMFilteringProcessNamespaces: "", conf.AMFilteringNoLabelNamespaces: "^default$,^kube-system$",
			conf.AMFilteringGenerateUniqueAppIds: "false"},
		{conf.AMFilteringProcessNamespaces: "^nomatch$", conf.AMFilteringLabelNamespaces: "^nomatch$"},
		{conf.AMFilteringBypassNamespaces: "ns-,", conf.AMFilteringGenerateUniqueAppIds: "1"},
	}
	const podsPerNamespace = 24
	compared, withUserInfo := 0, 0
	for i, data := range configs {
		t.Run("config "+strconv.Itoa(i), func(t *testing.T) {
			cms := []*v1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-configs"}, Data: data}}
			ac.conf = conf.NewAdmissionControllerConf([]*v1.ConfigMap{nil, cms[0]})
			controller := admission.InitAdmissionController(ac.conf, ac.pcCache, ac.nsCache)
			settings := migrate(t, binary, cms)
			t.Logf("%v -> %s", data, settings)
			url := startServe(t, binary, settings, contextDir)
			client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
				// serve's own self-signed certificate, on 127.0.0.1.
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
			}}
			for _, namespace := range requestNamespaces {
				for j := range podsPerNamespace {
					pod := randomPod(rng, namespace, j)
					review := reviewOf(t, pod, namespace)
					theirs := applyResponse(t, pod, yunikornAnswer(t, controller, review))
					ours := applyResponse(t, pod, ourAnswer(t, client, url, review))
					if userInfo, ok := theirs.Annotations[userInfoKey]; ok {
						withUserInfo++
						if ours.Annotations[userInfoKey] != userInfo {
							t.Errorf("%s: user.info: YuniKorn %q, policy %q", describePod(pod, namespace), userInfo, ours.Annotations[userInfoKey])
						}
					}
					delete(ours.Annotations, userInfoKey)
					delete(theirs.Annotations, userInfoKey)
					for _, c := range []struct {
						what        string
						theirs, our any
					}{
						{"labels", nonNil(theirs.Labels), nonNil(ours.Labels)},
						{"annotations", nonNil(theirs.Annotations), nonNil(ours.Annotations)},
						{"schedulerName", theirs.Spec.SchedulerName, ours.Spec.SchedulerName},
					} {
						a, _ := json.Marshal(c.theirs)
						b, _ := json.Marshal(c.our)
						if !bytes.Equal(a, b) {
							t.Errorf("%s: %s: YuniKorn %s, policy %s", describePod(pod, namespace), c.what, a, b)
						}
					}
					compared++
				}
			}
		})
	}
	t.Logf("%d Pod CREATEs compared (%d configurations, %d namespaces), user.info in %d of them", compared, len(configs),
		len(requestNamespaces), withUserInfo)
}

func ns(name string, annotations map[string]string) *v1.Namespace {
	return &v1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func pc(name string, annotations map[string]string) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{TypeMeta: metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Value: 100}
}

// yunikornAC holds the admission controller's caches, shared by every
// configuration, and the configuration in force.
type yunikornAC struct {
	conf    *conf.AdmissionControllerConf
	nsCache *admission.NamespaceCache
	pcCache *admission.PriorityClassCache
}

// admissionController builds the admission controller's namespace and
// PriorityClass caches as its main does, from informers (over a fake
// clientset holding the objects), and waits until their handlers have
// seen every object.
func admissionController(t *testing.T, namespaces []*v1.Namespace, classes []*schedulingv1.PriorityClass) *yunikornAC {
	t.Helper()
	var objs []runtime.Object
	for _, n := range namespaces {
		objs = append(objs, n)
	}
	for _, c := range classes {
		objs = append(objs, c)
	}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	var regs []cache.ResourceEventHandlerRegistration
	nsCache, err := admission.NewNamespaceCache(nsInformer{factory.Core().V1().Namespaces(), &regs})
	if err != nil {
		t.Fatal(err)
	}
	pcCache, err := admission.NewPriorityClassCache(pcInformer{factory.Scheduling().V1().PriorityClasses(), &regs})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	synced := make([]cache.InformerSynced, len(regs))
	for i, r := range regs {
		synced[i] = r.HasSynced
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if len(regs) != 2 || !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatalf("the admission controller's caches did not sync (%d handlers)", len(regs))
	}
	return &yunikornAC{nsCache: nsCache, pcCache: pcCache}
}

// capturing is an informer that keeps the registrations of the handlers
// added to it: theirs say when a handler has seen every object.
type capturing struct {
	cache.SharedIndexInformer
	regs *[]cache.ResourceEventHandlerRegistration
}

func (c capturing) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	r, err := c.SharedIndexInformer.AddEventHandler(h)
	if err == nil {
		*c.regs = append(*c.regs, r)
	}
	return r, err
}

type nsInformer struct {
	informerscorev1.NamespaceInformer
	regs *[]cache.ResourceEventHandlerRegistration
}

func (n nsInformer) Informer() cache.SharedIndexInformer {
	return capturing{n.NamespaceInformer.Informer(), n.regs}
}

type pcInformer struct {
	informersschedulingv1.PriorityClassInformer
	regs *[]cache.ResourceEventHandlerRegistration
}

func (p pcInformer) Informer() cache.SharedIndexInformer {
	return capturing{p.PriorityClassInformer.Informer(), p.regs}
}

// writeCluster writes the objects for serve --context-dir.
func writeCluster(t *testing.T, namespaces []*v1.Namespace, classes []*schedulingv1.PriorityClass) string {
	t.Helper()
	dir := t.TempDir()
	var docs []string
	add := func(o any) {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for _, n := range namespaces {
		add(n)
	}
	for _, c := range classes {
		add(c)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// migrate converts the ConfigMaps with `yunikorn-userinfo migrate`.
func migrate(t *testing.T, binary string, cms []*v1.ConfigMap) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "configmaps.yaml")
	writeList(t, path, cms)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "migrate", "-o", "json", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("migrate: %v: %s", err, stderr.String())
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, stdout.Bytes()); err != nil {
		t.Fatalf("migrate printed %q: %v", stdout.String(), err)
	}
	return compact.String()
}

// startServe runs `yunikorn-userinfo serve` with the settings and the
// cluster of contextDir on free ports of 127.0.0.1, and returns its
// /mutate URL once it is ready; it is stopped when the test ends.
func startServe(t *testing.T, binary, settings, contextDir string) string {
	t.Helper()
	ports := freePorts(t, 2)
	listen := "127.0.0.1:" + strconv.Itoa(ports[0])
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "serve", "--self-signed", "--listen", listen,
		"--metrics-listen", "127.0.0.1:"+strconv.Itoa(ports[1]), "--settings-json", settings, "--context-dir", contextDir)
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start serve: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := client.Get("https://" + listen + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return "https://" + listen + "/mutate"
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v: %s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve was not ready within a minute: %s", stderr.String())
		}
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out
}

// randomPod is a Pod with a random choice of the labels, annotations,
// PriorityClass, scheduler and uid the admission controller reads; maps
// are sometimes absent, values sometimes empty.
func randomPod(rng *rand.Rand, namespace string, i int) *v1.Pod {
	pick := func(values ...string) string { return values[rng.IntN(len(values))] }
	maybe := func(p float64) bool { return rng.Float64() < p }
	pod := &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + strconv.Itoa(i), Namespace: namespace},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if !maybe(0.2) {
		pod.Labels = map[string]string{}
		for key, values := range map[string][]string{
			"app":                        {"yunikorn", "batch"},
			"yunikorn.apache.org/app-id": {"", "app-1"},
			"applicationId":              {"", "app-2"},
			"spark-app-selector":         {"", "spark-1"},
			"yunikorn.apache.org/queue":  {"", "root.a"},
			"queue":                      {"root.b", "root.a"},
		} {
			if maybe(0.25) {
				pod.Labels[key] = pick(values...)
			}
		}
	}
	if !maybe(0.2) {
		pod.Annotations = map[string]string{}
		for key, values := range map[string][]string{
			allowPreemption:                          {"true", "false", "True", ""},
			"yunikorn.apache.org/app-id":             {"", "app-3"},
			"yunikorn.apache.org/ignore-application": {"true", "false"},
			"example.com/other":                      {"x"},
		} {
			if maybe(0.25) {
				pod.Annotations[key] = pick(values...)
			}
		}
	}
	pod.Spec.PriorityClassName = pick("", "", "no-preempt", "preempt", "plain", "odd", "missing")
	pod.Spec.SchedulerName = pick("", "default-scheduler", "yunikorn")
	if maybe(0.15) {
		pod.UID = types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", rng.Uint32(), rng.Uint64()&0xffffffffffff))
	}
	return pod
}

func describePod(p *v1.Pod, namespace string) string {
	b, _ := json.Marshal(struct {
		Namespace     string
		UID           types.UID `json:",omitempty"`
		Labels        map[string]string
		Annotations   map[string]string
		PriorityClass string `json:",omitempty"`
		Scheduler     string `json:",omitempty"`
	}{namespace, p.UID, p.Labels, p.Annotations, p.Spec.PriorityClassName, p.Spec.SchedulerName})
	return string(b)
}

// reviewOf is the AdmissionReview of alice's CREATE of pod.
func reviewOf(t *testing.T, pod *v1.Pod, namespace string) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "0d4c3b2a-1111-4222-8333-944455556666",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Name:      pod.Name,
			Namespace: namespace,
			Operation: admissionv1.Create,
			UserInfo:  authenticationUser("alice", "dev", "system:authenticated"),
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func yunikornAnswer(t *testing.T, ac *admission.AdmissionController, review []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(review))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	ac.Serve(rec, req)
	return decodeResponse(t, "YuniKorn", rec.Code, rec.Body.Bytes())
}

func ourAnswer(t *testing.T, client *http.Client, url string, review []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"?timeout=10s", bytes.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return decodeResponse(t, "policy", resp.StatusCode, body)
}

func decodeResponse(t *testing.T, who string, code int, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	var r admissionv1.AdmissionReview
	if code != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Response == nil {
		t.Fatalf("%s answered %d: %s", who, code, body)
	}
	if !r.Response.Allowed {
		t.Fatalf("%s refused: %+v", who, r.Response.Result)
	}
	if len(r.Response.Warnings) > 0 {
		t.Errorf("%s warned: %q", who, r.Response.Warnings)
	}
	return r.Response
}

// applyResponse is pod with the response's JSON patch applied.
func applyResponse(t *testing.T, pod *v1.Pod, resp *admissionv1.AdmissionResponse) *v1.Pod {
	t.Helper()
	doc, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Patch) > 0 {
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("patch %s: %v", resp.Patch, err)
		}
		if doc, err = patch.Apply(doc); err != nil {
			t.Fatalf("apply %s: %v", resp.Patch, err)
		}
	}
	out := &v1.Pod{}
	if err := json.Unmarshal(doc, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// nonNil makes an absent map and an empty one compare equal: the API
// server stores neither.
func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func authenticationUser(name string, groups ...string) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: name, UID: "uid-" + name, Groups: groups}
}
