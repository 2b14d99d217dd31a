// Command admbench measures what each deployment mode adds to a Pod
// create through a real kube-apiserver (make bench's admission-modes
// step): the same Pods created one after another, in turn into a
// namespace of each mode, so that every mode sees the same machine load:
//
//	none      no policy
//	cel       the chart's mode cel rendering: MutatingAdmissionPolicy and
//	          ValidatingAdmissionPolicy, no webhook
//	hybrid    the chart's mode hybrid rendering: those policies and the
//	          mutating webhook (no validating twin by default)
//	hybrid-twin  the same with the validating twin (hybrid.validatingTwin)
//	pair      the chart's standalone rendering: the mutating webhook and
//	          its validating twin, which the API server skips for a Pod
//	          carrying its submitter's own record (its match condition)
//	pair-always  the same with the twin called for every Pod (the
//	          condition removed, as validatingTwinSkipsOwnRecord: false)
//	mutating  the standalone mutating webhook alone (what the twin adds
//	          is pair minus mutating)
//	null      the standalone mutating webhook configuration pointed at a
//	          webhook that answers "allowed" at once (in this process):
//	          what the API server's call of a webhook costs by itself
//	null-stamp  the same webhook answering with the stamp's JSON patch
//	          (encoding/json of the submitter, no policy): the floor of any
//	          webhook that records the submitter; mutating minus
//	          null-stamp is what serve adds to a stamp (decoding, the
//	          policy, encoding, its log line)
//	null-pair the same as null for the pair (pair-always's floor)
//	ctl-none, ctl-pair, ctl-pair-always  none, pair and pair-always for
//	          the Pods a workload controller creates: submitted as the
//	          ReplicaSet controller, carrying alice's record from their
//	          template (the twin's condition skips those too)
//
// -modes measures a subset, -containers makes each Pod larger, and
// -compare name=binary adds mode mutating.name: mutating served by another
// serve binary in the same rounds (how RATIONALE's engine and JSON figures
// were taken).
//
// It reports p50, p99 and the mean per mode, what each adds over none,
// the webhook's own time per call (its admission_duration_seconds), and
// the connections the API server held to the webhook (connection reuse:
// one TLS handshake per connection). The webhook is one
// `yunikorn-userinfo serve` process; the renderings are make
// chart-render's (build/chart).
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
	"github.com/yunikorn-userinfo/userinfo/e2e/internal/kbuild"
)

// modes, in the order of the report.
var modes = []string{"none", "cel", "hybrid", "hybrid-twin", "pair", "pair-always", "mutating", "null", "null-stamp", "null-pair",
	"ctl-none", "ctl-pair", "ctl-pair-always"}

// controller is the identity the ctl- modes submit as, with the groups
// the API server gives a service account.
var controller = struct {
	user   string
	groups []string
}{"system:serviceaccount:kube-system:replicaset-controller", []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}}

// twinConditionName is the twin's own match condition (internal/cel
// TwinConditionName), which pair-always removes.
const twinConditionName = "needs-the-twin"

// modeLabel selects each mode's namespace.
const modeLabel = "bench.yunikorn.apache.org/mode"

const annotationKey = "yunikorn.apache.org/user.info"

// Result is one mode's measurements.
type Result struct {
	Mode   string  `json:"mode"`
	Pods   int     `json:"pods"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	MeanMS float64 `json:"mean_ms"`
	// AddedP50MS is P50MS less none's.
	AddedP50MS float64 `json:"added_p50_ms"`
	AddedP99MS float64 `json:"added_p99_ms"`
}

// Report is the run.
type Report struct {
	KubeVersion string   `json:"kube_version"`
	CPUs        int      `json:"cpus"`
	Pods        int      `json:"pods"`
	Warmup      int      `json:"warmup"`
	Results     []Result `json:"results"`
	// WebhookCalls and WebhookMeanMS: serve's own admission time
	// (yunikorn_userinfo_admission_duration_seconds), by outcome: mutated
	// (a stamp), allowed (the twin, and hybrid's webhook after the CEL
	// stamp).
	WebhookCalls  map[string]int     `json:"webhook_calls"`
	WebhookMeanMS map[string]float64 `json:"webhook_mean_ms"`
	// Connections: the TCP connections from the API server to serve
	// established at the end of the run (each one TLS handshake).
	Connections int `json:"connections"`
	// PodBytes: the JSON of one created Pod, as the API server stores it.
	PodBytes int      `json:"pod_bytes"`
	Notes    []string `json:"notes,omitempty"`
}

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "admbench:", err)
		os.Exit(1)
	}
}

type options struct {
	pods, warmup int
	serve, chart string
	out          string
	// measure: the modes measured (all of modes unless -modes); compare:
	// other serve binaries, each measured as mode mutating.name.
	measure    []string
	compare    map[string]string
	containers int
	// profile: a CPU profile of serve over the measured creates.
	profile string
}

func run(ctx context.Context) error {
	var o options
	flag.IntVar(&o.pods, "pods", 400, "measured Pod creates per mode")
	flag.IntVar(&o.warmup, "warmup", 40, "Pod creates per mode before measuring")
	flag.StringVar(&o.serve, "serve", "../build/yunikorn-userinfo", "the yunikorn-userinfo binary")
	flag.StringVar(&o.chart, "chart", "../build/chart", "make chart-render's renderings")
	flag.StringVar(&o.out, "out", "../build/bench/admission-modes.json", "results file")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of serve over the measured creates here (serve --pprof)")
	only := flag.String("modes", "", "comma-separated modes to measure (default all; none is always measured)")
	o.compare = map[string]string{}
	flag.Func("compare", "name=binary: also measure another serve binary as mode mutating.name, in the same rounds (repeatable)", func(v string) error {
		name, path, ok := strings.Cut(v, "=")
		if !ok || path == "" || !validName(name) {
			return fmt.Errorf("want name=binary with a name of lower-case letters, digits and '-', got %q", v)
		}
		o.compare[name] = path
		return nil
	})
	flag.IntVar(&o.containers, "containers", 1, "containers in each created Pod (more makes a larger review)")
	flag.Parse()
	if o.pods < 10 || o.warmup < 0 || o.containers < 1 {
		return fmt.Errorf("-pods %d, -warmup %d, -containers %d: want at least 10 measured Pods, no negative warm-up and a container", o.pods, o.warmup, o.containers)
	}
	o.measure = slices.Clone(modes)
	if *only != "" {
		o.measure = []string{"none"}
		for _, m := range strings.Split(*only, ",") {
			if !slices.Contains(modes, m) {
				return fmt.Errorf("-modes: unknown mode %q (known: %s)", m, strings.Join(modes, ", "))
			}
			if m != "none" {
				o.measure = append(o.measure, m)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.compare)) {
		o.measure = append(o.measure, "mutating."+name)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	bin, err := kbuild.Ensure(ctx, kbuild.Options{ModuleDir: wd, Log: log})
	if err != nil {
		return fmt.Errorf("cluster binaries: %w", err)
	}
	cacheRoot, err := os.UserCacheDir()
	if err != nil {
		return err
	}
	c, err := cluster.Start(ctx, cluster.Options{
		BinDir:      bin.Dir,
		Users:       []cluster.User{{Name: "admin", Groups: []string{"system:masters"}}, {Name: "alice", Groups: []string{"dev", "system:masters"}}},
		Controllers: []string{"serviceaccount-controller"},
		PidRoot:     filepath.Join(cacheRoot, "yunikorn-userinfo", "admbench-pids"),
		Log:         log,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			log.Warn("stop the cluster", "error", err)
		}
	}()
	b := &bench{c: c, o: o, log: log}
	defer func() {
		for _, f := range b.closers {
			_ = f()
		}
	}()
	rep, err := b.run(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.out, append(j, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	printReport(os.Stdout, rep)
	return nil
}

type bench struct {
	c   *cluster.Cluster
	o   options
	log *slog.Logger
	cs  *kubernetes.Clientset
	dyn *dynamic.DynamicClient
	// closers stop what the run started in this process.
	closers []func() error
}

func (b *bench) run(ctx context.Context) (*Report, error) {
	admin, err := b.c.Config("admin")
	if err != nil {
		return nil, err
	}
	admin.QPS, admin.Burst = 1000, 1000
	if b.cs, err = kubernetes.NewForConfig(admin); err != nil {
		return nil, err
	}
	if b.dyn, err = dynamic.NewForConfig(admin); err != nil {
		return nil, err
	}
	v, err := b.cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("read the API server's version: %w", err)
	}
	read := func(name string) (*cluster.Rendering, error) {
		return cluster.ReadRendering(filepath.Join(b.o.chart, name))
	}
	standalone, err := read("standalone.yaml")
	if err != nil {
		return nil, err
	}
	hybrid, err := read("hybrid.yaml")
	if err != nil {
		return nil, err
	}
	celR, err := read("cel.yaml")
	if err != nil {
		return nil, err
	}

	// One serve, as the standalone chart runs it.
	cm, err := standalone.One("ConfigMap")
	if err != nil {
		return nil, err
	}
	settings, err := cluster.AdaptSettings(cm, []string{})
	if err != nil {
		return nil, err
	}
	settingsFile := filepath.Join(b.c.Dir, "admbench-settings.yaml")
	if err := os.WriteFile(settingsFile, settings, 0o600); err != nil {
		return nil, err
	}
	dep, err := standalone.One("Deployment")
	if err != nil {
		return nil, err
	}
	overlay, err := deploymentFlag(dep, "validate-overlay")
	if err != nil {
		return nil, err
	}
	args := []string{"--validate-overlay", overlay}
	if b.o.profile != "" {
		args = append(args, "--pprof")
	}
	wh, err := b.c.StartWebhook(ctx, cluster.WebhookOptions{Name: "admbench", Binary: b.o.serve, SettingsFile: settingsFile, ExtraArgs: args})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := wh.Stop(); err != nil {
			b.log.Warn("stop the webhook", "error", err)
		}
	}()

	ns := map[string]string{}
	for _, m := range slices.Concat(modes, b.o.measure) {
		if _, ok := ns[m]; ok {
			continue
		}
		ns[m] = "bench-" + strings.ReplaceAll(m, ".", "-")
		if _, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns[m], Labels: map[string]string{modeLabel: m}}}, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create namespace %s: %w", ns[m], err)
		}
	}
	// The webhooks: standalone's pair for pair, its mutating half alone
	// for mutating, hybrid's pair for hybrid.
	if err := b.registerWebhooks(ctx, standalone, wh, "pair", true); err != nil {
		return nil, err
	}
	if err := b.registerWebhooks(ctx, standalone, wh, "pair-always", true); err != nil {
		return nil, err
	}
	for _, m := range []string{"ctl-pair", "ctl-pair-always"} {
		if err := b.registerWebhooks(ctx, standalone, wh, m, true); err != nil {
			return nil, err
		}
	}
	if err := b.registerWebhooks(ctx, standalone, wh, "mutating", false); err != nil {
		return nil, err
	}
	// Each other binary: the same serve, the standalone mutating webhook.
	for name, binary := range b.o.compare {
		other, err := b.c.StartWebhook(ctx, cluster.WebhookOptions{Name: "admbench-" + name, Binary: binary, SettingsFile: settingsFile, ExtraArgs: args})
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", binary, err)
		}
		b.closers = append(b.closers, other.Stop)
		if err := b.registerWebhooks(ctx, standalone, other, "mutating."+name, false); err != nil {
			return nil, err
		}
	}
	if err := b.registerWebhooks(ctx, hybrid, wh, "hybrid", false); err != nil {
		return nil, err
	}
	// hybrid.validatingTwin: hybrid's mutating webhook with the shipped twin.
	if err := b.registerWebhooks(ctx, hybrid, wh, "hybrid-twin", false); err != nil {
		return nil, err
	}
	if err := b.registerTwin(ctx, standalone, wh, "hybrid-twin"); err != nil {
		return nil, err
	}
	null, err := b.startNull(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.registerWebhooks(ctx, standalone, null, "null", false); err != nil {
		return nil, err
	}
	if err := b.registerWebhooks(ctx, standalone, null, "null-stamp", false); err != nil {
		return nil, err
	}
	if err := b.registerWebhooks(ctx, standalone, null, "null-pair", true); err != nil {
		return nil, err
	}
	// The CEL policies of mode cel, bound to the cel namespace, and those
	// of mode hybrid to the hybrid one (the same text: both come from
	// files/cel-policies.json).
	if err := b.installCEL(ctx, celR, "cel", ns["cel"]); err != nil {
		return nil, err
	}
	for _, m := range []string{"hybrid", "hybrid-twin"} {
		if err := b.installCEL(ctx, hybrid, m, ns[m]); err != nil {
			return nil, err
		}
	}

	alice, err := b.c.Config("alice")
	if err != nil {
		return nil, err
	}
	alice.QPS, alice.Burst = 1000, 1000
	client, err := kubernetes.NewForConfig(alice)
	if err != nil {
		return nil, err
	}
	ctlConfig, err := b.c.CertConfig(controller.user, controller.groups)
	if err != nil {
		return nil, err
	}
	ctlConfig.QPS, ctlConfig.Burst = 1000, 1000
	ctlClient, err := kubernetes.NewForConfig(ctlConfig)
	if err != nil {
		return nil, err
	}
	// record is what the ReplicaSet controller copies from a template
	// that alice's Deployment carried.
	probe, err := client.CoreV1().Pods(ns["pair"]).Create(ctx, benchPod("record", b.o.containers), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, fmt.Errorf("read alice's record: %w", err)
	}
	record := probe.Annotations[annotationKey]
	// The size of a created Pod as the API server stores it (defaults
	// and managedFields in): about what each review's object is.
	podJSON, err := json.Marshal(probe)
	if err != nil {
		return nil, err
	}
	clientFor := func(m string) (*kubernetes.Clientset, map[string]string) {
		if strings.HasPrefix(m, "ctl-") {
			return ctlClient, map[string]string{annotationKey: record}
		}
		return client, nil
	}
	measure := b.o.measure
	for _, m := range measure {
		cs, ann := clientFor(m)
		if err := b.waitEnforced(ctx, cs, m, ns[m], ann); err != nil {
			return nil, err
		}
	}

	before, err := scrape(ctx, wh.MetricsURL)
	if err != nil {
		return nil, err
	}
	lat := map[string][]time.Duration{}
	total := b.o.warmup + b.o.pods
	profiled := make(chan error, 1)
	if b.o.profile != "" {
		// About as long as the measured creates take at 3 ms each.
		seconds := max(5, b.o.pods*len(measure)*3/1000)
		go func() {
			profiled <- fetchProfile(ctx, strings.TrimSuffix(wh.MetricsURL, "/metrics")+"/debug/pprof/profile?seconds="+strconv.Itoa(seconds), b.o.profile)
		}()
	} else {
		profiled <- nil
	}
	b.log.Info("measuring", "pods per mode", b.o.pods, "warmup", b.o.warmup)
	for i := 0; i < total; i++ {
		// A different mode first each round, so no mode always follows
		// the same one.
		for j := range measure {
			m := measure[(i+j)%len(measure)]
			cs, ann := clientFor(m)
			pod := benchPod(fmt.Sprintf("p-%05d", i), b.o.containers)
			pod.Annotations = ann
			began := time.Now()
			got, err := cs.CoreV1().Pods(ns[m]).Create(ctx, pod, metav1.CreateOptions{})
			d := time.Since(began)
			if err != nil {
				return nil, fmt.Errorf("mode %s: create Pod %s: %w", m, pod.Name, err)
			}
			if stamped := got.Annotations[annotationKey] != ""; stamped != stamps(m) {
				return nil, fmt.Errorf("mode %s: Pod %s stamped=%t", m, pod.Name, stamped)
			}
			if i >= b.o.warmup {
				lat[m] = append(lat[m], d)
			}
		}
	}
	after, err := scrape(ctx, wh.MetricsURL)
	if err != nil {
		return nil, err
	}
	if err := <-profiled; err != nil {
		return nil, err
	}
	rep := &Report{KubeVersion: v.GitVersion, CPUs: numCPU(), Pods: b.o.pods, Warmup: b.o.warmup, PodBytes: len(podJSON),
		WebhookCalls: map[string]int{}, WebhookMeanMS: map[string]float64{}}
	for _, m := range measure {
		rep.Results = append(rep.Results, summarise(m, lat[m]))
	}
	for i := range rep.Results {
		rep.Results[i].AddedP50MS = round(rep.Results[i].P50MS - rep.Results[0].P50MS)
		rep.Results[i].AddedP99MS = round(rep.Results[i].P99MS - rep.Results[0].P99MS)
	}
	for _, stage := range []string{"mutated", "allowed"} {
		n := after.count[stage] - before.count[stage]
		if n > 0 {
			rep.WebhookCalls[stage] = int(n)
			rep.WebhookMeanMS[stage] = round(1000 * (after.sum[stage] - before.sum[stage]) / n)
		}
	}
	if rep.Connections, err = establishedTo(wh.Addr); err != nil {
		rep.Notes = append(rep.Notes, "connections: "+err.Error())
	}
	return rep, nil
}

// registerWebhooks creates the rendering's webhook configurations for the
// namespace labelled mode, pointed at wh; the validating twin only with
// twin.
func (b *bench) registerWebhooks(ctx context.Context, r *cluster.Rendering, wh *cluster.Webhook, mode string, twin bool) error {
	labels := map[string]string{modeLabel: mode}
	doc, err := r.One("MutatingWebhookConfiguration")
	if err != nil {
		return err
	}
	mwc, err := cluster.AdaptWebhookConfiguration(doc, "admbench-"+mode, wh.BaseURL, b.c.PKI.CAPEM, labels)
	if err != nil {
		return err
	}
	if _, err := b.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s: %w", mwc.Name, err)
	}
	if !twin {
		return nil
	}
	return b.registerTwin(ctx, r, wh, mode)
}

// registerTwin creates the rendering's validating twin for the namespace
// labelled mode, pointed at wh.
func (b *bench) registerTwin(ctx context.Context, r *cluster.Rendering, wh *cluster.Webhook, mode string) error {
	labels := map[string]string{modeLabel: mode}
	doc, err := r.OneValidating()
	if err != nil {
		return err
	}
	var vwc *admissionregistrationv1.ValidatingWebhookConfiguration
	if vwc, err = cluster.AdaptValidatingWebhookConfiguration(doc, "admbench-"+mode+"-validate", wh.BaseURL, b.c.PKI.CAPEM, labels); err != nil {
		return err
	}
	if strings.HasSuffix(mode, "pair-always") {
		for i := range vwc.Webhooks {
			vwc.Webhooks[i].MatchConditions = slices.DeleteFunc(vwc.Webhooks[i].MatchConditions,
				func(c admissionregistrationv1.MatchCondition) bool { return c.Name == twinConditionName })
		}
	}
	if _, err := b.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s: %w", vwc.Name, err)
	}
	return nil
}

var policyResources = map[string]string{
	"MutatingAdmissionPolicy":          "mutatingadmissionpolicies",
	"MutatingAdmissionPolicyBinding":   "mutatingadmissionpolicybindings",
	"ValidatingAdmissionPolicy":        "validatingadmissionpolicies",
	"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
}

// installCEL creates the rendering's CEL policies, bindings and parameter
// for the namespace ns (labelled mode), the names suffixed with the mode.
func (b *bench) installCEL(ctx context.Context, r *cluster.Rendering, mode, ns string) error {
	var param *corev1.ConfigMap
	for _, doc := range r.All("ConfigMap") {
		if strings.Contains(string(doc), "app.kubernetes.io/component: cel") {
			param = &corev1.ConfigMap{}
			if err := yaml.UnmarshalStrict(doc, param); err != nil {
				return fmt.Errorf("decode the CEL parameter: %w", err)
			}
		}
	}
	if param == nil {
		return errors.New("the rendering has no CEL parameter ConfigMap")
	}
	param.Namespace = ns
	if _, err := b.cs.CoreV1().ConfigMaps(ns).Create(ctx, param, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the CEL parameter: %w", err)
	}
	for _, kind := range []string{"MutatingAdmissionPolicy", "ValidatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding"} {
		for _, doc := range r.All(kind) {
			var obj unstructured.Unstructured
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				return fmt.Errorf("decode %s: %w", kind, err)
			}
			obj.SetName(obj.GetName() + "-" + mode)
			if strings.HasSuffix(kind, "Binding") {
				policy, _, _ := unstructured.NestedString(obj.Object, "spec", "policyName")
				if err := errors.Join(
					unstructured.SetNestedField(obj.Object, policy+"-"+mode, "spec", "policyName"),
					unstructured.SetNestedField(obj.Object, ns, "spec", "paramRef", "namespace"),
					unstructured.SetNestedStringMap(obj.Object, map[string]string{modeLabel: mode}, "spec", "matchResources", "namespaceSelector", "matchLabels"),
				); err != nil {
					return fmt.Errorf("adapt %s: %w", kind, err)
				}
			}
			gvk := obj.GroupVersionKind()
			res := b.dyn.Resource(schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: policyResources[kind]})
			if _, err := res.Create(ctx, &obj, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create %s %s: %w", kind, obj.GetName(), err)
			}
		}
	}
	return nil
}

// waitEnforced polls dry-run creates until the mode's policies are in
// force (stamped; none: created).
func (b *bench) waitEnforced(ctx context.Context, cs *kubernetes.Clientset, mode, ns string, annotations map[string]string) error {
	var last string
	err := cluster.Poll(ctx, 60*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		pod := benchPod("enforced", 1)
		pod.Annotations = annotations
		p, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = "not stamped yet"
		return !stamps(mode) || p.Annotations[annotationKey] != "", nil
	})
	if err != nil {
		return fmt.Errorf("mode %s: wait for the policies (%s): %w", mode, last, err)
	}
	return nil
}

// stamps reports whether a mode records the submitter.
func stamps(mode string) bool {
	return strings.HasPrefix(mode, "ctl-") || mode != "none" && (!strings.HasPrefix(mode, "null") || mode == "null-stamp")
}

// startNull starts the null webhook: HTTPS on loopback with a serving
// certificate of the cluster's CA, HTTP/2 as serve offers it, answering
// every review "allowed" with its uid.
func (b *bench) startNull(ctx context.Context) (*cluster.Webhook, error) {
	certFile, keyFile, err := b.c.PKI.IssueServing("admbench-null", []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var review struct {
				Request struct {
					UID       string         `json:"uid"`
					Namespace string         `json:"namespace"`
					Operation string         `json:"operation"`
					UserInfo  map[string]any `json:"userInfo"`
				} `json:"request"`
			}
			if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&review); err != nil {
				http.Error(w, "decode the review: "+err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			req := review.Request
			if r.URL.Path != "/mutate" || req.Operation != "CREATE" || req.Namespace != "bench-null-stamp" {
				fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true}}`, req.UID)
				return
			}
			// null-stamp: the record as encoding/json writes it, added
			// with the annotations map (the bench Pod has none).
			record, _ := json.Marshal(struct {
				User   any `json:"user,omitempty"`
				Groups any `json:"groups,omitempty"`
			}{req.UserInfo["username"], req.UserInfo["groups"]})
			patch, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/metadata/annotations",
				"value": map[string]string{annotationKey: string(record)}}})
			fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true,"patchType":"JSONPatch","patch":%q}}`,
				req.UID, base64.StdEncoding.EncodeToString(patch))
		}),
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.log.Warn("null webhook", "error", err)
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	b.closers = append(b.closers, srv.Close)
	addr := ln.Addr().String()
	return &cluster.Webhook{BaseURL: "https://" + addr, Addr: addr}, nil
}

// validName reports whether a -compare name can be part of a namespace's
// name and a label's value.
func validName(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return s != "" && len(s) <= 40 && s[0] != '-' && s[len(s)-1] != '-'
}

// benchPod is the Pod each mode creates: containers of the pause image,
// each past the first with a few environment variables and a volume mount.
func benchPod(name string, containers int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "admbench"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers:    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	for i := 1; i < containers; i++ {
		c := corev1.Container{Name: fmt.Sprintf("side-%d", i), Image: "registry.k8s.io/pause:3.10"}
		for j := range 4 {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-%d-%d", i, j)})
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	return p
}

func summarise(mode string, ds []time.Duration) Result {
	ms := make([]float64, len(ds))
	sum := 0.0
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += ms[i]
	}
	slices.Sort(ms)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ms)))) - 1
		return round(ms[max(0, min(i, len(ms)-1))])
	}
	return Result{Mode: mode, Pods: len(ms), P50MS: q(0.50), P90MS: q(0.90), P99MS: q(0.99), MeanMS: round(sum / float64(len(ms)))}
}

func round(x float64) float64 { return math.Round(x*1000) / 1000 }

// histogram is serve's admission_duration_seconds sum and count by stage.
type histogram struct{ sum, count map[string]float64 }

func scrape(ctx context.Context, url string) (histogram, error) {
	h := histogram{sum: map[string]float64{}, count: map[string]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return h, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var into map[string]float64
		switch {
		case strings.HasPrefix(line, "yunikorn_userinfo_admission_duration_seconds_sum{"):
			into = h.sum
		case strings.HasPrefix(line, "yunikorn_userinfo_admission_duration_seconds_count{"):
			into = h.count
		default:
			continue
		}
		stage := labelValue(line, "outcome")
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return h, fmt.Errorf("scrape %s: %q: %w", url, line, err)
		}
		into[stage] += v
	}
	return h, sc.Err()
}

func fetchProfile(ctx context.Context, url, out string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("CPU profile: %s", resp.Status)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("CPU profile: %w", err)
	}
	return f.Close()
}

func labelValue(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// establishedTo counts the established TCP connections whose remote end
// is addr (host:port on IPv4 loopback), from /proc/net/tcp.
func establishedTo(addr string) (int, error) {
	_, port, _ := strings.Cut(addr, ":")
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0, fmt.Errorf("port of %s: %w", addr, err)
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", p)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// local_address rem_address st: the API server's side has the
		// webhook's port as its remote end; 01 is ESTABLISHED.
		if len(fields) > 3 && strings.HasSuffix(fields[2], want) && fields[3] == "01" {
			n++
		}
	}
	return n, sc.Err()
}

func numCPU() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "processor\t:")
}

func deploymentFlag(manifest []byte, name string) (string, error) {
	var d appsv1.Deployment
	if err := yaml.Unmarshal(manifest, &d); err != nil {
		return "", fmt.Errorf("decode the Deployment: %w", err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		for i, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v, nil
			}
			if a == "--"+name && i+1 < len(c.Args) {
				return c.Args[i+1], nil
			}
		}
	}
	return "", fmt.Errorf("the Deployment has no --%s", name)
}

func printReport(w io.Writer, r *Report) {
	fmt.Fprintf(w, "Pod create through kube-apiserver %s, %d CPUs, %d Pods of %d bytes per mode (after %d warm-up), interleaved\n",
		r.KubeVersion, r.CPUs, r.Pods, r.PodBytes, r.Warmup)
	fmt.Fprintf(w, "%-22s %8s %8s %8s %8s %10s %10s\n", "mode", "p50 ms", "p90 ms", "p99 ms", "mean ms", "+p50 ms", "+p99 ms")
	for _, x := range r.Results {
		fmt.Fprintf(w, "%-22s %8.3f %8.3f %8.3f %8.3f %10.3f %10.3f\n", x.Mode, x.P50MS, x.P90MS, x.P99MS, x.MeanMS, x.AddedP50MS, x.AddedP99MS)
	}
	fmt.Fprintf(w, "webhook's own time per call: %v ms over %v calls; API server connections to it at the end: %d\n",
		r.WebhookMeanMS, r.WebhookCalls, r.Connections)
	p50, p99 := map[string]float64{}, map[string]float64{}
	for _, x := range r.Results {
		p50[x.Mode], p99[x.Mode] = x.AddedP50MS, x.AddedP99MS
	}
	// The summaries of the modes measured (-modes may leave some out).
	has := func(ms ...string) bool {
		for _, m := range ms {
			if _, ok := p50[m]; !ok {
				return false
			}
		}
		return true
	}
	if has("pair", "cel", "pair-always") {
		fmt.Fprintf(w, "p50 added: pair %.2f ms (target 1.5), cel %.2f ms (%.0f%% of pair, target 50%%); the twin's skip saves %.2f ms (pair-always less pair)\n",
			p50["pair"], p50["cel"], 100*p50["cel"]/max(p50["pair"], 0.001), p50["pair-always"]-p50["pair"])
	}
	if has("null-stamp", "mutating") {
		fmt.Fprintf(w, "any stamping webhook costs %.2f ms here (null-stamp), serve adds %.2f ms to it (mutating less null-stamp)\n",
			p50["null-stamp"], p50["mutating"]-p50["null-stamp"])
		for _, x := range r.Results {
			if name, ok := strings.CutPrefix(x.Mode, "mutating."); ok {
				fmt.Fprintf(w, "%s adds %.2f ms to null-stamp, %+.2f ms (p99 %+.2f ms) against mutating\n", name,
					x.AddedP50MS-p50["null-stamp"], x.AddedP50MS-p50["mutating"], x.AddedP99MS-p99["mutating"])
			}
		}
	}
	if has("ctl-none", "ctl-pair", "ctl-pair-always") {
		fmt.Fprintf(w, "a controller's Pods (alice's record from the template): the pair adds %.2f ms over ctl-none, %.2f ms with the twin always called\n",
			p50["ctl-pair"]-p50["ctl-none"], p50["ctl-pair-always"]-p50["ctl-none"])
	}
}
