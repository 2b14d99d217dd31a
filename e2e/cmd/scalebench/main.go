// Command scalebench measures `yunikorn-userinfo serve` against a real
// kube-apiserver holding many Pods (make bench's scale step): for each
// Pod count it fills the cluster, starts one serve replica with
// applicationOwnership enforced and trustPodTokens on (both read Pods
// through the host's cache), and records the time to /readyz and to the
// cache's first sync, the replica's memory, the API server's Pod watches,
// and the latency of admission reviews sent at a fixed rate. The results
// are a JSON list (-out) that perfkit tables reads.
//
// The Pods are written straight to the API server (no webhook registered)
// by many concurrent clients; the cluster is etcd, kube-apiserver and the
// service account controller only (every namespace needs its default
// service account).
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
	"github.com/yunikorn-userinfo/userinfo/e2e/internal/kbuild"
)

// Result is one Pod count's measurements.
type Result struct {
	Pods       int `json:"pods"`
	Namespaces int `json:"namespaces"`
	// PodBytes is the mean JSON size of a stored Pod (managedFields in).
	PodBytes int `json:"pod_bytes"`
	// FillSeconds is how long writing this step's Pods took.
	FillSeconds float64 `json:"fill_seconds"`
	// ReadyMS: exec to /readyz 200; SyncMS: the Pod cache's sync alone,
	// as serve logs it.
	ReadyMS float64 `json:"ready_ms"`
	SyncMS  float64 `json:"sync_ms"`
	// RSS after the sync, after the load, and the peak (VmHWM).
	RSSReadyMiB float64 `json:"rss_ready_mib"`
	RSSLoadMiB  float64 `json:"rss_load_mib"`
	RSSPeakMiB  float64 `json:"rss_peak_mib"`
	// HeapMiB is the Go heap in use after the load (serve's
	// go_memstats_heap_inuse_bytes); GoMemLimit the GOMEMLIMIT serve ran
	// with ("" none).
	HeapMiB float64 `json:"heap_mib"`
	// CacheMiB is what the watch caches hold outside the Go heap after
	// the load (serve's yunikorn_userinfo_cache_offheap_bytes).
	CacheMiB   float64 `json:"cache_offheap_mib"`
	GoMemLimit string  `json:"gomemlimit,omitempty"`
	// Watches: the API server's Pod watches opened by the replica.
	Watches int `json:"watches"`
	// The load: reviews sent at Rate for Seconds after a warm-up.
	Rate     int     `json:"rate"`
	Seconds  float64 `json:"seconds"`
	Sent     int     `json:"sent"`
	Allowed  int     `json:"allowed"`
	Denied   int     `json:"denied"`
	Errors   int     `json:"errors"`
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
	MaxMS    float64 `json:"max_ms"`
	Denial   string  `json:"first_denial,omitempty"`
	Machine  string  `json:"machine"`
	Replicas int     `json:"replicas"`
	// The denial-of-service reproduction (-fat-pods, -idless).
	FatPods   int  `json:"fat_pods,omitempty"`
	FatLabels int  `json:"fat_labels,omitempty"`
	Idless    bool `json:"idless,omitempty"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

type options struct {
	steps       []int
	namespaces  int
	podBytes    int
	rate        int
	duration    time.Duration
	warmup      time.Duration
	serve       string
	out         string
	writers     int
	connections int
	goMemLimits []string
	// The denial-of-service reproduction: fatPods gated Pods with
	// fatLabels labels each in the first namespace, and (idless) a third
	// of the reviews a Pod without an application ID there.
	fatPods, fatLabels int
	idless             bool
	settings           string
	// Bounds a step must hold (0: none): the peak RSS, and no review
	// failing (a 500 or 503, a timeout).
	maxRSSMiB float64
	noErrors  bool
}

func run(ctx context.Context) error {
	var o options
	var steps string
	flag.StringVar(&steps, "pods", "1000,10000,30000,100000", "Pod counts to measure, ascending")
	flag.IntVar(&o.namespaces, "namespaces", 1000, "namespaces the Pods are spread over")
	flag.IntVar(&o.podBytes, "pod-bytes", 5000, "about how large each Pod's JSON is")
	flag.IntVar(&o.rate, "rate", 500, "admission reviews per second")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured load per step")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before measuring")
	flag.StringVar(&o.serve, "serve", "../build/yunikorn-userinfo", "the yunikorn-userinfo binary")
	flag.StringVar(&o.out, "out", "../build/bench/scale.json", "results file")
	flag.IntVar(&o.writers, "writers", 48, "concurrent Pod creates")
	flag.IntVar(&o.connections, "connections", 8, "connections of the review load")
	flag.IntVar(&o.fatPods, "fat-pods", 0, "gated Pods stuffed with -fat-labels labels each, written before the steps in the first namespace")
	flag.IntVar(&o.fatLabels, "fat-labels", 16000, "labels of each -fat-pods Pod")
	flag.Float64Var(&o.maxRSSMiB, "max-rss-mib", 0, "fail a step whose peak RSS exceeds this (0: no bound)")
	flag.BoolVar(&o.noErrors, "no-errors", false, "fail a step in which a review failed (not 200, or timed out)")
	flag.StringVar(&o.settings, "settings", `{"applicationOwnership":"enforce","trustPodTokens":true}`,
		"serve's policy settings (JSON); the owner index is built from whatever of them feeds the ownership options")
	flag.BoolVar(&o.idless, "idless", false, "make a third of the reviews Pods without an application ID in the first namespace (its generated application)")
	var limits string
	flag.StringVar(&limits, "gomemlimits", "", `GOMEMLIMIT values of serve, comma-separated, one replica measured with each per step `+
		`("204MiB" is what serve sets itself under the chart's 256 MiB container limit; "" none)`)
	flag.Parse()
	o.goMemLimits = strings.Split(limits, ",")
	for _, s := range strings.Split(steps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || (len(o.steps) > 0 && n <= o.steps[len(o.steps)-1]) {
			return fmt.Errorf("-pods: %q is not an ascending list of counts", steps)
		}
		o.steps = append(o.steps, n)
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
		BinDir:       bin.Dir,
		Users:        []cluster.User{{Name: "admin", Groups: []string{"system:masters"}}},
		Controllers:  []string{"serviceaccount-controller"},
		PidRoot:      filepath.Join(cacheRoot, "yunikorn-userinfo", "scalebench-pids"),
		StartTimeout: 15 * time.Minute, // a replica syncing 100,000 Pods on a busy machine
		Log:          log,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			log.Warn("stop the cluster", "error", err)
		}
	}()
	cfg, err := c.Config("admin")
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = 5000, 5000, time.Minute
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kubeconfig, err := c.WriteKubeconfig("admin")
	if err != nil {
		return err
	}
	settings := filepath.Join(c.Dir, "scale-settings.json")
	if err := os.WriteFile(settings, []byte(o.settings), 0o600); err != nil {
		return err
	}
	f := &filler{cs: cs, o: o, log: log}
	if err := f.namespaces(ctx); err != nil {
		return err
	}
	if err := f.fat(ctx); err != nil {
		return err
	}
	var results []Result
	for _, n := range o.steps {
		began := time.Now()
		if err := f.fill(ctx, n); err != nil {
			return err
		}
		fill := time.Since(began).Seconds()
		log.Info("pods written", "pods", n, "seconds", fill)
		podBytes, err := f.podBytes(ctx)
		if err != nil {
			return err
		}
		for _, limit := range o.goMemLimits {
			// serve only: the cluster's processes have started.
			if err := setGoMemLimit(limit); err != nil {
				return err
			}
			r := Result{Pods: n, Namespaces: o.namespaces, PodBytes: podBytes, FillSeconds: fill, Rate: o.rate, Replicas: 1, Machine: machine(),
				GoMemLimit: limit, Idless: o.idless}
			if o.fatPods > 0 {
				r.FatPods, r.FatLabels = o.fatPods, o.fatLabels
			}
			if err := measure(ctx, c, &r, o, f, kubeconfig, settings, log); err != nil {
				return fmt.Errorf("%d pods: %w", n, err)
			}
			log.Info("step", "pods", n, "gomemlimit", limit, "ready_ms", r.ReadyMS, "sync_ms", r.SyncMS, "rss_mib", r.RSSLoadMiB, "peak_mib", r.RSSPeakMiB,
				"heap_mib", r.HeapMiB, "cache_offheap_mib", r.CacheMiB, "watches", r.Watches, "p50_ms", r.P50MS, "p99_ms", r.P99MS, "allowed", r.Allowed, "denied", r.Denied, "errors", r.Errors)
			results = append(results, r)
			if err := o.bounds(r); err != nil {
				_ = write(o.out, results)
				return fmt.Errorf("%d pods: %w", n, err)
			}
		}
		if err := write(o.out, results); err != nil {
			return err
		}
	}
	return nil
}

// bounds checks a step against -max-rss-mib and -no-errors.
func (o options) bounds(r Result) error {
	if o.maxRSSMiB > 0 && r.RSSPeakMiB > o.maxRSSMiB {
		return fmt.Errorf("peak RSS %.0f MiB is over the bound of %.0f MiB", r.RSSPeakMiB, o.maxRSSMiB)
	}
	if o.noErrors && r.Errors > 0 {
		return fmt.Errorf("%d of %d reviews failed", r.Errors, r.Sent)
	}
	return nil
}

func setGoMemLimit(limit string) error {
	if limit == "" {
		return os.Unsetenv("GOMEMLIMIT")
	}
	return os.Setenv("GOMEMLIMIT", limit)
}

func write(path string, results []Result) error {
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs, %s, %s/%s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH)
}

// pod is what the load needs of a written Pod.
type pod struct {
	ns, name, uid, app, user string
}

type filler struct {
	cs   *kubernetes.Clientset
	o    options
	log  *slog.Logger
	pods []pod
}

func nsName(i int) string { return fmt.Sprintf("scale-%04d", i) }

// namespaces creates the namespaces and waits for their default service
// accounts.
func (f *filler) namespaces(ctx context.Context) error {
	err := parallel(ctx, f.o.writers, f.o.namespaces, func(ctx context.Context, i int) error {
		_, err := f.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(i)}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create namespaces: %w", err)
	}
	return cluster.Poll(ctx, 5*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		list, err := f.cs.CoreV1().ServiceAccounts("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=default"})
		if err != nil {
			return false, nil
		}
		return len(list.Items) >= f.o.namespaces, nil
	})
}

// Applications have ten Pods each, in one namespace, all of one user's.
func appOf(i int) int              { return i / 10 }
func (f *filler) nsOf(app int) int { return app % f.o.namespaces }
func userOf(app int) string        { return "user-" + strconv.Itoa(app%100) }
func appID(app int) string         { return "app-" + strconv.Itoa(app) }
func podName(i int) string         { return "p-" + strconv.Itoa(i) }
func userInfo(user string) string  { return `{"user":"` + user + `","groups":["dev"]}` }
func padding(bytes int) []corev1.EnvVar {
	var env []corev1.EnvVar
	for i := 0; bytes > 0; i++ {
		n := min(bytes, 200)
		env = append(env, corev1.EnvVar{Name: "PAD_" + strconv.Itoa(i), Value: strings.Repeat("x", n)})
		bytes -= n + 30
	}
	return env
}

// fill writes Pods until there are n.
func (f *filler) fill(ctx context.Context, n int) error {
	from := len(f.pods)
	made := make([]pod, n-from)
	env := padding(f.o.podBytes - 2200) // what the rest of a stored Pod takes, managedFields in
	var done atomic.Int64
	err := parallel(ctx, f.o.writers, n-from, func(ctx context.Context, k int) error {
		i := from + k
		app := appOf(i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: podName(i), Namespace: nsName(f.nsOf(app)),
				Labels: map[string]string{"applicationId": appID(app), "queue": "root.default", "app.kubernetes.io/name": "bench",
					"app.kubernetes.io/instance": appID(app), "pod-template-hash": "5d8f7c9b4"},
				Annotations: map[string]string{"yunikorn.apache.org/user.info": userInfo(userOf(app)),
					"kubectl.kubernetes.io/default-container": "main"},
			},
			Spec: corev1.PodSpec{
				SchedulerName:                "yunikorn",
				AutomountServiceAccountToken: new(bool),
				Containers: []corev1.Container{{Name: "main", Image: "registry.example/bench:1.0", Command: []string{"sleep", "infinity"}, Env: env,
					Resources: corev1.ResourceRequirements{}}},
			},
		}
		got, err := f.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		made[k] = pod{ns: got.Namespace, name: got.Name, uid: string(got.UID), app: appID(app), user: userOf(app)}
		if d := done.Add(1); d%10000 == 0 {
			f.log.Info("writing pods", "written", from+int(d), "of", n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	f.pods = append(f.pods, made...)
	return nil
}

// fat writes the gated, label-stuffed Pods of -fat-pods: each costs a
// list that reads whole Pods its size, and YuniKorn puts a gated Pod in
// no application.
func (f *filler) fat(ctx context.Context) error {
	if f.o.fatPods == 0 {
		return nil
	}
	err := parallel(ctx, 4, f.o.fatPods, func(ctx context.Context, i int) error {
		l := make(map[string]string, f.o.fatLabels+1)
		for j := range f.o.fatLabels {
			l[fmt.Sprintf("stuffing-%05d", j)] = "x"
		}
		l["applicationId"] = "fat-" + strconv.Itoa(i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "fat-" + strconv.Itoa(i), Namespace: nsName(0), Labels: l,
				Annotations: map[string]string{"yunikorn.apache.org/user.info": userInfo("mallory")}},
			Spec: corev1.PodSpec{SchedulerName: "yunikorn", AutomountServiceAccountToken: new(bool),
				SchedulingGates: []corev1.PodSchedulingGate{{Name: "bench.example/hold"}},
				Containers:      []corev1.Container{{Name: "main", Image: "registry.example/bench:1.0"}}},
		}
		_, err := f.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create the label-stuffed Pods: %w", err)
	}
	f.log.Info("label-stuffed gated pods written", "pods", f.o.fatPods, "labels", f.o.fatLabels)
	return nil
}

// podBytes is the JSON size of a stored Pod, as a watch sends it.
func (f *filler) podBytes(ctx context.Context) (int, error) {
	p := f.pods[len(f.pods)-1]
	raw, err := f.cs.CoreV1().RESTClient().Get().Namespace(p.ns).Resource("pods").Name(p.name).DoRaw(ctx)
	return len(raw), err
}

// parallel runs do(0..n-1) on workers goroutines; the first error stops it.
func parallel(ctx context.Context, workers, n int, do func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := do(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// measure starts one replica, waits for it, loads it and stops it.
func measure(ctx context.Context, c *cluster.Cluster, r *Result, o options, f *filler, kubeconfig, settings string, log *slog.Logger) error {
	before, err := podWatches(ctx, f.cs)
	if err != nil {
		return err
	}
	began := time.Now()
	w, err := c.StartWebhook(ctx, cluster.WebhookOptions{Name: "scale-" + strconv.Itoa(r.Pods), Binary: o.serve, SettingsFile: settings,
		ExtraArgs: []string{"--kubeconfig", kubeconfig, "--sync-before-ready", "v1/Pod"}})
	if err != nil {
		return err
	}
	defer func() {
		if err := w.Stop(); err != nil {
			log.Warn("stop serve", "error", err)
		}
	}()
	r.ReadyMS = float64(time.Since(began).Microseconds()) / 1000
	r.SyncMS = syncMS(w.Process.LogFile)
	pid := w.Process.Pid()
	if r.RSSReadyMiB, _, err = rss(pid); err != nil {
		return err
	}
	after, err := podWatches(ctx, f.cs)
	if err != nil {
		return err
	}
	r.Watches = after - before
	if err := load(ctx, w.BaseURL, r, o, f); err != nil {
		return err
	}
	if r.RSSLoadMiB, r.RSSPeakMiB, err = rss(pid); err != nil {
		return err
	}
	r.HeapMiB = metricMiB(ctx, w.Process.Args, "go_memstats_heap_inuse_bytes")
	r.CacheMiB = metricMiB(ctx, w.Process.Args, "yunikorn_userinfo_cache_offheap_bytes")
	return nil
}

// metricMiB reads a gauge of bytes from serve's metrics address (its
// --metrics-listen), in MiB; 0 when it cannot.
func metricMiB(ctx context.Context, args []string, name string) float64 {
	i := slices.Index(args, "--metrics-listen")
	if i < 0 || i+1 >= len(args) {
		return 0
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+args[i+1]+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			b, _ := strconv.ParseFloat(v, 64)
			return b / (1 << 20)
		}
	}
	return 0
}

// syncMS reads the "caches synced" line of serve's JSON log.
func syncMS(logFile string) float64 {
	b, err := os.ReadFile(logFile)
	if err != nil {
		return 0
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		var line struct {
			Msg      string  `json:"msg"`
			Duration float64 `json:"duration_ms"`
		}
		if json.Unmarshal(l, &line) == nil && line.Msg == "caches synced" {
			return line.Duration
		}
	}
	return 0
}

// rss reads VmRSS and VmHWM of pid, in MiB.
func rss(pid int) (cur, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fs[1], 64)
		switch fs[0] {
		case "VmRSS:":
			cur = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return cur, peak, nil
}

// podWatches is the API server's count of open Pod watches.
func podWatches(ctx context.Context, cs *kubernetes.Clientset) (int, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the API server's metrics: %w", err)
	}
	n := 0.0
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "apiserver_longrunning_requests{") && strings.Contains(l, `resource="pods"`) &&
			strings.Contains(l, `verb="WATCH"`) && !strings.Contains(l, `subresource="`+"log") {
			v, _ := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64)
			n += v
		}
	}
	return int(n), nil
}

// reviews are the load's AdmissionReviews: half a user creating a Pod in
// their own application (applicationOwnership lists the application's
// Pods, the policy injects the annotation), half a Pod created with the
// bound token of a Pod that is its controller and carries its identity
// (the pod-token proof reads that Pod).
func reviews(f *filler, n int) [][]byte {
	rng := rand.New(rand.NewPCG(7, 11))
	out := make([][]byte, n)
	for i := range out {
		p := f.pods[rng.IntN(len(f.pods))]
		uid := fmt.Sprintf("r-%d", i)
		var req map[string]any
		obj := map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "new-" + uid, "namespace": p.ns, "labels": map[string]any{"applicationId": p.app}},
			"spec":     map[string]any{"schedulerName": "yunikorn", "containers": []any{map[string]any{"name": "main", "image": "registry.example/bench:1.0"}}}}
		user := map[string]any{"username": p.user, "groups": []any{"dev", "system:authenticated"}}
		if f.o.idless && i%3 == 2 {
			// A Pod without an ID in the first namespace: YuniKorn puts
			// it in that namespace's generated application, which no
			// bench Pod is in (they all name one).
			p.ns = nsName(0)
			meta := obj["metadata"].(map[string]any)
			meta["namespace"] = p.ns
			delete(meta, "labels")
		} else if i%2 == 1 {
			meta := obj["metadata"].(map[string]any)
			meta["annotations"] = map[string]any{"yunikorn.apache.org/user.info": userInfo(p.user)}
			meta["ownerReferences"] = []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": p.name, "uid": p.uid, "controller": true}}
			// The bound token of a Pod is its service account's: the API
			// server gives every bench Pod "default".
			user = map[string]any{"username": "system:serviceaccount:" + p.ns + ":default", "groups": []any{"system:serviceaccounts", "system:authenticated"},
				"extra": map[string]any{"authentication.kubernetes.io/pod-name": []any{p.name}, "authentication.kubernetes.io/pod-uid": []any{p.uid}}}
		}
		req = map[string]any{"uid": uid, "kind": map[string]any{"group": "", "version": "v1", "kind": "Pod"},
			"resource": map[string]any{"group": "", "version": "v1", "resource": "pods"}, "namespace": p.ns, "operation": "CREATE",
			"userInfo": user, "object": obj, "options": map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}
		b, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
		out[i] = b
	}
	return out
}

// load sends reviews at o.rate (each timed from when it was due, so a
// stall counts) over o.connections keep-alive connections.
func load(ctx context.Context, base string, r *Result, o options, f *filler) error {
	bodies := reviews(f, 4000)
	total := int((o.warmup + o.duration).Seconds() * float64(o.rate))
	warm := int(o.warmup.Seconds() * float64(o.rate))
	due := make(chan int, total)
	start := time.Now()
	go func() {
		defer close(due)
		for i := range total {
			at := start.Add(time.Duration(i) * time.Second / time.Duration(o.rate))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			}
			due <- i
		}
	}()
	lat := make([]time.Duration, total)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range o.connections {
		wg.Go(func() {
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback bench server
				MaxIdleConnsPerHost: 1, ForceAttemptHTTP2: false}}
			for i := range due {
				at := start.Add(time.Duration(i) * time.Second / time.Duration(o.rate))
				resp, err := hc.Post(base+"/mutate", "application/json", bytes.NewReader(bodies[i%len(bodies)]))
				var out struct {
					Response struct {
						Allowed bool `json:"allowed"`
						Status  struct {
							Message string `json:"message"`
						} `json:"status"`
					} `json:"response"`
				}
				if err == nil {
					body, rerr := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					if rerr == nil && resp.StatusCode == http.StatusOK {
						err = json.Unmarshal(body, &out)
					} else {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				took := time.Since(at)
				mu.Lock()
				lat[i] = took
				if i >= warm {
					switch {
					case err != nil:
						r.Errors++
					case out.Response.Allowed:
						r.Allowed++
					default:
						r.Denied++
						if r.Denial == "" {
							r.Denial = out.Response.Status.Message
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	measured := slices.Clone(lat[warm:])
	slices.Sort(measured)
	r.Sent = len(measured)
	r.Seconds = o.duration.Seconds()
	q := func(p float64) float64 {
		return float64(measured[min(len(measured)-1, int(p*float64(len(measured))))].Microseconds()) / 1000
	}
	r.P50MS, r.P99MS, r.MaxMS = q(0.50), q(0.99), float64(measured[len(measured)-1].Microseconds())/1000
	return nil
}
