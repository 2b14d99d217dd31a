package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/certwatch"
)

// testTLS writes a CA-signed certificate for 127.0.0.1 and returns the
// server's TLS configuration and a client that trusts the CA.
func testTLS(t *testing.T) (*tls.Config, *http.Client) {
	t.Helper()
	certFile, keyFile, client := certFiles(t)
	w, err := certwatch.New(certwatch.Options{CertFile: certFile, KeyFile: keyFile})
	require.NoError(t, err)
	return w.TLSConfig(), client
}

// certFiles writes a CA-signed certificate for 127.0.0.1 and returns its
// files and a client that trusts the CA.
func certFiles(t *testing.T) (certFile, keyFile string, client *http.Client) {
	t.Helper()
	ca, err := certwatch.NewCA("test CA", time.Hour)
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.Issue(certwatch.IssueOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	client = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	t.Cleanup(client.CloseIdleConnections)
	return certFile, keyFile, client
}

// startServer serves opts until the test ends.
func startServer(t *testing.T, opts ServerOptions) *Server {
	t.Helper()
	srv, err := NewServer(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	return srv
}

// postOver posts reviewBody(uid) to srv's /mutate with client and returns
// the decoded answer and the response (its body already read).
func postOver(t *testing.T, client *http.Client, srv *Server, uid string) (review, *http.Response) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+srv.Addr().String()+PathMutate,
		strings.NewReader(reviewBody(uid)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return decodeReview(t, body), resp
}

func loopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

// TestServer_gracefulShutdown: on cancel, /readyz turns 503 at once, the
// in-flight request still gets its answer, new connections are refused
// after the delay, and Serve returns nil.
func TestServer_gracefulShutdown(t *testing.T) {
	t.Parallel()
	tlsConfig, client := testTLS(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	h := NewHandler(Options{Timeout: time.Minute})
	h.Start(policyFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		if strings.Contains(string(payload), `"uid":"slow"`) {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	srv, err := NewServer(ServerOptions{
		Listener:        loopback(t),
		TLSConfig:       tlsConfig,
		Handler:         h,
		OnShutdown:      func() { h.SetReady(false) },
		ShutdownDelay:   300 * time.Millisecond,
		ShutdownTimeout: 20 * time.Second,
	})
	require.NoError(t, err)
	base := "https://" + srv.Addr().String()

	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()

	slow := make(chan review, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+PathMutate, strings.NewReader(reviewBody("slow")))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			close(slow)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		slow <- decodeReview(t, body)
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached the policy")
	}

	cancel()
	require.Eventually(t, func() bool { return !h.Ready() }, 5*time.Second, time.Millisecond, "readiness dropped")
	// During the delay, new requests are still served.
	readyz, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+PathReadyz, nil)
	require.NoError(t, err)
	if resp, err := client.Do(readyz); err == nil {
		assert.Equal(t, 503, resp.StatusCode, "readyz while draining")
		_ = resp.Body.Close()
	}
	client.CloseIdleConnections()
	// After the delay the listener closes.
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", srv.Addr().String(), time.Second)
		if err != nil {
			return true
		}
		_ = c.Close()
		return false
	}, 10*time.Second, 10*time.Millisecond, "stops accepting connections")

	select {
	case err := <-served:
		t.Fatalf("Serve returned before the in-flight request finished: %v", err)
	default:
	}
	close(release)
	r, ok := <-slow
	require.True(t, ok, "the in-flight request got an answer")
	assert.Equal(t, "slow", r.Response.UID)
	assert.True(t, r.Response.Allowed)
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the last request")
	}
}

// TestServer_closesConnectionsWhileDraining: during the shutdown delay an
// HTTP/1.1 client gets its answers with "Connection: close", so it never
// sends a request on a connection the server is about to close; before,
// connections are kept alive.
func TestServer_closesConnectionsWhileDraining(t *testing.T) {
	t.Parallel()
	tlsConfig, client := testTLS(t)
	tr := client.Transport.(*http.Transport)
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1, as the API server calls a Service
	h := acceptingHandler()
	srv, err := NewServer(ServerOptions{
		Listener: loopback(t), TLSConfig: tlsConfig, Handler: h,
		OnShutdown: func() { h.SetReady(false) }, ShutdownDelay: time.Second,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })

	reused := func() (bool, bool) {
		var got httptrace.GotConnInfo
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { got = i },
		}), http.MethodPost, "https://"+srv.Addr().String()+PathMutate, strings.NewReader(reviewBody("u")))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return got.Reused, resp.Close
	}
	_, closed := reused()
	assert.False(t, closed, "a response before shutdown closes its connection")
	wasReused, _ := reused()
	assert.True(t, wasReused, "the connection kept alive before shutdown")

	cancel()
	require.Eventually(t, func() bool { return !h.Ready() }, 5*time.Second, time.Millisecond, "readiness dropped")
	require.Eventually(t, srv.draining.Load, 5*time.Second, time.Millisecond, "draining")
	for i := range 3 {
		wasReused, closed := reused()
		assert.True(t, closed, "response %d while draining carries Connection: close", i)
		if i > 0 {
			assert.False(t, wasReused, "request %d while draining went on a connection already answered while draining", i)
		}
	}
}

// TestServer_shutdownTimeout: a request that outlives ShutdownTimeout is
// cut off and Serve says so, within a bound.
func TestServer_shutdownTimeout(t *testing.T) {
	t.Parallel()
	tlsConfig, client := testTLS(t)
	entered := make(chan struct{})
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	h := NewHandler(Options{Timeout: time.Minute})
	h.Start(policyFunc(func(context.Context, []byte) ([]byte, error) {
		close(entered)
		<-stuck // ignores its context, like a stuck dependency
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	srv, err := NewServer(ServerOptions{Listener: loopback(t), TLSConfig: tlsConfig, Handler: h, ShutdownTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost,
			"https://"+srv.Addr().String()+PathMutate, strings.NewReader(reviewBody("stuck")))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-entered
	cancel()
	select {
	case err := <-served:
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not give up on the stuck request")
	}
}

func TestServer_tlsAndMetrics(t *testing.T) {
	t.Parallel()
	tlsConfig, client := testTLS(t)
	h := acceptingHandler()
	metricsHit := make(chan struct{}, 1)
	srv := startServer(t, ServerOptions{
		Listener:        loopback(t),
		TLSConfig:       tlsConfig,
		Handler:         h,
		MetricsListener: loopback(t),
		MetricsHandler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			metricsHit <- struct{}{}
			_, _ = io.WriteString(w, "ok")
		}),
	})

	// TLS 1.1 is refused, TLS 1.2 works.
	old := &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11} //nolint:gosec // the point of the test
	_, err := tls.Dial("tcp", srv.Addr().String(), old)
	require.Error(t, err, "TLS 1.1 handshake")

	r, resp := postOver(t, client, srv, "tls-1")
	assert.Equal(t, "tls-1", r.Response.UID)
	assert.Equal(t, uint16(tls.VersionTLS13), resp.TLS.Version)

	// Plain HTTP on the webhook port gets nowhere; metrics are plain HTTP.
	mresp, err := http.Get("http://" + srv.MetricsAddr().String() + "/metrics")
	require.NoError(t, err)
	_ = mresp.Body.Close()
	assert.Equal(t, 200, mresp.StatusCode)
	<-metricsHit
}

// TestServer_slowClient: a client that opens a connection and never
// finishes its request headers is cut off by ReadHeaderTimeout, and the
// server keeps answering others.
func TestServer_slowClient(t *testing.T) {
	t.Parallel()
	tlsConfig, client := testTLS(t)
	h := acceptingHandler()
	srv := startServer(t, ServerOptions{
		Listener: loopback(t), TLSConfig: tlsConfig, Handler: h,
		ReadHeaderTimeout: 200 * time.Millisecond,
	})

	conn, err := tls.Dial("tcp", srv.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the timeout matters
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /mutate HTTP/1.1\r\nHost: x\r\n")) // and never the blank line
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(3*time.Second)))
	_, err = io.ReadAll(conn)
	var netErr net.Error
	if errors.As(err, &netErr) {
		require.False(t, netErr.Timeout(), "the server closed the connection before the test's own 3 s deadline (the default ReadHeaderTimeout is 5 s)")
	}

	r, _ := postOver(t, client, srv, "after-slow")
	assert.Equal(t, "after-slow", r.Response.UID)
}

// acceptingHandler is a started Handler whose policy accepts everything.
func acceptingHandler() *Handler {
	h := NewHandler(Options{})
	h.Start(policyFunc(func(context.Context, []byte) ([]byte, error) {
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	return h
}
