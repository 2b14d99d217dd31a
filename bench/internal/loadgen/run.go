package loadgen

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure Run. Zero values are replaced by the documented
// defaults in setDefaults.
type Options struct {
	// URL is the webhook endpoint. Like kube-apiserver, Run adds a timeout
	// query parameter (the request timeout) unless the URL has one.
	// Required.
	URL string
	// TLSConfig is the client's TLS configuration: trusted roots, client
	// certificate. Default: system roots, TLS 1.2 at least.
	TLSConfig *tls.Config
	// Payloads are posted round robin. Required.
	Payloads []Payload
	// Connections bounds both the TCP connections and the requests in
	// flight: there is one worker per connection. Default 32, at most
	// MaxConnections.
	Connections int
	// Rate is the number of requests per second, sent open loop at
	// scheduled times. Zero means saturation: closed loop, each worker
	// sending as soon as it has its previous answer.
	Rate float64
	// Duration is the measured window. Default 10s.
	Duration time.Duration
	// Warmup precedes the measured window; its requests are verified but
	// not measured. Default none.
	Warmup time.Duration
	// Timeout bounds each request, from sending it to reading its answer,
	// and is what the URL's timeout parameter says. At a fixed rate, a send
	// already this far behind schedule is counted as late instead of being
	// made, which bounds the run. Default 10s.
	Timeout time.Duration
	// ServerPID, when positive, is the server process whose CPU time and
	// RSS are read from /proc around the measured window.
	ServerPID int
	// MaxSamples bounds the latency samples kept, 8 bytes each; later ones
	// are counted as dropped. Default 10,000,000.
	MaxSamples int
	// MaxResponseBytes bounds a response body. Default 4 MiB.
	MaxResponseBytes int64
}

// MaxConnections bounds Options.Connections: each is a goroutine, a socket
// and a TLS session.
const MaxConnections = 10_000

func (o *Options) setDefaults() {
	if o.Connections == 0 {
		o.Connections = 32
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxSamples == 0 {
		o.MaxSamples = 10_000_000
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = 4 << 20
	}
	if o.TLSConfig == nil {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
}

func (o *Options) validate() error {
	switch {
	case o.URL == "":
		return errors.New("no url")
	case len(o.Payloads) == 0:
		return errors.New("no payloads")
	case o.Connections < 1 || o.Connections > MaxConnections:
		return fmt.Errorf("connections %d: want 1 to %d", o.Connections, MaxConnections)
	case o.Rate < 0 || o.Rate > 1e9:
		return fmt.Errorf("rate %g: want 0 (saturation) to 1e9 per second", o.Rate)
	case o.Duration < 0 || o.Warmup < 0 || o.Timeout < 0:
		return errors.New("negative duration, warmup or timeout")
	case o.MaxSamples < 0 || o.MaxResponseBytes < 0:
		return errors.New("negative sample or response bound")
	}
	return nil
}

// requestURL adds the timeout parameter kube-apiserver sends.
func requestURL(raw string, timeout time.Duration) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse url: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", fmt.Errorf("url %q: want https:// (or http://)", raw)
	}
	q := u.Query()
	if !q.Has("timeout") {
		q.Set("timeout", timeout.String())
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// Run sends load as opts say, and reports it. Its error is for a run that
// could not start; failed requests are counted in the Result. When ctx is
// cancelled the run stops early and the Result, marked Interrupted, covers
// what was done.
func Run(ctx context.Context, opts Options) (*Result, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("check options: %w", err)
	}
	target, err := requestURL(opts.URL, opts.Timeout)
	if err != nil {
		return nil, err
	}
	uids, err := newUIDSource()
	if err != nil {
		return nil, err
	}
	var serverBefore procSample
	if opts.ServerPID > 0 {
		if serverBefore, err = readProc(opts.ServerPID); err != nil {
			return nil, fmt.Errorf("sample server: %w", err)
		}
	}
	endpoint, err := newEndpoint(target, opts.TLSConfig, opts.Timeout)
	if err != nil {
		return nil, err
	}

	r := &Result{
		URL:         target,
		Mode:        ModeSaturation,
		Connections: opts.Connections,
		Duration:    opts.Duration,
		Warmup:      opts.Warmup,
		Payloads:    len(opts.Payloads),
		GoVersion:   runtime.Version(),
		GOOS:        runtime.GOOS,
		GOARCH:      runtime.GOARCH,
		GOMAXPROCS:  runtime.GOMAXPROCS(0),
		NumCPU:      runtime.NumCPU(),
	}
	if opts.Rate > 0 {
		r.Mode, r.Rate = ModeRate, opts.Rate
	}
	for _, p := range opts.Payloads {
		if p.Expect != nil {
			r.VerdictChecked++
		}
	}

	start := time.Now()
	s := &schedule{start: start, measure: start.Add(opts.Warmup), end: start.Add(opts.Warmup + opts.Duration)}
	if opts.Rate > 0 {
		s.interval = 1e9 / opts.Rate
	}
	workers := make([]*worker, opts.Connections)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{
			opts:       &opts,
			sched:      s,
			endpoint:   endpoint,
			uids:       uids,
			maxSamples: opts.MaxSamples / opts.Connections,
		}
		workers[i] = w
		wg.Go(func() { w.run(ctx) })
	}

	// Sample CPU time at the edges of the measured window, from here rather
	// than from the workers, so the samples are on time whatever the load.
	var cpu0, cpu1 time.Duration
	var srv0, srv1 procSample
	var srvErr error
	sampleServer := func(dst *procSample) {
		if opts.ServerPID > 0 && srvErr == nil {
			*dst, srvErr = readProc(opts.ServerPID)
		}
	}
	// The window is cut short when ctx ends; it has not begun if ctx ended
	// in the warmup.
	window := time.Duration(0)
	if sleepUntil(ctx, s.measure) {
		cpu0, _ = selfUsage()
		sampleServer(&srv0)
		sleepUntil(ctx, s.end)
		window = min(time.Since(s.measure), opts.Duration)
		cpu1, _ = selfUsage()
		sampleServer(&srv1)
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	r.Interrupted = ctx.Err() != nil

	var samples []time.Duration
	for _, w := range workers {
		r.Counts.add(w.measured)
		r.WarmupCounts.add(w.warmup)
		samples = append(samples, w.samples...)
		r.Latency.Dropped += w.dropped
		for c, msg := range w.examples {
			if msg != "" {
				if r.ErrorExamples == nil {
					r.ErrorExamples = map[string]string{}
				}
				if _, ok := r.ErrorExamples[classNames[c]]; !ok {
					r.ErrorExamples[classNames[c]] = msg
				}
			}
		}
	}
	dropped := r.Latency.Dropped
	r.Latency = summarize(samples)
	r.Latency.Dropped = dropped
	if opts.Rate > 0 {
		r.Scheduled = r.Sent + r.Errors.Late
	}
	if window > 0 {
		r.Throughput = float64(r.Completed) / window.Seconds()
	}

	_, r.Loadgen.MaxRSS = selfUsage()
	if window > 0 {
		r.Loadgen.CPUSeconds = (cpu1 - cpu0).Seconds()
		r.Loadgen.CPUPer1000 = per1000(r.Loadgen.CPUSeconds, r.Sent)
	}
	if opts.ServerPID > 0 {
		r.Server = serverUsage(opts.ServerPID, r.Completed, window > 0, serverBefore, srv0, srv1, srvErr)
	}
	return r, nil
}

func serverUsage(pid int, completed int64, window bool, before, s0, s1 procSample, err error) *ServerUsage {
	u := &ServerUsage{PID: pid, RSSBefore: before.rss, PeakRSSBefore: before.hwm}
	after, afterErr := readProc(pid)
	if err == nil {
		err = afterErr
	}
	if err != nil {
		u.Error = err.Error()
		return u
	}
	// The kernel's VmHWM can lag VmRSS by a few pages in a busy process,
	// so an earlier sample may have seen a higher peak: a peak since start
	// never goes down.
	u.RSSAfter, u.PeakRSS = after.rss, max(after.hwm, before.hwm)
	if window {
		u.CPUSeconds = (s1.cpu - s0.cpu).Seconds()
		u.CPUPer1000 = per1000(u.CPUSeconds, completed)
	}
	return u
}

func per1000(seconds float64, n int64) float64 {
	if n == 0 {
		return 0
	}
	return seconds * 1000 / float64(n)
}

// sleepUntil waits for t, and reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// schedule is the time plan of a run, shared by its workers.
type schedule struct {
	start, measure, end time.Time
	// interval is the time between send times in nanoseconds; 0 at
	// saturation.
	interval float64
	// next is the next request sequence number to claim: at a fixed rate,
	// request seq is due at start + seq*interval.
	next atomic.Uint64
}

// worker sends requests on one connection's worth of concurrency and
// tallies them, unshared until the run is over.
type worker struct {
	opts     *Options
	sched    *schedule
	endpoint *endpoint
	conn     *conn // nil until the first request, and after a failed one
	uids     *uidSource

	warmup, measured Counts
	samples          []time.Duration
	maxSamples       int
	dropped          int64
	examples         [numClasses]string

	uid  []byte
	resp bytes.Buffer
}

func (w *worker) run(ctx context.Context) {
	defer func() {
		if w.conn != nil {
			w.conn.close()
		}
	}()
	s := w.sched
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for ctx.Err() == nil {
		seq := s.next.Add(1) - 1
		var due time.Time // when latency starts
		if s.interval > 0 {
			due = s.start.Add(time.Duration(float64(seq) * s.interval))
			if !due.Before(s.end) {
				return
			}
			if d := time.Until(due); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					timer.Stop()
					return
				case <-timer.C:
				}
			}
		} else {
			due = time.Now()
			if !due.Before(s.end) {
				return
			}
		}
		counts := &w.warmup
		measured := !due.Before(s.measure)
		if measured {
			counts = &w.measured
		}
		if s.interval > 0 && time.Since(due) > w.opts.Timeout {
			w.fail(counts, classLate, fmt.Sprintf("request %d was more than %s behind schedule", seq, w.opts.Timeout))
			continue
		}
		counts.Sent++
		class, msg := w.post(ctx, seq)
		latency := time.Since(due)
		if class != classOK {
			if ctx.Err() != nil {
				// Interrupted, not failed: the request was cancelled.
				counts.Sent--
				return
			}
			w.fail(counts, class, msg)
			continue
		}
		counts.Completed++
		if measured {
			if len(w.samples) < w.maxSamples {
				w.samples = append(w.samples, latency)
			} else {
				w.dropped++
			}
		}
	}
}

func (w *worker) fail(c *Counts, class errorClass, msg string) {
	c.Errors.count(class)
	if w.examples[class] == "" {
		w.examples[class] = msg
	}
}

// classOK marks a verified answer.
const classOK errorClass = -1

// review is the part of an AdmissionReview answer that is checked.
type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Response   *struct {
		UID     string `json:"uid"`
		Allowed *bool  `json:"allowed"`
	} `json:"response"`
}

// post sends request seq and verifies the answer.
func (w *worker) post(ctx context.Context, seq uint64) (errorClass, string) {
	p := &w.opts.Payloads[seq%uint64(len(w.opts.Payloads))]
	w.uid = w.uids.appendUID(w.uid[:0], seq)
	if w.conn == nil {
		c, err := w.endpoint.dial(ctx)
		if err != nil {
			return classTransport, fmt.Sprintf("post %s: connect: %v", p.Name, err)
		}
		w.conn = c
	}
	status, keep, err := w.conn.post(ctx, p.body(w.uid), &w.resp, w.opts.MaxResponseBytes)
	if err != nil || !keep {
		w.conn.close()
		w.conn = nil
	}
	if err != nil {
		return classTransport, fmt.Sprintf("post %s: %v", p.Name, err)
	}
	body := w.resp.Bytes()
	if status != http.StatusOK {
		return classHTTPStatus, fmt.Sprintf("%s: status %d: %s", p.Name, status, clip(body))
	}
	if int64(len(body)) > w.opts.MaxResponseBytes {
		return classBadBody, fmt.Sprintf("%s: answer larger than %d bytes", p.Name, w.opts.MaxResponseBytes)
	}
	var rv review
	if err := json.Unmarshal(body, &rv); err != nil {
		return classBadBody, fmt.Sprintf("%s: decode answer: %v: %s", p.Name, err, clip(body))
	}
	if rv.Kind != "AdmissionReview" || rv.APIVersion != "admission.k8s.io/v1" || rv.Response == nil || rv.Response.Allowed == nil {
		return classBadBody, fmt.Sprintf("%s: not an AdmissionReview v1 with response.allowed: %s", p.Name, clip(body))
	}
	if rv.Response.UID != string(w.uid) {
		return classUIDMismatch, fmt.Sprintf("%s: response.uid %q, sent %q", p.Name, rv.Response.UID, w.uid)
	}
	if p.Expect != nil && *rv.Response.Allowed != *p.Expect {
		return classVerdictMismatch, fmt.Sprintf("%s: allowed %t, want %t", p.Name, *rv.Response.Allowed, *p.Expect)
	}
	return classOK, ""
}

// clip shortens a body quoted in an error message.
func clip(b []byte) string {
	const limit = 200
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}
