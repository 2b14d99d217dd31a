package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// A Balancer stands where a Service's virtual address stands for the API
// server: one loopback address in front of several webhook replicas. It
// behaves as kube-proxy in iptables mode does:
//   - each new connection goes to one backend picked at random among those
//     ready at that moment, and stays on it until either side closes it
//     (conntrack); connections already open are never moved or cut when a
//     backend stops being ready;
//   - a connection to a backend that does not answer fails as a connection
//     to a Pod address with no listener does (reset), and is not retried
//     on another backend;
//   - with no ready backend, connections are refused (kube-proxy's REJECT
//     rule for a Service without endpoints).
//
// Which backends are ready follows each backend's readiness endpoint as the
// kubelet's readiness probe and the EndpointSlice controller make it
// follow a Pod's: probed every ProbeInterval, a backend turns unready after
// FailureThreshold failed probes in a row and ready after SuccessThreshold
// successful ones.
type Balancer struct {
	// Addr is the host:port the balancer listens on.
	Addr string

	opts     BalancerOptions
	ln       net.Listener
	backends []*backend
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

// BalancerOptions configure StartBalancer.
type BalancerOptions struct {
	// Listen is the loopback host:port to listen on. Default: a free port
	// on 127.0.0.1.
	Listen string
	// Backends are the replicas, each an address and a readiness URL.
	// Required.
	Backends []BalancerBackend
	// Probe is the HTTP client of the readiness probes. Required.
	Probe *http.Client
	// ProbeInterval is the probes' period (the readiness probe's
	// periodSeconds). Default: 1s.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe (timeoutSeconds). Default: 1s.
	ProbeTimeout time.Duration
	// FailureThreshold and SuccessThreshold are the probe's thresholds.
	// Default: 1 each.
	FailureThreshold, SuccessThreshold int
	// DialTimeout bounds the connection to a backend. Default: 1s.
	DialTimeout time.Duration
}

// BalancerBackend is one replica behind a Balancer.
type BalancerBackend struct {
	// Addr is the host:port connections are forwarded to.
	Addr string
	// ReadyURL is probed for readiness (200: ready).
	ReadyURL string
}

// BackendStats are what a Balancer counted for one backend.
type BackendStats struct {
	// Ready is whether the backend is among the endpoints now.
	Ready bool
	// Open is the number of connections open through it now.
	Open int64
	// Forwarded counts the connections it was given; Failed those whose
	// connection to it failed (each one failed the review it carried).
	Forwarded, Failed int64
	// Changes lists when the backend turned ready (true) or unready.
	Changes []ReadinessChange
}

// ReadinessChange is one transition of a backend's readiness.
type ReadinessChange struct {
	At    time.Time
	Ready bool
}

type backend struct {
	BalancerBackend
	ready     atomic.Bool
	open      atomic.Int64
	forwarded atomic.Int64
	failed    atomic.Int64

	mu      sync.Mutex
	changes []ReadinessChange
}

// StartBalancer listens and starts probing the backends; none is ready
// before its first successful probe. Close stops it.
func StartBalancer(opts BalancerOptions) (*Balancer, error) {
	if len(opts.Backends) == 0 || opts.Probe == nil {
		return nil, errors.New("start balancer: backends and a probe client are required")
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = time.Second
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = time.Second
	}
	if opts.FailureThreshold <= 0 {
		opts.FailureThreshold = 1
	}
	if opts.SuccessThreshold <= 0 {
		opts.SuccessThreshold = 1
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = time.Second
	}
	host, _, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("start balancer: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("start balancer: %q is not a loopback address", opts.Listen)
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("start balancer: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Balancer{Addr: ln.Addr().String(), opts: opts, ln: ln, cancel: cancel}
	for _, be := range opts.Backends {
		b.backends = append(b.backends, &backend{BalancerBackend: be})
	}
	for _, be := range b.backends {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.probe(ctx, be)
		}()
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.accept(ctx)
	}()
	return b, nil
}

// Close stops listening and probing and closes every forwarded connection.
func (b *Balancer) Close() error {
	b.cancel()
	err := b.ln.Close()
	b.wg.Wait()
	return err
}

// Stats returns what was counted for backend i.
func (b *Balancer) Stats(i int) BackendStats {
	be := b.backends[i]
	be.mu.Lock()
	changes := append([]ReadinessChange(nil), be.changes...)
	be.mu.Unlock()
	return BackendStats{Ready: be.ready.Load(), Open: be.open.Load(), Forwarded: be.forwarded.Load(),
		Failed: be.failed.Load(), Changes: changes}
}

// Replaced tells the balancer that backend i is a new Pod at the same
// address (a replica started again): it is not ready until a probe
// succeeds, as a new Pod's endpoint is not, however quickly it replaced
// the old one.
func (b *Balancer) Replaced(i int) {
	be := b.backends[i]
	if be.ready.Load() {
		be.setReady(false)
	}
}

// WaitReady waits until backend i's readiness is want.
func (b *Balancer) WaitReady(ctx context.Context, i int, want bool, timeout time.Duration) error {
	err := Poll(ctx, timeout, 50*time.Millisecond, func(context.Context) (bool, error) {
		return b.backends[i].ready.Load() == want, nil
	})
	if err != nil {
		return fmt.Errorf("wait for backend %s to be ready=%v: %w", b.backends[i].Addr, want, err)
	}
	return nil
}

// probe follows one backend's readiness until ctx ends.
func (b *Balancer) probe(ctx context.Context, be *backend) {
	tick := time.NewTicker(b.opts.ProbeInterval)
	defer tick.Stop()
	var successes, failures int
	for {
		if b.probeOnce(ctx, be.ReadyURL) {
			successes, failures = successes+1, 0
			if successes >= b.opts.SuccessThreshold && !be.ready.Load() {
				be.setReady(true)
			}
		} else {
			successes, failures = 0, failures+1
			if failures >= b.opts.FailureThreshold && be.ready.Load() {
				be.setReady(false)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (be *backend) setReady(ready bool) {
	be.ready.Store(ready)
	be.mu.Lock()
	be.changes = append(be.changes, ReadinessChange{At: time.Now(), Ready: ready})
	be.mu.Unlock()
}

func (b *Balancer) probeOnce(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, b.opts.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := b.opts.Probe.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (b *Balancer) accept(ctx context.Context) {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			b.forward(ctx, c.(*net.TCPConn))
		}()
	}
}

// pick returns a backend chosen at random among the ready ones, or nil.
func (b *Balancer) pick() *backend {
	ready := make([]*backend, 0, len(b.backends))
	for _, be := range b.backends {
		if be.ready.Load() {
			ready = append(ready, be)
		}
	}
	if len(ready) == 0 {
		return nil
	}
	return ready[rand.IntN(len(ready))]
}

// forward connects client to a backend and copies both ways until both
// directions are closed; a backend that cannot be reached resets the
// client's connection, as a Pod address without a listener would.
func (b *Balancer) forward(ctx context.Context, client *net.TCPConn) {
	be := b.pick()
	if be == nil {
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	be.forwarded.Add(1)
	d := net.Dialer{Timeout: b.opts.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", be.Addr)
	if err != nil {
		be.failed.Add(1)
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	be.open.Add(1)
	defer be.open.Add(-1)
	splice(ctx, client, conn.(*net.TCPConn))
}

// splice copies both ways between client and server until both directions
// are closed, or ctx ends, then closes both.
func splice(ctx context.Context, client, server *net.TCPConn) {
	stop := context.AfterFunc(ctx, func() {
		_ = client.Close()
		_ = server.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		pipe(server, client)
	}()
	go func() {
		defer wg.Done()
		pipe(client, server)
	}()
	wg.Wait()
	_ = client.Close()
	_ = server.Close()
}

// pipe copies src to dst until src ends, then half-closes dst (a FIN
// passes through); an error on either side (a reset) resets the other.
func pipe(dst, src *net.TCPConn) {
	_, err := io.Copy(dst, src)
	if err != nil {
		_ = dst.SetLinger(0)
		_ = dst.Close()
		_ = src.Close()
		return
	}
	_ = dst.CloseWrite()
}
