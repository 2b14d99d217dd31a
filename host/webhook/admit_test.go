package webhook

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/certwatch"
)

// fakeConn is a connection from addr that only records its closing.
type fakeConn struct {
	net.Conn
	addr   net.Addr
	closed atomic.Bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.addr }
func (c *fakeConn) Close() error         { c.closed.Store(true); return nil }

func fakeFrom(src string) *fakeConn {
	return &fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(src), Port: 40000}}
}

// evictions counts OnConnEvicted and OnConnRefused calls by reason.
type evictions struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *evictions) add(reason string) { e.mu.Lock(); e.n[reason]++; e.mu.Unlock() }
func (e *evictions) of(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[reason]
}

func newEvictions() *evictions { return &evictions{n: map[string]int{}} }

// TestConnTable_evictsFromTheHeaviestSource: past the unproven budget, a
// newcomer from the address holding the most unproven connections is
// closed at once, and one from a lighter address gets in in place of the
// heaviest address's oldest: the API server's handshake, though the
// oldest of all, stays. A proven connection is out of that budget, and its
// place is taken from an idle one.
func TestConnTable_evictsFromTheHeaviestSource(t *testing.T) {
	t.Parallel()
	ev, ref := newEvictions(), newEvictions()
	tbl := &connTable{total: 2, maxPending: 4, onEvict: ev.add, onRefuse: ref.add, byClient: map[netip.Addr]int{},
		sources: map[netip.Addr]*source{}, byCount: map[int]map[*source]struct{}{}}
	accept := func(src string) (*admitConn, *fakeConn) {
		raw := fakeFrom(src)
		c, refused := tbl.accept(raw)
		require.Empty(t, refused)
		return c, raw
	}
	// The API server's handshake first: the oldest connection of all.
	api, apiRaw := accept("127.0.0.1")
	var flood []*fakeConn
	for range 3 {
		_, raw := accept("127.0.0.2")
		flood = append(flood, raw)
	}
	for i := range 20 {
		c, refused := tbl.accept(fakeFrom("127.0.0.2"))
		assert.Nil(t, c)
		assert.Equal(t, shedPending, refused, "the heaviest address's newcomer goes (%d)", i)
	}
	assert.Equal(t, 20, ev.of(EvictedHandshake))
	for _, raw := range append(flood, apiRaw) {
		assert.False(t, raw.closed.Load(), "what is held stays")
	}
	_, raw3 := accept("127.0.0.3")
	assert.True(t, flood[0].closed.Load(), "a lighter address's newcomer takes the place of the heaviest's oldest")
	assert.False(t, apiRaw.closed.Load())
	assert.Equal(t, 21, ev.of(EvictedHandshake))
	_, _ = accept("127.0.0.4")
	assert.True(t, flood[1].closed.Load(), "127.0.0.2 (2) is still the heaviest")
	assert.False(t, raw3.closed.Load())
	assert.Equal(t, 4, tbl.open())
	assert.Zero(t, ref.of(refusedTotal)+ref.of(refusedPerClient))

	// Handshaken and sending, the API server's connection is proven: out
	// of the unproven budget.
	require.True(t, tbl.handshakeDone(api, false, false))
	require.True(t, tbl.busy(api))
	assert.Equal(t, 1, tbl.proven[untrusted])
	assert.False(t, apiRaw.closed.Load())

	// Two proven connections fill total; the idle one gives its place to
	// a third, the busy one never does, and with both busy a third is
	// refused.
	c2, raw2 := accept("127.0.0.4")
	require.True(t, tbl.handshakeDone(c2, false, false))
	require.True(t, tbl.busy(c2))
	tbl.idleAgain(c2)
	c3, raw3 := accept("127.0.0.5")
	require.True(t, tbl.handshakeDone(c3, false, false))
	require.True(t, tbl.busy(c3), "takes the idle connection's place")
	assert.True(t, raw2.closed.Load())
	assert.False(t, apiRaw.closed.Load(), "the busy one stays")
	assert.Equal(t, 1, ev.of(EvictedKeepAlive))
	c4, raw4 := accept("127.0.0.6")
	require.True(t, tbl.handshakeDone(c4, false, false))
	assert.False(t, tbl.busy(c4), "no idle connection: refused")
	assert.True(t, raw4.closed.Load())
	assert.Equal(t, 1, ref.of(refusedTotal))
	assert.False(t, raw3.closed.Load())
}

// TestConnTable_reserve: untrusted connections take at most total -
// reserved places; a trusted one gets in past them, taking an idle
// untrusted connection's place when all are held, and another trusted
// one's only after that.
func TestConnTable_reserve(t *testing.T) {
	t.Parallel()
	ev, ref := newEvictions(), newEvictions()
	tbl := &connTable{total: 4, reserved: 2, maxPending: 100, trustCerts: true,
		trustedSources: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
		onEvict:        ev.add, onRefuse: ref.add, byClient: map[netip.Addr]int{},
		sources: map[netip.Addr]*source{}, byCount: map[int]map[*source]struct{}{}}
	proven := func(src string, verified bool) (*admitConn, *fakeConn, bool) {
		raw := fakeFrom(src)
		c, refused := tbl.accept(raw)
		if refused != "" {
			return nil, raw, false
		}
		if !tbl.handshakeDone(c, verified, false) {
			return c, raw, false
		}
		return c, raw, tbl.busy(c)
	}
	for i := range 2 {
		_, _, ok := proven("127.0.0.2", false)
		require.True(t, ok, "untrusted %d", i)
	}
	_, raw, ok := proven("127.0.0.2", false)
	assert.False(t, ok, "the reserve is not for untrusted connections")
	assert.True(t, raw.closed.Load())
	assert.Equal(t, 1, ref.of(refusedTotal))
	// An address holding fewer takes a place of the one holding the most:
	// the untrusted connections stay within total - reserved.
	_, _, ok = proven("127.0.0.3", false)
	require.True(t, ok, "127.0.0.3 (0) takes a place of 127.0.0.2 (2)")
	assert.Equal(t, 1, ev.of(EvictedBusy))
	_, _, ok = proven("127.0.0.3", false)
	assert.False(t, ok, "127.0.0.3 (1) against 127.0.0.2 (1): refused")
	assert.Equal(t, 2, ref.of(refusedTotal))
	assert.Equal(t, [2]int{2, 0}, tbl.proven)

	a, _, ok := proven("127.0.0.9", true)
	require.True(t, ok, "a verified client certificate takes a reserved place")
	b, _, ok := proven("10.0.0.7", false)
	require.True(t, ok, "so does a trusted source")
	assert.Equal(t, [2]int{2, 2}, tbl.proven)
	tbl.idleAgain(a)
	_, _, ok = proven("10.0.0.8", false)
	require.True(t, ok, "all busy but a trusted idle one: it yields to another trusted one")
	assert.Equal(t, 1, ev.of(EvictedKeepAlive))
	for i := range 2 {
		_, _, ok = proven("10.0.0.9", false)
		require.True(t, ok, "every place busy: a trusted newcomer takes an untrusted one's (%d)", i)
	}
	assert.Equal(t, 3, ev.of(EvictedBusy))
	assert.Equal(t, [2]int{0, 4}, tbl.proven)
	_, _, ok = proven("10.0.0.10", false)
	assert.False(t, ok, "every place busy and trusted: refused")
	tbl.remove(b)
	assert.Equal(t, [2]int{0, 3}, tbl.proven)
}

// clientHello is the first flight of a TLS client: sent alone, it leaves
// the server's side of the handshake waiting for the rest.
func clientHello(t *testing.T) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		_ = tls.Client(a, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"}).Handshake() //nolint:gosec // only the bytes matter
	}()
	buf := make([]byte, 8192)
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := b.Read(buf)
	require.NoError(t, err)
	return buf[:n]
}

// floodKind is what one attacking connection does.
type floodKind int

const (
	floodBare     floodKind = iota // a TCP connection that sends nothing
	floodHalfOpen                  // a ClientHello, then nothing
	floodBusy                      // a handshake and a request's headers, no body
)

// flood holds connections from each of srcs, slots per address, each
// opened again as soon as the server closes it, until ctx ends.
type flood struct {
	opened, closedByServer atomic.Int64
	wg                     sync.WaitGroup
}

func startFlood(ctx context.Context, addr string, srcs []string, slots int, kinds []floodKind, hello []byte) *flood {
	f := &flood{}
	for _, src := range srcs {
		for slot := range slots {
			kind := kinds[slot%len(kinds)]
			f.wg.Go(func() { f.slot(ctx, addr, src, kind, hello) })
		}
	}
	return f
}

func (f *flood) slot(ctx context.Context, addr, src string, kind floodKind, hello []byte) {
	d := from(src)
	d.Timeout = 2 * time.Second
	for i := 0; i < 100_000 && ctx.Err() == nil; i++ {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		f.opened.Add(1)
		stop := context.AfterFunc(ctx, func() { _ = c.Close() })
		var conn net.Conn = c
		switch kind {
		case floodHalfOpen:
			_, err = c.Write(hello)
		case floodBusy:
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // an attacker
			if err = tc.HandshakeContext(ctx); err == nil {
				_, err = io.WriteString(tc, "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
			}
			conn = tc
		}
		if err == nil {
			// Held until the server closes it (or the flood ends).
			_, _ = io.Copy(io.Discard, conn)
		}
		if ctx.Err() == nil {
			f.closedByServer.Add(1)
		}
		stop()
		_ = c.Close()
	}
}

// attackerAddrs are 13 loopback addresses, 127.0.0.2 to 127.0.0.14.
func attackerAddrs() []string {
	var out []string
	for i := 2; i <= 14; i++ {
		out = append(out, fmt.Sprintf("127.0.0.%d", i))
	}
	return out
}

// TestServer_connCapFlood: 13 addresses hold bare TCP connections, half
// done handshakes and (where they can finish a handshake) requests
// without a body, at and past every limit and opened again as soon as the
// server closes them, while an API server makes admission calls, on new
// connections and on a kept one: every call is answered. The API server
// is trusted by its source address, or by its client certificate.
func TestServer_connCapFlood(t *testing.T) {
	t.Parallel()
	hello := clientHello(t)
	for _, tc := range []struct {
		name  string
		certs bool
	}{{"trusted source", false}, {"client certificate", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, ref := newEvictions(), newEvictions()
			opts := ServerOptions{Listener: loopback(t), Handler: acceptingHandler(),
				MaxConnsPerClient: 8, MaxConns: 48, ReservedConns: 16, MaxPendingConns: 24,
				OnConnEvicted: ev.add, OnConnRefused: ref.add}
			var api *http.Client
			if tc.certs {
				opts.TLSConfig, api = clientCertTLS(t)
				opts.TrustClientCerts = true
			} else {
				opts.TLSConfig, api = testTLS(t)
				opts.TrustedSources = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			}
			srv := startServer(t, opts)
			addr := srv.Addr().String()

			ctx, cancel := context.WithCancel(t.Context())
			f := startFlood(ctx, addr, attackerAddrs(), 12, []floodKind{floodBare, floodHalfOpen, floodBusy, floodBusy}, hello)
			defer func() { cancel(); f.wg.Wait() }()
			waitFor(t, "the flood to fill the unproven budget", func() bool { return ev.of(EvictedHandshake)+ev.of(EvictedBeforeRequest) > 100 })

			fresh := api.Transport.(*http.Transport).Clone()
			fresh.DisableKeepAlives = true
			var ms []float64
			failed, maxUntrusted, maxPending := 0, 0, 0
			for i := range 30 {
				client := api
				if i%2 == 0 {
					client = &http.Client{Transport: fresh, Timeout: 10 * time.Second}
				}
				start := time.Now()
				uid := fmt.Sprintf("api-%d", i)
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+addr+PathMutate, strings.NewReader(reviewBody(uid)))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err == nil {
					var body []byte
					body, err = io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					if err == nil && (resp.StatusCode != 200 || decodeReview(t, body).Response.UID != uid) {
						err = fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, body)
					}
				}
				if err != nil {
					failed++
					t.Logf("call %d failed: %v", i, err)
					continue
				}
				ms = append(ms, float64(time.Since(start).Microseconds())/1000)
				srv.admit.t.mu.Lock()
				untrustedHeld, pending := srv.admit.t.proven[untrusted], srv.admit.t.unproven
				srv.admit.t.mu.Unlock()
				maxUntrusted, maxPending = max(maxUntrusted, untrustedHeld), max(maxPending, pending)
			}
			slices.Sort(ms)
			assert.Zero(t, failed, "every admission call answered")
			opened := f.opened.Load()
			t.Logf("%s: %d flood connections opened, %d closed by the server; evicted %d before the handshake, %d before a request; "+
				"refused %d per client, %d total; calls p50 %.1f ms, p99 %.1f ms",
				tc.name, opened, f.closedByServer.Load(), ev.of(EvictedHandshake), ev.of(EvictedBeforeRequest),
				ref.of(refusedPerClient), ref.of(refusedTotal), ms[len(ms)/2], ms[min(len(ms)-1, len(ms)*99/100)])
			assert.LessOrEqual(t, maxUntrusted, 48-16, "the flood never takes the reserve")
			assert.LessOrEqual(t, maxPending, 24)
			assert.Greater(t, opened, int64(48+24), "the flood went past every limit")
			if !tc.certs {
				// Sampled between calls, so not always at the cap itself.
				assert.GreaterOrEqual(t, maxUntrusted, 24, "requests without a body held the places the reserve leaves")
			}
		})
	}
}

// clientCertTLS returns a server configuration that requires a client
// certificate of a CA, and an API server client that presents one.
func clientCertTLS(t *testing.T) (*tls.Config, *http.Client) {
	t.Helper()
	certFile, keyFile, client := certFiles(t)
	clientCA, err := certwatch.NewCA("client CA", time.Hour)
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	require.NoError(t, os.WriteFile(caFile, clientCA.CertPEM(), 0o600))
	w, err := certwatch.New(certwatch.Options{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile})
	require.NoError(t, err)
	certPEM, keyPEM, err := clientCA.Issue(certwatch.IssueOptions{CommonName: "kube-apiserver", DNSNames: []string{"kube-apiserver"}, Usage: certwatch.UsageClient})
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	tr := client.Transport.(*http.Transport)
	tr.TLSClientConfig.Certificates = []tls.Certificate{pair}
	tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	return w.TLSConfig(), client
}

// TestMetrics_connectionsEvicted: the four reasons show from the start,
// and nothing else makes a series.
func TestMetrics_connectionsEvicted(t *testing.T) {
	t.Parallel()
	metrics, err := NewMetrics(prometheus.NewRegistry(), nil, 1, "test")
	require.NoError(t, err)
	assert.Equal(t, 4, testutil.CollectAndCount(metrics.connEvicted))
	metrics.ConnectionEvicted(EvictedHandshake)
	metrics.ConnectionEvicted(EvictedHandshake)
	metrics.ConnectionEvicted("made-up " + strings.Repeat("x", 100))
	assert.Equal(t, 4, testutil.CollectAndCount(metrics.connEvicted))
	assert.Equal(t, 2.0, testutil.ToFloat64(metrics.connEvicted.WithLabelValues(EvictedHandshake)))
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.connEvicted.WithLabelValues(EvictedKeepAlive)))
	assert.Zero(t, testutil.ToFloat64(metrics.connEvicted.WithLabelValues(EvictedBeforeRequest)))
}

// TestServer_evictsIdleConns: at MaxConns, a new client's request takes
// the place of the connection idle longest (kept alive after its
// request), and a connection that never sent anything is closed when the
// unproven budget is full; nobody is refused.
func TestServer_evictsIdleConns(t *testing.T) {
	t.Parallel()
	tlsConfig, _ := testTLS(t)
	ev, ref := newEvictions(), newEvictions()
	srv := startServer(t, ServerOptions{Listener: loopback(t), TLSConfig: tlsConfig, Handler: acceptingHandler(),
		MaxConns: 2, MaxPendingConns: 2, OnConnEvicted: ev.add, OnConnRefused: ref.add})
	clients := make([]*http.Client, 3)
	for i := range clients {
		_, clients[i] = testTLS(t) // each its own pool of kept connections
		clients[i].Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	}
	for i, c := range clients {
		r, _ := postOver(t, c, srv, fmt.Sprintf("client-%d", i))
		assert.Equal(t, fmt.Sprintf("client-%d", i), r.Response.UID)
	}
	waitFor(t, "the eviction to be counted", func() bool { return ev.of(EvictedKeepAlive) == 1 })
	assert.Equal(t, 2, provenConns(srv))

	// Two bare connections fill the unproven budget; a third from another
	// address takes the place of the heaviest address's oldest.
	var bare []net.Conn
	for _, src := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.3"} {
		c, err := from(src).Dial("tcp", srv.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		bare = append(bare, c)
		if len(bare) < 3 {
			waitFor(t, "the bare connection to be counted", func() bool { return srv.Connections() == 2+len(bare) })
		}
	}
	assert.True(t, closedByServer(bare[0]), "127.0.0.2's oldest bare connection is closed")
	// The server closes an evicted connection, then counts it.
	waitFor(t, "the eviction to be counted", func() bool { return ev.of(EvictedHandshake) == 1 })
	assert.Zero(t, ref.of(refusedTotal)+ref.of(refusedPerClient), "nobody refused")
}

// TestConnTable_floodWithoutTrust: with the default limits and no trusted
// source or client CA (a default install), 13 addresses fill every place
// an untrusted connection may hold with requests in flight, and go on
// opening more; the API server's connections all get in, and stay, at
// the flood's expense.
func TestConnTable_floodWithoutTrust(t *testing.T) {
	t.Parallel()
	ev, ref := newEvictions(), newEvictions()
	tbl := &connTable{perClient: DefaultMaxConnsPerClient, total: DefaultMaxConns, reserved: DefaultReservedConns,
		maxPending: DefaultMaxPendingConns, onEvict: ev.add, onRefuse: ref.add, byClient: map[netip.Addr]int{},
		sources: map[netip.Addr]*source{}, byCount: map[int]map[*source]struct{}{}}
	busy := func(src string) (*fakeConn, bool) {
		raw := fakeFrom(src)
		c, refused := tbl.accept(raw)
		if refused != "" {
			return raw, false
		}
		return raw, tbl.handshakeDone(c, false, false) && tbl.busy(c)
	}
	flood := func() (held int) {
		for i := 2; i <= 14; i++ {
			for range DefaultMaxConnsPerClient {
				if _, ok := busy(fmt.Sprintf("127.0.0.%d", i)); ok {
					held++
				}
			}
		}
		return held
	}
	flood()
	assert.Equal(t, DefaultMaxConns-DefaultReservedConns, tbl.proven[untrusted], "the flood fills the untrusted places")
	var api []*fakeConn
	for i := range 50 {
		raw, ok := busy("127.0.0.1")
		require.True(t, ok, "the API server's connection %d gets in", i)
		api = append(api, raw)
	}
	flood() // the flood goes on: it takes its own places only
	for i, raw := range api {
		assert.False(t, raw.closed.Load(), "the API server's connection %d stays", i)
	}
	assert.Equal(t, 50, tbl.provenOf(netip.MustParseAddr("127.0.0.1")))
	assert.Equal(t, DefaultMaxConns-DefaultReservedConns, tbl.proven[untrusted])
	assert.Positive(t, ev.of(EvictedBusy))
	t.Logf("flood: %d busy connections evicted, %d refused", ev.of(EvictedBusy), ref.of(refusedTotal))
}

// TestConnTable_idleVictimFromTheHeaviest: with every place taken, the
// place a newcomer gets comes from the address holding the most, idle or
// not: the API server's one kept connection stays while others hold
// more, and goes only once its address holds as many as any.
func TestConnTable_idleVictimFromTheHeaviest(t *testing.T) {
	t.Parallel()
	ev, ref := newEvictions(), newEvictions()
	tbl := &connTable{total: 4, maxPending: 100, onEvict: ev.add, onRefuse: ref.add, byClient: map[netip.Addr]int{},
		sources: map[netip.Addr]*source{}, byCount: map[int]map[*source]struct{}{}}
	proven := func(src string) (*admitConn, *fakeConn, bool) {
		raw := fakeFrom(src)
		c, refused := tbl.accept(raw)
		require.Empty(t, refused)
		return c, raw, tbl.handshakeDone(c, false, false) && tbl.busy(c)
	}
	// The API server's connection, kept alive between its calls, and an
	// attacker's three requests in flight: every place taken.
	api, apiRaw, ok := proven("127.0.0.1")
	require.True(t, ok)
	tbl.idleAgain(api)
	var attacker []*admitConn
	var attackerRaw []*fakeConn
	for range 3 {
		c, raw, ok := proven("127.0.0.2")
		require.True(t, ok)
		attacker, attackerRaw = append(attacker, c), append(attackerRaw, raw)
	}
	attackerClosed := func() (n int) {
		for _, raw := range attackerRaw {
			if raw.closed.Load() {
				n++
			}
		}
		return n
	}

	// A newcomer from a third address takes a place of the attacker's,
	// not the API server's idle one.
	_, _, ok = proven("127.0.0.3")
	require.True(t, ok)
	assert.False(t, apiRaw.closed.Load(), "the API server's idle connection stays")
	assert.Equal(t, 1, ev.of(EvictedBusy))
	assert.Zero(t, ev.of(EvictedKeepAlive))
	assert.Equal(t, 1, attackerClosed())
	// The attacker's own newcomer finds nobody holding more: refused, the
	// API server's connection still kept.
	_, raw, ok := proven("127.0.0.2")
	assert.False(t, ok)
	assert.True(t, raw.closed.Load())
	assert.False(t, apiRaw.closed.Load(), "the API server's idle connection stays")
	assert.Equal(t, 1, ref.of(refusedTotal))

	// Idle too, the attacker's connections go first, though the API
	// server's has been idle longer.
	for _, c := range attacker {
		tbl.idleAgain(c)
	}
	_, _, ok = proven("127.0.0.4")
	require.True(t, ok)
	assert.False(t, apiRaw.closed.Load(), "the API server's idle connection stays")
	assert.Equal(t, 1, ev.of(EvictedKeepAlive))
	assert.Equal(t, 2, attackerClosed(), "an idle connection of the attacker's went")

	// Now every address holds one: an idle connection of an address
	// holding the most yields, the API server's or the attacker's last.
	_, _, ok = proven("127.0.0.5")
	require.True(t, ok)
	assert.Equal(t, 2, ev.of(EvictedKeepAlive))
	gone := attackerClosed() - 2
	if apiRaw.closed.Load() {
		gone++
	}
	assert.Equal(t, 1, gone, "one idle connection went")
	assert.Equal(t, 4, tbl.proven[untrusted])
}
