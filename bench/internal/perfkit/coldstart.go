package perfkit

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/yunikorn-userinfo/userinfo/internal/testnet"
)

// ColdStartOptions configure ColdStart. Zero values are replaced by the
// documented defaults in setDefaults.
type ColdStartOptions struct {
	// Binary is the yunikorn-userinfo executable. Required.
	Binary string
	// Runs is the number of timed starts. Default 10.
	Runs int
	// CacheDir, when set, is passed as --cache-dir (wazero's compilation
	// cache on disk), and one start that fills it precedes the timed runs;
	// it is reported apart from them. It should be empty: a cache left by
	// an earlier build would make that start a cached one too.
	CacheDir string
	// Args are added to the serve command line, after the ones ColdStart
	// sets (--self-signed, --self-signed-dir, --listen, --metrics-listen and
	// --cache-dir). Default none.
	Args []string
	// Env is added to the environment the server inherits. Default none.
	Env []string
	// PollInterval is the pause between two /readyz probes. Default 2ms:
	// short against the times measured, long enough not to steal the
	// server's CPU on a small machine.
	PollInterval time.Duration
	// ReadyTimeout bounds one start, from exec to the first 200. Default
	// 10s.
	ReadyTimeout time.Duration
	// StopTimeout is how long a server gets to exit after SIGTERM before
	// it is killed. Default 5s.
	StopTimeout time.Duration
	// Logger receives progress (Debug) and warnings. Default: discard.
	Logger *slog.Logger
}

func (o *ColdStartOptions) setDefaults() {
	if o.Runs == 0 {
		o.Runs = 10
	}
	if o.PollInterval == 0 {
		o.PollInterval = 2 * time.Millisecond
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ColdStartResult is what ColdStart measured. Durations are nanoseconds in
// JSON.
type ColdStartResult struct {
	Binary string `json:"binary"`
	// Cache is set when the runs used a compilation cache directory.
	Cache    bool   `json:"cache"`
	CacheDir string `json:"cache_dir,omitempty"`
	// Filling is the start that filled the cache, with Cache only; it is
	// not among the samples.
	Filling time.Duration `json:"filling_ns,omitempty"`
	// CacheWasEmpty tells whether CacheDir was empty or absent before
	// Filling: if not, Filling did not compile.
	CacheWasEmpty bool `json:"cache_was_empty,omitempty"`
	// Samples are the timed starts, in run order: from just before exec to
	// the first 200 from /readyz.
	Samples []time.Duration `json:"samples_ns"`
	Min     time.Duration   `json:"min_ns"`
	P50     time.Duration   `json:"p50_ns"`
	Max     time.Duration   `json:"max_ns"`

	GoVersion string `json:"go_version"`
	NumCPU    int    `json:"num_cpu"`
}

// ColdStart starts `Binary serve --self-signed` Runs times, one at a time,
// on free 127.0.0.1 ports, and measures the time from exec to the first
// 200 from https /readyz. Each server is stopped with SIGTERM (SIGKILL
// after StopTimeout) before the next starts.
func ColdStart(ctx context.Context, opts ColdStartOptions) (*ColdStartResult, error) {
	opts.setDefaults()
	switch {
	case opts.Binary == "":
		return nil, errors.New("no binary")
	case opts.Runs < 1:
		return nil, fmt.Errorf("runs %d: want at least 1", opts.Runs)
	case opts.PollInterval < 0 || opts.ReadyTimeout < 0 || opts.StopTimeout < 0:
		return nil, errors.New("negative poll interval, ready timeout or stop timeout")
	}
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("find binary: %w", err)
	}
	work, err := os.MkdirTemp("", "perfkit-coldstart-")
	if err != nil {
		return nil, fmt.Errorf("create temporary directory: %w", err)
	}
	defer os.RemoveAll(work)

	res := &ColdStartResult{
		Binary: opts.Binary, Cache: opts.CacheDir != "", CacheDir: opts.CacheDir,
		GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(),
	}
	if opts.CacheDir != "" {
		entries, err := os.ReadDir(opts.CacheDir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read cache directory: %w", err)
		}
		res.CacheWasEmpty = len(entries) == 0
		if res.Filling, err = startOnce(ctx, &opts, filepath.Join(work, "fill")); err != nil {
			return nil, fmt.Errorf("fill the cache: %w", err)
		}
		opts.Logger.DebugContext(ctx, "cache filled", "duration", res.Filling)
	}
	for i := range opts.Runs {
		d, err := startOnce(ctx, &opts, filepath.Join(work, strconv.Itoa(i)))
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		opts.Logger.DebugContext(ctx, "ready", "run", i+1, "duration", d)
		res.Samples = append(res.Samples, d)
	}
	sorted := slices.Clone(res.Samples)
	slices.Sort(sorted)
	res.Min, res.Max = sorted[0], sorted[len(sorted)-1]
	res.P50 = sorted[(len(sorted)+1)/2-1] // nearest rank, as loadgen's percentiles
	return res, nil
}

// startOnce runs one server in dir and returns its time to ready.
func startOnce(ctx context.Context, opts *ColdStartOptions, dir string) (time.Duration, error) {
	ports, err := testnet.FreePorts(2)
	if err != nil {
		return 0, err
	}
	tlsDir := filepath.Join(dir, "tls")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	args := []string{"serve", "--self-signed", "--self-signed-dir", tlsDir,
		"--listen", addr, "--metrics-listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	if opts.CacheDir != "" {
		args = append(args, "--cache-dir", opts.CacheDir)
	}
	args = append(args, opts.Args...)
	cmd := exec.Command(opts.Binary, args...)
	cmd.Env = append(os.Environ(), opts.Env...)
	out := &tailBuffer{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = out, out

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start server: %w", err)
	}
	w := &waiter{done: make(chan struct{})}
	go func() {
		w.err = cmd.Wait()
		close(w.done)
	}()

	ready, err := pollReady(ctx, opts, "https://"+addr+"/readyz", filepath.Join(tlsDir, "ca.crt"), start, w)
	if err != nil {
		_ = stop(ctx, opts, cmd, w)
		return 0, fmt.Errorf("%w; server output: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	if err := stop(ctx, opts, cmd, w); err != nil {
		opts.Logger.WarnContext(ctx, "server did not stop cleanly", "error", err,
			"output", string(bytes.TrimSpace(out.Bytes())))
	}
	return ready.Sub(start), nil
}

// errExited reports a server that exited before it was ready.
var errExited = errors.New("server exited before it was ready")

// waiter tells when the server has exited, and how: err is set before
// done is closed.
type waiter struct {
	done chan struct{}
	err  error
}

// pollReady probes url every opts.PollInterval until it answers 200, and
// returns the time of that answer. The CA certificate appears in caFile
// when the server starts; until then there is nothing to probe with.
// Probes reuse their connection, so once the server listens the handshake
// is not part of every probe.
func pollReady(ctx context.Context, opts *ColdStartOptions, url, caFile string, start time.Time,
	w *waiter) (time.Time, error) {
	ctx, cancel := context.WithDeadline(ctx, start.Add(opts.ReadyTimeout))
	defer cancel()
	var client *http.Client
	defer func() {
		if client != nil {
			client.CloseIdleConnections()
		}
	}()
	lastErr := errors.New("no CA certificate yet")
	for {
		select {
		case <-w.done:
			return time.Time{}, fmt.Errorf("%w (%v)", errExited, w.err)
		default:
		}
		if client == nil {
			client = clientFor(caFile, opts.PollInterval)
		}
		if client != nil {
			ok, err := probe(ctx, client, url)
			if ok {
				return time.Now(), nil
			}
			if ctx.Err() == nil {
				// A probe cut short by the deadline says less than the
				// one before it.
				lastErr = err
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return time.Time{}, fmt.Errorf("not ready within %s: %w", opts.ReadyTimeout, lastErr)
			}
			return time.Time{}, fmt.Errorf("wait for readiness: %w", ctx.Err())
		case <-w.done:
			return time.Time{}, fmt.Errorf("%w (%v)", errExited, w.err)
		case <-time.After(opts.PollInterval):
		}
	}
}

// clientFor returns a client that trusts the CA in caFile, or nil while
// the file is absent or not completely written.
func clientFor(caFile string, pollInterval time.Duration) *http.Client {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil
	}
	return &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
			MaxIdleConnsPerHost: 1,
			ForceAttemptHTTP2:   false,
		},
		// A probe that takes longer than this is abandoned; the next one
		// starts a fresh connection.
		Timeout: max(time.Second, 100*pollInterval),
	}
}

// probe makes one GET and reports whether it answered 200.
func probe(ctx context.Context, client *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, fmt.Errorf("build probe: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	// Drained so that the connection is reused by the next probe.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("readyz answered %s", resp.Status)
	}
	return true, nil
}

// stop sends SIGTERM, waits up to StopTimeout, then kills. It returns the
// server's exit error, if any, or that it had to be killed.
func stop(ctx context.Context, opts *ColdStartOptions, cmd *exec.Cmd, w *waiter) error {
	select {
	case <-w.done:
		return w.err
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(opts.StopTimeout)
	defer timer.Stop()
	select {
	case <-w.done:
		return w.err
	case <-timer.C:
	case <-ctx.Done():
	}
	_ = cmd.Process.Kill()
	<-w.done
	return fmt.Errorf("killed: no exit within %s of SIGTERM", opts.StopTimeout)
}

// tailBuffer keeps the last max bytes written to it, safe for concurrent
// writes (exec copies stdout and stderr from two goroutines).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

// Bytes returns a copy of what is kept.
func (b *tailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf)
}

// WriteColdStartText writes r for people.
func WriteColdStartText(w io.Writer, r *ColdStartResult) error {
	var b strings.Builder
	what := "without compilation cache"
	if r.Cache {
		what = "with compilation cache " + r.CacheDir
	}
	fmt.Fprintf(&b, "cold start of %s serve, %s: exec to the first 200 from /readyz\n", r.Binary, what)
	if r.Cache {
		note := ""
		if !r.CacheWasEmpty {
			note = " (the cache directory was not empty: this start may not have compiled)"
		}
		fmt.Fprintf(&b, "filling the cache: %s%s\n", fmtMs(r.Filling), note)
	}
	fmt.Fprintf(&b, "runs: %d  min %s  p50 %s  max %s\n", len(r.Samples), fmtMs(r.Min), fmtMs(r.P50), fmtMs(r.Max))
	samples := make([]string, len(r.Samples))
	for i, s := range r.Samples {
		samples[i] = fmtMs(s)
	}
	fmt.Fprintf(&b, "samples: %s\n", strings.Join(samples, ", "))
	_, err := io.WriteString(w, b.String())
	return err
}
