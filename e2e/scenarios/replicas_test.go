package scenarios

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// webhookReplicas labels the namespace of TestReplicas: its webhook
// configurations point at the balancer in front of the replicas.
const webhookReplicas = "replicas"

// replicaIPs are the replicas' own loopback addresses, as Pods have
// addresses of their own.
var replicaIPs = []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}

// The load and the probes. The rate can be lowered on a busy machine with
// E2E_REPLICAS_RATE (creates per second); the result says what was reached.
const (
	defaultReplicasRate = 100
	loadWorkers         = 64
	// burstEvery: the creates of each such period are sent at once, as
	// controllers and batch submitters do, so the API server keeps
	// opening connections (its pool keeps 25 idle per webhook host) and
	// every phase sees new connections, not only those already open.
	burstEvery = 500 * time.Millisecond
	// deploymentEvery: one create in this many is a Deployment.
	deploymentEvery = 10
	// probeInterval: the readiness probe's period behind the balancer.
	probeInterval = time.Second
	// warmUp and coolDown: load before and after each disruption.
	warmUp   = 3 * time.Second
	coolDown = 4 * time.Second
	// killRecovery bounds how long after a kill -9 creates may still fail.
	killRecovery = 5 * time.Second
)

// TestReplicasSurviveDisruptionsUnderLoad runs three `serve` replicas with
// the chart's flags behind a balancer that behaves as kube-proxy in front
// of a Service's ready endpoints, registers the shipped webhook
// configurations for it, and, while a steady stream of Pod and Deployment
// creates reaches the API server, restarts the replicas one at a time
// (SIGTERM), kills one with SIGKILL, rotates the serving certificates,
// reloads the settings and moves the replicas and the caBundle to a new CA.
// Graceful restarts, rotations and reloads must fail no admission; a
// kill -9 may fail only the reviews that were on the killed replica or were
// sent to it before its endpoint was removed, and creates must succeed
// again within seconds.
//
// It runs alone, before the parallel scenarios: its numbers are measured,
// and its load would slow theirs.
func TestReplicasSurviveDisruptionsUnderLoad(t *testing.T) {
	startAlone(t)
	ctx := t.Context()
	flags := chartServeFlags(t)
	shutdownDelay, err := time.ParseDuration(flags["shutdown-delay"])
	require.NoError(t, err, "the chart's --shutdown-delay")
	shutdownTimeout, err := time.ParseDuration(flags["shutdown-timeout"])
	require.NoError(t, err, "the chart's --shutdown-timeout")

	// One settings file for all replicas, as one ConfigMap is mounted in
	// every Pod.
	settingsFile := filepath.Join(e2e.cluster.Dir, "settings-replicas.yaml")
	base, err := os.ReadFile(e2e.settingsFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(settingsFile, base, 0o600))

	// The API server calls a Service's endpoints over HTTP/1.1, one
	// connection per review in flight, but a loopback URL over HTTP/2, all
	// reviews on one connection: the webhook URL names the balancer by a
	// host name (from /etc/hosts) so that it is called as a Service is.
	host, err := cluster.LoopbackHostName()
	require.NoError(t, err)

	var replicas []*cluster.Webhook
	var backends []cluster.BalancerBackend
	for i, ip := range replicaIPs {
		args := []string{"--settings-reload-interval", "1s", "--cert-reload-interval", "1s"}
		for _, name := range []string{"validate-overlay", "instances", "timeout", "shutdown-delay", "shutdown-timeout"} {
			args = append(args, "--"+name, flags[name])
		}
		// They start without a shutdown delay, to measure what it is for;
		// the first rolling restart brings the chart's.
		setFlag(args, "shutdown-delay", "0s")
		wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
			Name: fmt.Sprintf("serve-replica-%d", i), Binary: e2e.serveBinary, SettingsFile: settingsFile,
			ListenIP: ip, DNSNames: []string{host}, ExtraArgs: args,
		})
		require.NoError(t, err, "start replica %d", i)
		t.Cleanup(func() { assert.NoError(t, wh.Stop(), "stop replica %d", i) })
		replicas = append(replicas, wh)
		backends = append(backends, cluster.BalancerBackend{Addr: wh.Addr, ReadyURL: wh.ReadyzURL})
	}
	// The CA the last phase rotates to, made now so the readiness probe
	// trusts it from the start.
	newCA := newRotationCA(t)
	probe, err := probeClient(e2e.cluster.PKI.CAPEM, newCA.pem)
	require.NoError(t, err)
	lb, err := cluster.StartBalancer(cluster.BalancerOptions{Backends: backends, Probe: probe, ProbeInterval: probeInterval})
	require.NoError(t, err, "start the balancer")
	t.Cleanup(func() { _ = lb.Close() })
	for i := range replicas {
		require.NoError(t, lb.WaitReady(ctx, i, true, 10*time.Second))
	}
	t.Logf("balancer at %s over %d replicas (--shutdown-delay=%s, readiness probed every %s)", lb.Addr, len(replicas), shutdownDelay, probeInterval)

	_, port, err := net.SplitHostPort(lb.Addr)
	require.NoError(t, err)
	service := &cluster.Webhook{BaseURL: "https://" + net.JoinHostPort(host, port)}
	t.Logf("webhook configurations call %s", service.BaseURL)
	mwc, err := e2e.registerWebhook(ctx, "yunikorn-userinfo-e2e-replicas", service, webhookReplicas)
	require.NoError(t, err)
	vwc, err := cluster.AdaptValidatingWebhookConfiguration(e2e.vwcManifest, "yunikorn-userinfo-e2e-replicas-validate", service.BaseURL,
		e2e.cluster.PKI.CAPEM, map[string]string{webhookLabel: webhookReplicas})
	require.NoError(t, err)
	_, err = client(admin).AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		bg := context.WithoutCancel(ctx)
		adm := client(admin).AdmissionregistrationV1()
		assert.NoError(t, adm.MutatingWebhookConfigurations().Delete(bg, mwc.Name, metav1.DeleteOptions{}))
		assert.NoError(t, adm.ValidatingWebhookConfigurations().Delete(bg, vwc.Name, metav1.DeleteOptions{}))
	})
	ns := newNamespace(t, webhookReplicas)

	cfg, err := e2e.cluster.Config(alice)
	require.NoError(t, err)
	cfg.QPS, cfg.Burst = 10000, 10000 // the generator sets the pace
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	rate := defaultReplicasRate
	if v := os.Getenv("E2E_REPLICAS_RATE"); v != "" {
		rate, err = strconv.Atoi(v)
		require.NoError(t, err, "E2E_REPLICAS_RATE")
	}
	want := e2e.identity[alice].annotation()
	var results []string
	t.Cleanup(func() { t.Logf("summary (creates/s asked %d):\n%s", rate, strings.Join(results, "\n")) })

	phase := func(name string, disrupt func(t *testing.T) time.Time) loadResult {
		var res loadResult
		t.Run(name, func(t *testing.T) {
			before := make([]cluster.BackendStats, len(replicas))
			for i := range replicas {
				before[i] = lb.Stats(i)
			}
			g := startLoad(ctx, cs, ns, strings.ToLower(name), rate)
			defer g.stop() // when the disruption failed the subtest
			time.Sleep(warmUp)
			res.disruptedAt = disrupt(t)
			res.disruptionDone = time.Now()
			time.Sleep(coolDown)
			res.loadStats = g.stop()
			var spread []string
			for i := range replicas {
				after := lb.Stats(i)
				res.dialFailed += after.Failed - before[i].Failed
				spread = append(spread, strconv.FormatInt(after.Forwarded-before[i].Forwarded, 10))
			}
			t.Logf("connections per replica: %s", strings.Join(spread, ", "))
			results = append(results, res.summary(name))
			t.Log(res.summary(name))
			for msg, n := range res.byError() {
				t.Logf("  %d× %s", n, msg)
			}
			// What succeeded went through the policy.
			p, err := client(admin).CoreV1().Pods(ns).Get(ctx, res.lastPod, metav1.GetOptions{})
			require.NoError(t, err, "the last Pod created")
			assert.Equal(t, want, p.Annotations[annotationKey], "the last Pod created carries the annotation")
		})
		return res
	}

	// Rolling restart: SIGTERM one replica, let it drain and exit, start
	// it again and wait until it is back among the endpoints, then the
	// next. Its endpoint is removed only when its readiness probe fails,
	// the slow path (a deleted Pod's endpoint is removed at once).
	rollingRestart := func(t *testing.T) time.Time {
		began := time.Now()
		for i, wh := range replicas {
			stopped := time.Now()
			require.NoError(t, wh.StopWithin(shutdownDelay+shutdownTimeout+5*time.Second), "SIGTERM replica %d", i)
			t.Logf("replica %d exited %.1fs after SIGTERM", i, time.Since(stopped).Seconds())
			setFlag(wh.Process.Args, "shutdown-delay", flags["shutdown-delay"])
			lb.Replaced(i)
			require.NoError(t, wh.Start(ctx), "restart replica %d", i)
			require.NoError(t, lb.WaitReady(ctx, i, true, 10*time.Second))
		}
		return began
	}
	// Without a shutdown delay (measured, not a goal): the listener closes
	// while the endpoint is still in place. The restarted replicas have
	// the chart's delay.
	phase("RollingRestartWithoutShutdownDelay", rollingRestart)
	rolling := phase("RollingRestart", rollingRestart)
	assert.Zero(t, rolling.failed(), "failed creates during the rolling restart")
	// The reviews were spread over the replicas, connection by connection.
	for i := range replicas {
		assert.Positive(t, lb.Stats(i).Forwarded, "connections to replica %d", i)
	}

	// kill -9 of one replica; it is started again at once, as the kubelet
	// restarts a crashed container.
	// The replica killed is the one with the most connections open.
	var (
		openAtKill, forwardedAtKill, sentBeforeRemoval int64
		removedAt                                      time.Time
	)
	killed := phase("Kill9", func(t *testing.T) time.Time {
		victim := 0
		for i := range replicas {
			if lb.Stats(i).Open > lb.Stats(victim).Open {
				victim = i
			}
		}
		atKill := lb.Stats(victim)
		openAtKill, forwardedAtKill = atKill.Open, atKill.Forwarded
		at := time.Now()
		require.NoError(t, replicas[victim].Process.Kill(), "kill -9 replica %d", victim)
		require.NoError(t, lb.WaitReady(ctx, victim, false, 10*time.Second))
		afterKill := lb.Stats(victim)
		sentBeforeRemoval = afterKill.Forwarded - forwardedAtKill
		for _, c := range afterKill.Changes {
			if !c.Ready && c.At.After(at) {
				removedAt = c.At
			}
		}
		t.Logf("replica %d killed; endpoint removed %.2fs after; %d connections were open through it, %d more sent to it before its endpoint went",
			victim, removedAt.Sub(at).Seconds(), openAtKill, sentBeforeRemoval)
		lb.Replaced(victim)
		require.NoError(t, replicas[victim].Start(ctx), "restart replica %d", victim)
		require.NoError(t, lb.WaitReady(ctx, victim, true, 10*time.Second))
		return at
	})
	// The webhook calls are HTTP/1.1, one at a time per connection, and
	// the API server does not retry a failed call: each failed create
	// failed on one connection that reached the killed replica, either
	// open at the kill (a review in flight, or one written as the kernel
	// closed it) or opened to it before its endpoint was removed, as
	// kube-proxy would route it. The error text does not tell the two
	// apart reliably (a reset can come before or after the API server's
	// connect returns), so the bound is on their sum, and in time.
	onNew := killed.onNewConnections()
	t.Logf("kill -9: %d failed: %d on connections refused or reset as they were made, %d on connections that were open (%d open at the kill, %d sent to it before its endpoint went, %d of them refused)",
		killed.failed(), onNew, killed.failed()-onNew, openAtKill, sentBeforeRemoval, killed.dialFailed)
	assert.LessOrEqual(t, int64(killed.failed()), openAtKill+sentBeforeRemoval,
		"failed creates after kill -9 beyond the connections open to the killed replica or sent to it before its endpoint went")
	if assert.False(t, removedAt.IsZero(), "the killed replica's endpoint removal was recorded") {
		for _, f := range killed.failures {
			assert.Falsef(t, f.started.After(removedAt), "a create begun %.2fs after the endpoint went failed: %s",
				f.started.Sub(removedAt).Seconds(), f.msg)
		}
	}
	if last, ok := killed.lastFailure(); ok {
		assert.LessOrEqual(t, last.Sub(killed.disruptedAt), killRecovery, "creates still failing long after the kill")
	}

	// Certificate rotation: a new key pair for every replica, each file
	// written in place (serve keeps the old pair until both match).
	var forwardedAfterRotation int64
	rotated := phase("CertRotation", func(t *testing.T) time.Time {
		defer func() {
			// Counted from here: connections opened once every replica
			// serves its new certificate.
			forwardedAfterRotation = 0
			for i := range replicas {
				forwardedAfterRotation -= lb.Stats(i).Forwarded
			}
		}()
		at := time.Now()
		for i, wh := range replicas {
			serial, err := wh.RotateCertificate()
			require.NoError(t, err)
			var last string
			err = cluster.Poll(ctx, 15*time.Second, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
				got, err := wh.ServingSerial(ctx)
				if err != nil {
					last = err.Error()
					return false, nil
				}
				last = "serving serial " + got.String()
				return got.Cmp(serial) == 0, nil
			})
			require.NoErrorf(t, err, "replica %d serves the new certificate (%s)", i, last)
		}
		return at
	})
	assert.Zero(t, rotated.failed(), "failed creates during the certificate rotation")
	for i := range replicas {
		forwardedAfterRotation += lb.Stats(i).Forwarded
	}
	t.Logf("connections opened after the rotation: %d", forwardedAfterRotation)
	assert.Positive(t, forwardedAfterRotation, "the API server opened connections (and so accepted the new certificates) after the rotation")

	// Settings reload: the shared settings file rewritten with one more
	// externalUsers pattern, applied by every replica.
	reloaded := phase("SettingsReload", func(t *testing.T) time.Time {
		var applied []float64
		for _, wh := range replicas {
			n, err := metricValue(ctx, wh.MetricsURL, `yunikorn_userinfo_settings_reloads_total{outcome="applied"}`)
			require.NoError(t, err)
			applied = append(applied, n)
		}
		at := time.Now()
		require.NoError(t, os.WriteFile(settingsFile, withExternalUser(t, base, "^e2e-reloaded$"), 0o600))
		for i, wh := range replicas {
			var last float64
			err := cluster.Poll(ctx, 15*time.Second, 200*time.Millisecond, func(context.Context) (bool, error) {
				n, err := metricValue(ctx, wh.MetricsURL, `yunikorn_userinfo_settings_reloads_total{outcome="applied"}`)
				last = n
				return err == nil && n > applied[i], nil
			})
			require.NoErrorf(t, err, "replica %d applies the new settings (applied reloads %v)", i, last)
		}
		return at
	})
	assert.Zero(t, reloaded.failed(), "failed creates during the settings reload")

	// CA rotation, in the order docs/OPERATIONS.md gives for a new CA
	// (a renewed cert-manager CA, or tls.existingSecret with tls.caBundle):
	// the new CA added to the webhook configurations' caBundle, every
	// replica's serving certificate replaced by one from the new CA, then
	// the old CA removed. It comes last: the suite's other clients trust
	// only the old CA.
	caRotated := phase("CARotation", func(t *testing.T) time.Time {
		at := time.Now()
		both := append(append([]byte{}, e2e.cluster.PKI.CAPEM...), newCA.pem...)
		setCABundle(ctx, t, mwc.Name, vwc.Name, both)
		time.Sleep(bundleSettle)
		for i, wh := range replicas {
			ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(replicaIPs[i])}
			newCA.rotateServing(t, wh, ips, []string{"localhost", host})
			var last error
			err := cluster.Poll(ctx, 15*time.Second, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
				last = newCA.servesFrom(ctx, wh)
				return last == nil, nil
			})
			require.NoErrorf(t, err, "replica %d serves a certificate from the new CA (%v)", i, last)
		}
		setCABundle(ctx, t, mwc.Name, vwc.Name, newCA.pem)
		time.Sleep(bundleSettle)
		return at
	})
	// Each caBundle change gives the API server a new client for the
	// webhook, and so new connections: those made after the old CA left
	// the bundle verified the replicas with the new CA alone, and the
	// phase's last create, made then, was stamped.
	assert.Zero(t, caRotated.failed(), "failed creates during the CA rotation")
}

// chartServeFlags returns serve's flags (--name=value) in the chart's
// Deployment.
func chartServeFlags(t *testing.T) map[string]string {
	t.Helper()
	standalone, err := cluster.ReadRendering(chartRendering(e2e.repo, "E2E_CHART_STANDALONE", "standalone.yaml"))
	require.NoError(t, err)
	deployment, err := standalone.One("Deployment")
	require.NoError(t, err)
	out := map[string]string{}
	for _, name := range []string{"validate-overlay", "instances", "timeout", "shutdown-delay", "shutdown-timeout"} {
		v, err := deploymentFlag(deployment, name)
		require.NoError(t, err)
		out[name] = v
	}
	return out
}

// setFlag sets the value of "--name value" in args.
func setFlag(args []string, name, value string) {
	for i := range len(args) - 1 {
		if args[i] == "--"+name {
			args[i+1] = value
		}
	}
}

// withExternalUser returns the settings with one more externalUsers
// pattern.
func withExternalUser(t *testing.T, settings []byte, pattern string) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, yaml.Unmarshal(settings, &m))
	users, _ := m["externalUsers"].([]any)
	m["externalUsers"] = append(users, pattern)
	out, err := yaml.Marshal(m)
	require.NoError(t, err)
	return out
}

// metricValue reads one sample (name{labels}, as exposed) from /metrics; an
// absent sample is 0.
func metricValue(ctx context.Context, url, sample string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, sc.Err()
}

// loadResult is what one phase's load saw.
type loadResult struct {
	loadStats
	disruptedAt, disruptionDone time.Time
	dialFailed                  int64 // connections to a replica that failed
}

func (r loadResult) summary(name string) string {
	secs := r.ended.Sub(r.began).Seconds()
	s := fmt.Sprintf("%s: %d creates in %.1fs (%.0f/s; %d not sent, the generator behind), %d failed",
		name, r.sent, secs, float64(r.sent)/secs, r.skipped, r.failed())
	if last, ok := r.lastFailure(); ok {
		s += fmt.Sprintf(", the last %.2fs after the disruption began", last.Sub(r.disruptedAt).Seconds())
	}
	s += fmt.Sprintf("; disruption took %.1fs; connections to a replica that failed: %d; latency p50 %s p99 %s max %s",
		r.disruptionDone.Sub(r.disruptedAt).Seconds(), r.dialFailed, r.quantile(0.5), r.quantile(0.99), r.quantile(1))
	return s
}

// loadStats counts one load run's creates.
type loadStats struct {
	began, ended time.Time
	sent         int
	skipped      int64
	failures     []createFailure
	latencies    []time.Duration
	lastPod      string
}

type createFailure struct {
	started, at time.Time
	msg         string
}

func (s loadStats) failed() int { return len(s.failures) }

func (s loadStats) lastFailure() (time.Time, bool) {
	if len(s.failures) == 0 {
		return time.Time{}, false
	}
	last := s.failures[0].at
	for _, f := range s.failures {
		if f.at.After(last) {
			last = f.at
		}
	}
	return last, true
}

// addrPort matches the addresses in a network error, which differ from
// one connection to the next.
var addrPort = regexp.MustCompile(`127\.\d+\.\d+\.\d+:\d+`)

// byError counts the failures by message, addresses left out.
func (s loadStats) byError() map[string]int {
	out := map[string]int{}
	for _, f := range s.failures {
		out[addrPort.ReplaceAllString(f.msg, "ADDR")]++
	}
	return out
}

// onNewConnections counts the failures of webhook calls whose connection
// could not be made (the API server's dial failed), rather than failing
// on a connection already open.
func (s loadStats) onNewConnections() int {
	n := 0
	for _, f := range s.failures {
		if strings.Contains(f.msg, ": dial tcp ") {
			n++
		}
	}
	return n
}

func (s loadStats) quantile(q float64) time.Duration {
	if len(s.latencies) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), s.latencies...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	i := int(q * float64(len(l)-1))
	return l[i].Round(time.Millisecond)
}

// loadGenerator creates Pods, and every deploymentEvery-th time a
// Deployment (of no replicas, so only its ReplicaSet follows), at a steady
// rate until stopped.
type loadGenerator struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	stats   loadStats
	skipped atomic.Int64
}

func startLoad(ctx context.Context, cs kubernetes.Interface, ns, prefix string, rate int) *loadGenerator {
	ctx, cancel := context.WithCancel(ctx)
	g := &loadGenerator{cancel: cancel, done: make(chan struct{})}
	g.stats.began = time.Now()
	jobs := make(chan int, 2*rate)
	var workers sync.WaitGroup
	for range loadWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := range jobs {
				g.create(context.WithoutCancel(ctx), cs, ns, fmt.Sprintf("%s-%d", prefix, i), i%deploymentEvery == deploymentEvery-1)
			}
		}()
	}
	go func() {
		defer close(g.done)
		defer workers.Wait()
		defer close(jobs)
		// rate creates per second, released every burstEvery.
		tick := time.NewTicker(burstEvery)
		defer tick.Stop()
		began := time.Now()
		next := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due := int(time.Since(began).Seconds() * float64(rate))
			for ; next < due; next++ {
				select {
				case jobs <- next:
				default:
					g.skipped.Add(1)
				}
			}
		}
	}()
	return g
}

func (g *loadGenerator) create(ctx context.Context, cs kubernetes.Interface, ns, name string, deployment bool) {
	began := time.Now()
	var err error
	if deployment {
		_, err = cs.AppsV1().Deployments(ns).Create(ctx, newDeployment(name, 0, nil), metav1.CreateOptions{})
	} else {
		_, err = cs.CoreV1().Pods(ns).Create(ctx, newPod(name, nil), metav1.CreateOptions{})
	}
	took := time.Since(began)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stats.sent++
	g.stats.latencies = append(g.stats.latencies, took)
	if err != nil {
		msg := err.Error()
		if len(msg) > 240 {
			msg = msg[:240]
		}
		g.stats.failures = append(g.stats.failures, createFailure{started: began, at: time.Now(), msg: msg})
		return
	}
	if !deployment {
		g.stats.lastPod = name
	}
}

// stop ends the load, waits for the creates in flight and returns the
// counts; it may be called again.
func (g *loadGenerator) stop() loadStats {
	g.cancel()
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.ended = time.Now()
	s.skipped = g.skipped.Load()
	return s
}
