package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"
)

// Defaults of ServerOptions.
const (
	DefaultAddr              = ":8443"
	DefaultShutdownTimeout   = 25 * time.Second
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	// DefaultWriteTimeout exceeds the longest timeout the API server allows
	// a webhook (30 s), so the server never cuts off an answer the API
	// server is still waiting for.
	DefaultWriteTimeout   = 35 * time.Second
	DefaultIdleTimeout    = 90 * time.Second
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConcurrentStreams bounds the requests one HTTP/2
	// connection carries at once. The API server's client opens another
	// connection rather than wait when it needs more.
	DefaultMaxConcurrentStreams = 64
	// DefaultMaxConnsPerClient bounds the connections one source address
	// holds at once. The API server calls admission webhooks over
	// HTTP/1.1, one connection per call in flight, and keeps up to 25 of
	// them idle; 256 is ten times that, more than the calls one API server
	// has in flight at its default concurrency limits with this webhook
	// answering in milliseconds.
	DefaultMaxConnsPerClient = 256
	// DefaultMaxConns bounds the connections of all clients at once: a
	// connection waiting for its request's body costs 33-38 KiB (TLS and
	// HTTP buffers, a goroutine; measured by make hostile), so 3072 of
	// them take about 110 MiB, which with the process's 60 MiB stays
	// under the Go memory limit of the shipped 256 MiB container (205
	// MiB); it takes 12 addresses at their per-client limit to reach it.
	DefaultMaxConns = 3072
	// DefaultReservedConns is the share of MaxConns that only trusted
	// connections may take: room for two API servers at their per-client
	// limit, or several at what they really hold.
	DefaultReservedConns = 512
	// DefaultMaxPendingConns bounds the untrusted connections that have
	// not finished their TLS handshake or not sent a request yet (see
	// MaxPendingConns); 512 such connections cost at most 18 MiB.
	DefaultMaxPendingConns = 512
)

// HTTP/2 limits that are not options: the smallest frame size the protocol
// allows, the default header table size, and flow-control windows that
// bound the unread request data buffered per stream and per connection.
const (
	http2MaxReadFrameSize        = 16 << 10
	http2HeaderTableSize         = 4 << 10
	http2ReceiveBufferPerStream  = 1 << 20
	http2ReceiveBufferPerConnect = 2 << 20
)

// ServerOptions configure a Server.
type ServerOptions struct {
	// Addr is the HTTPS listen address. Default: DefaultAddr (":8443").
	Addr string
	// Listener, if set, is used instead of listening on Addr (tests pass
	// 127.0.0.1:0 listeners).
	Listener net.Listener
	// TLSConfig serves HTTPS. Required. Its MinVersion is raised to TLS
	// 1.2 if lower.
	TLSConfig *tls.Config
	// Handler answers HTTPS requests (a *Handler). Required.
	Handler http.Handler

	// MetricsAddr is the plain-HTTP listen address of MetricsHandler.
	// Default: "" (no metrics server) unless MetricsListener is set.
	MetricsAddr string
	// MetricsListener, if set, is used instead of listening on MetricsAddr.
	MetricsListener net.Listener
	// MetricsHandler answers on the metrics port (/metrics). Required with
	// a metrics address.
	MetricsHandler http.Handler

	// Logger receives lifecycle messages. Default: discard.
	Logger *slog.Logger

	// OnShutdown is called first when shutdown begins, typically to turn
	// /readyz to 503. Default: nothing.
	OnShutdown func()
	// ShutdownDelay is how long the server keeps serving after OnShutdown
	// and before it stops accepting, so that the Service's endpoints drop
	// the pod first. Default: 0.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds waiting for in-flight requests; past it,
	// remaining connections are closed. Default: DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	// HTTP server limits. Defaults: the Default* constants above.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// MaxHeaderBytes also bounds the decoded header list of an HTTP/2
	// request.
	MaxHeaderBytes int
	// MaxConcurrentStreams bounds the requests in flight on one HTTP/2
	// connection. Default: DefaultMaxConcurrentStreams (64).
	MaxConcurrentStreams int
	// MaxConnsPerClient bounds the connections one source IP address holds
	// at once on each port (sources in TrustedSources excepted on the
	// webhook port); a connection past it is closed as soon as it is
	// accepted, before its TLS handshake, and counted by OnConnRefused.
	// Default: DefaultMaxConnsPerClient (256); negative: no limit.
	MaxConnsPerClient int
	// MaxConns bounds the connections of all clients at once on each
	// port. On the webhook port it counts the proven ones: trusted, or
	// that sent a request byte; ReservedConns of them only trusted ones
	// may take. A connection that needs a place when there is none takes
	// that of an idle one (see OnConnEvicted); with none idle it is
	// closed and counted by OnConnRefused. On the metrics port a
	// connection past it is closed as soon as accepted. Default:
	// DefaultMaxConns (3072); negative: no limit.
	MaxConns int
	// ReservedConns is the share of MaxConns that untrusted connections
	// cannot take. It applies only when a connection can be trusted
	// (TrustedSources or TrustClientCerts). Default: DefaultReservedConns
	// (512); negative: none.
	ReservedConns int
	// MaxPendingConns bounds the webhook port's connections that have not
	// finished their TLS handshake, or not sent a request byte after it
	// (untrusted ones: trusted ones count in MaxConns). Past the bound, a
	// newcomer from the source address holding the most of them is closed
	// at once; one from a lighter source takes the place of that source's
	// oldest. Default: DefaultMaxPendingConns (512); negative: no bound.
	MaxPendingConns int
	// TrustedSources are the source addresses of trusted connections (the
	// API servers'). Default: none.
	TrustedSources []netip.Prefix
	// TrustClientCerts trusts connections whose handshake verified a
	// client certificate against TLSConfig's CAs. Default: false.
	TrustClientCerts bool
	// OnConnRefused is called with the reason ("per_client" or "total")
	// of each connection the limits refused. Default: nothing.
	OnConnRefused func(reason string)
	// OnConnEvicted is called with the reason (one of EvictionReasons) of
	// each idle connection closed to make room for another. Default:
	// nothing.
	OnConnEvicted func(reason string)
}

func (o *ServerOptions) setDefaults() {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnShutdown == nil {
		o.OnShutdown = func() {}
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	setDuration(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDuration(&o.ReadTimeout, DefaultReadTimeout)
	setDuration(&o.WriteTimeout, DefaultWriteTimeout)
	setDuration(&o.IdleTimeout, DefaultIdleTimeout)
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxConcurrentStreams <= 0 {
		o.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if o.MaxConnsPerClient == 0 {
		o.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.ReservedConns == 0 {
		o.ReservedConns = DefaultReservedConns
	}
	if o.MaxPendingConns == 0 {
		o.MaxPendingConns = DefaultMaxPendingConns
	}
	if o.OnConnRefused == nil {
		o.OnConnRefused = func(string) {}
	}
	if o.OnConnEvicted == nil {
		o.OnConnEvicted = func(string) {}
	}
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Server runs the HTTPS webhook and the metrics endpoint, and shuts both
// down gracefully.
type Server struct {
	opts    ServerOptions
	log     *slog.Logger
	ln      net.Listener
	admit   *admitListener
	mln     net.Listener
	https   *http.Server
	metrics *http.Server
	// draining is set when shutdown begins: from then on every HTTP/1
	// response closes its connection.
	draining atomic.Bool
}

// closeWhileDraining makes each HTTP/1 response close its connection
// ("Connection: close") once shutdown has begun. The API server keeps
// using the connections it holds to a terminating replica after the
// endpoint is gone (they stay on their backend), and a connection it
// picks from its pool just as Shutdown closes it idle fails the review
// (a POST is not retried). Closed after a response instead, a connection
// is dropped from the client's pool before it can be reused; by the end
// of the delay only connections that sat idle through it remain.
func (s *Server) closeWhileDraining(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() && r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// NewServer opens the listeners, so that the addresses are known (and
// taken) before Serve runs.
func NewServer(opts ServerOptions) (*Server, error) {
	opts.setDefaults()
	if opts.TLSConfig == nil {
		return nil, errors.New("webhook server: a TLS configuration is required")
	}
	if opts.Handler == nil {
		return nil, errors.New("webhook server: a handler is required")
	}
	if (len(opts.TrustedSources) > 0 || opts.TrustClientCerts) && opts.MaxConns > 0 && opts.ReservedConns >= opts.MaxConns {
		return nil, fmt.Errorf("webhook server: ReservedConns %d must be less than MaxConns %d", opts.ReservedConns, opts.MaxConns)
	}
	tlsConfig := opts.TLSConfig.Clone()
	if tlsConfig.MinVersion < tls.VersionTLS12 {
		tlsConfig.MinVersion = tls.VersionTLS12
	}
	// The listener completes the handshakes, so http.Server cannot add
	// the protocols to its own copy as ServeTLS would.
	for _, p := range []string{"h2", "http/1.1"} {
		if !slices.Contains(tlsConfig.NextProtos, p) {
			tlsConfig.NextProtos = append(slices.Clip(tlsConfig.NextProtos), p)
		}
	}
	s := &Server{opts: opts, log: opts.Logger}
	ln, err := listen(opts.Listener, opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen for webhook: %w", err)
	}
	s.admit = newAdmitListener(ln, s.connTable(), tlsConfig, s.handshakeTimeout(), s.log)
	s.ln = s.admit
	s.https = s.httpServer(s.closeWhileDraining(opts.Handler))
	s.https.TLSConfig = tlsConfig
	s.https.ConnState = s.admit.connState
	if opts.MetricsListener != nil || opts.MetricsAddr != "" {
		if opts.MetricsHandler == nil {
			_ = s.ln.Close()
			return nil, errors.New("webhook server: a metrics handler is required with a metrics address")
		}
		if s.mln, err = listen(opts.MetricsListener, opts.MetricsAddr); err != nil {
			_ = s.ln.Close()
			return nil, fmt.Errorf("listen for metrics: %w", err)
		}
		s.mln = s.limit(s.mln, func(string) {})
		s.metrics = s.httpServer(opts.MetricsHandler)
	}
	return s, nil
}

// connTable is the webhook port's admission, from the options.
func (s *Server) connTable() *connTable {
	o := &s.opts
	reserved := max(0, o.ReservedConns)
	if len(o.TrustedSources) == 0 && !o.TrustClientCerts {
		reserved = 0 // nobody could use it
	}
	return &connTable{perClient: max(0, o.MaxConnsPerClient), total: max(0, o.MaxConns), reserved: reserved,
		maxPending: max(0, o.MaxPendingConns), trustedSources: o.TrustedSources, trustCerts: o.TrustClientCerts,
		onRefuse: o.OnConnRefused, onEvict: o.OnConnEvicted, byClient: map[netip.Addr]int{},
		sources: map[netip.Addr]*source{}, byCount: map[int]map[*source]struct{}{}}
}

// handshakeTimeout is the time a client has for its TLS handshake, as
// http.Server would give it: the shortest of its read and write timeouts.
func (s *Server) handshakeTimeout() time.Duration {
	return min(s.opts.ReadHeaderTimeout, s.opts.ReadTimeout, s.opts.WriteTimeout)
}

// limit applies the connection limits to ln, with counts of its own.
func (s *Server) limit(ln net.Listener, onRefuse func(string)) net.Listener {
	if s.opts.MaxConnsPerClient < 0 && s.opts.MaxConns < 0 {
		return ln
	}
	return &limitListener{Listener: ln, onRefuse: onRefuse,
		counts: newClientCounts(max(0, s.opts.MaxConnsPerClient), max(0, s.opts.MaxConns))}
}

func listen(ln net.Listener, addr string) (net.Listener, error) {
	if ln != nil {
		return ln, nil
	}
	return net.Listen("tcp", addr)
}

func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          s.opts.MaxConcurrentStreams,
			MaxReadFrameSize:              http2MaxReadFrameSize,
			MaxDecoderHeaderTableSize:     http2HeaderTableSize,
			MaxEncoderHeaderTableSize:     http2HeaderTableSize,
			MaxReceiveBufferPerStream:     http2ReceiveBufferPerStream,
			MaxReceiveBufferPerConnection: http2ReceiveBufferPerConnect,
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// Connections is the number of connections open on the webhook port.
func (s *Server) Connections() int {
	return s.admit.t.open()
}

// Addr is the webhook's listen address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// MetricsAddr is the metrics listen address, nil without one.
func (s *Server) MetricsAddr() net.Addr {
	if s.mln == nil {
		return nil
	}
	return s.mln.Addr()
}

// Serve serves until ctx is done, then shuts down gracefully: OnShutdown,
// ShutdownDelay of continued service, then no new connections while
// in-flight requests finish, for at most ShutdownTimeout. Requests keep
// their own contexts through the shutdown: cancelling ctx does not cancel
// the evaluations in flight.
//
// It returns nil after a clean shutdown, and an error if a listener failed
// or in-flight requests had to be cut off.
func (s *Server) Serve(ctx context.Context) error {
	base := context.WithoutCancel(ctx)
	s.https.BaseContext = func(net.Listener) context.Context { return base }
	errc := make(chan error, 2)
	go func() { errc <- s.https.Serve(s.ln) }()
	servers := []*http.Server{s.https}
	if s.metrics != nil {
		s.metrics.BaseContext = s.https.BaseContext
		go func() { errc <- s.metrics.Serve(s.mln) }()
		servers = append(servers, s.metrics)
	}
	s.log.InfoContext(ctx, "webhook serving", "addr", s.Addr().String(), "metrics_addr", addrString(s.MetricsAddr()))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		serveErr = fmt.Errorf("serve: %w", serveErr)
		s.log.ErrorContext(ctx, "webhook server failed; shutting down", "error", serveErr)
	}

	s.opts.OnShutdown()
	s.draining.Store(true)
	if serveErr == nil && s.opts.ShutdownDelay > 0 {
		s.log.InfoContext(base, "shutting down: not ready, still serving", "delay", s.opts.ShutdownDelay.String())
		time.Sleep(s.opts.ShutdownDelay)
	}
	s.log.InfoContext(base, "shutting down: waiting for in-flight requests", "timeout", s.opts.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(base, s.opts.ShutdownTimeout)
	defer cancel()
	var shutdownErr error
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
			shutdownErr = errors.Join(shutdownErr, fmt.Errorf("shut down: %w", err))
		}
	}
	if shutdownErr != nil {
		s.log.WarnContext(base, "shutdown cut off in-flight requests", "error", shutdownErr)
	} else {
		s.log.InfoContext(base, "shut down cleanly")
	}
	return errors.Join(serveErr, shutdownErr)
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
