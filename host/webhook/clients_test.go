package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// from dials addr from the loopback address src (127.0.0.2, ...), as
// another client would.
func from(src string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
}

// tlsFrom opens a TLS connection to addr from src and completes the
// handshake, offering the given protocols; offering none, it also waits
// 100 ms for a reset.
func tlsFrom(src, addr string, protos ...string) (*tls.Conn, error) {
	c, err := tls.DialWithDialer(from(src), "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: protos}) //nolint:gosec // only the connection matters
	if err != nil || len(protos) > 0 {
		return c, err
	}
	// A refused connection may complete the client's side of a TLS 1.3
	// handshake before the reset arrives: a read tells.
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			_ = c.Close()
			return nil, err
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, nil
}

// busyFrom opens a TLS connection to addr from src and sends the headers
// of a request declaring a body it does not send: a proven connection,
// busy until the read timeout.
func busyFrom(src, addr string) (*tls.Conn, error) {
	c, err := tlsFrom(src, addr, "http/1.1")
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, "POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// provenConns returns the connections srv counts against MaxConns.
func provenConns(srv *Server) int {
	t := srv.admit.t
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.proven[untrusted] + t.proven[trusted]
}

// closedByServer reports whether the server closes c within 5 s.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	ne, ok := err.(net.Error)
	return err != nil && !(ok && ne.Timeout())
}

// TestServer_connectionLimits: one address holds at most
// MaxConnsPerClient connections and all of them MaxConns busy ones; a
// connection past the per-client limit is closed before its handshake;
// past MaxConns with none idle, one from an address holding fewer takes
// the place of the silent-longest connection of the address holding the
// most, and one from an address holding as many is refused when it sends
// its request, counted by reason; other addresses keep connecting, and a
// closed connection gives its place back.
func TestServer_connectionLimits(t *testing.T) {
	t.Parallel()
	tlsConfig, client := testTLS(t)
	var mu sync.Mutex
	refused := map[string]int{}
	srv := startServer(t, ServerOptions{
		Listener: loopback(t), TLSConfig: tlsConfig, Handler: acceptingHandler(),
		MaxConnsPerClient: 5, MaxConns: 9,
		OnConnRefused: func(reason string) { mu.Lock(); refused[reason]++; mu.Unlock() },
	})
	addr := srv.Addr().String()
	refusedOf := func(reason string) int { mu.Lock(); defer mu.Unlock(); return refused[reason] }

	var held []*tls.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for i := range 5 {
		c, err := busyFrom("127.0.0.2", addr)
		require.NoError(t, err, "connection %d from 127.0.0.2", i)
		held = append(held, c)
	}
	for range 3 {
		_, err := tlsFrom("127.0.0.2", addr)
		require.Error(t, err, "a sixth connection from 127.0.0.2 is refused")
	}
	assert.Equal(t, 3, refusedOf(refusedPerClient))

	// Another client is not punished for 127.0.0.2's connections.
	r, _ := postOver(t, client, srv, "other-client")
	assert.Equal(t, "other-client", r.Response.UID)
	client.CloseIdleConnections()
	waitFor(t, "the client's connection to be given back", func() bool { return srv.Connections() == 5 })

	for i := range 4 {
		c, err := busyFrom("127.0.0.3", addr)
		require.NoError(t, err, "connection %d from 127.0.0.3", i)
		held = append(held, c)
	}
	waitFor(t, "the server to read the nine requests", func() bool { return provenConns(srv) == 9 })
	// Every place busy: a tenth connection from an address holding none
	// takes the place of the one silent longest (the first) of the address
	// holding the most, 127.0.0.2 (5 against 4): shares, not first come.
	c, err := busyFrom("127.0.0.4", addr)
	require.NoError(t, err, "the handshake of a tenth connection")
	held = append(held, c)
	assert.True(t, closedByServer(held[0]), "127.0.0.2's silent-longest connection gives up its place")
	held = held[1:]
	assert.Zero(t, refusedOf(refusedTotal))
	waitFor(t, "the tenth request to be read", func() bool { return provenConns(srv) == 9 })
	// 127.0.0.3 holds as many as any address now (4): its newcomer is
	// refused when it sends its request.
	c, err = busyFrom("127.0.0.3", addr)
	require.NoError(t, err, "the handshake of 127.0.0.3's fifth connection")
	assert.True(t, closedByServer(c), "past MaxConns, all busy, a request from an address holding the most is refused")
	_ = c.Close()
	assert.Equal(t, 1, refusedOf(refusedTotal))

	require.NoError(t, held[0].Close())
	held = held[1:]
	waitFor(t, "the closed connection to give its place back", func() bool { return srv.Connections() == 8 })
	r, _ = postOver(t, client, srv, "after")
	assert.Equal(t, "after", r.Response.UID)
}

// h2Event is a frame the tests look at, copied out of the framer (whose
// frames are only valid until its next read): response headers (status
// set) or a reset (reset true).
type h2Event struct {
	stream  uint32
	status  string
	reset   bool
	errCode http2.ErrCode
}

// h2Conn is a raw HTTP/2 client connection that opens streams declaring a
// body and sends none of it.
type h2Conn struct {
	t      *testing.T
	fr     *http2.Framer
	mu     sync.Mutex
	next   uint32
	hbuf   bytes.Buffer
	enc    *hpack.Encoder
	events chan h2Event
	// settings holds the server's MAX_CONCURRENT_STREAMS once seen.
	maxStreams chan uint32
}

func dialH2(t *testing.T, src, addr string) *h2Conn {
	t.Helper()
	c, err := tlsFrom(src, addr, "h2")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.Equal(t, "h2", c.ConnectionState().NegotiatedProtocol)
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	h := &h2Conn{t: t, fr: http2.NewFramer(c, c), next: 1, events: make(chan h2Event, 1024), maxStreams: make(chan uint32, 1)}
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.enc = hpack.NewEncoder(&h.hbuf)
	require.NoError(t, h.fr.WriteSettings())
	go func() {
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				close(h.events)
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
					select {
					case h.maxStreams <- v:
					default:
					}
				}
				if !f.IsAck() {
					h.mu.Lock()
					_ = h.fr.WriteSettingsAck()
					h.mu.Unlock()
				}
			case *http2.RSTStreamFrame:
				h.events <- h2Event{stream: f.StreamID, reset: true, errCode: f.ErrCode}
			case *http2.MetaHeadersFrame:
				h.events <- h2Event{stream: f.StreamID, status: f.PseudoValue("status")}
			}
		}
	}()
	return h
}

// open starts a POST /mutate stream that declares 7 MiB and sends nothing.
func (h *h2Conn) open() uint32 {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", PathMutate},
		{"content-type", "application/json"}, {"content-length", strconv.Itoa(DefaultMaxRequestBytes)}} {
		require.NoError(h.t, h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
	}
	id := h.next
	h.next += 2
	require.NoError(h.t, h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hbuf.Bytes(), EndHeaders: true}))
	return id
}

// event waits for the next RST_STREAM or response headers.
func (h *h2Conn) event() h2Event {
	h.t.Helper()
	select {
	case e, ok := <-h.events:
		require.True(h.t, ok, "connection closed")
		return e
	case <-time.After(5 * time.Second):
		h.t.Fatal("no answer within 5 s")
		return h2Event{}
	}
}

// answer waits for the response headers or the reset of stream id,
// skipping the frames of other streams (such as the NO_ERROR reset that
// follows an answer given before the body).
func (h *h2Conn) answer(id uint32) h2Event {
	h.t.Helper()
	for {
		if e := h.event(); e.stream == id {
			return e
		}
	}
}

// TestServer_http2Streams: the server announces MaxConcurrentStreams and
// refuses a stream past it; a client's streams on all its connections
// together are bounded by MaxRequestsPerClient (429 at once, nothing
// held), while another client is answered.
func TestServer_http2Streams(t *testing.T) {
	t.Parallel()
	tlsConfig, client := testTLS(t)
	h := NewHandler(Options{MaxRequestsPerClient: 6})
	h.Start(policyFunc(func(context.Context, []byte) ([]byte, error) {
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	srv := startServer(t, ServerOptions{Listener: loopback(t), TLSConfig: tlsConfig, Handler: h, MaxConcurrentStreams: 4})
	addr := srv.Addr().String()

	a := dialH2(t, "127.0.0.2", addr)
	select {
	case v := <-a.maxStreams:
		assert.Equal(t, uint32(4), v, "the server announces its stream limit")
	case <-time.After(5 * time.Second):
		t.Fatal("no SETTINGS from the server")
	}
	for range 4 {
		a.open()
	}
	over := a.open()
	e := a.answer(over)
	assert.True(t, e.reset, "a fifth stream on the connection is reset, got %+v", e)
	assert.NotEqual(t, http2.ErrCodeNo, e.errCode, "refused, not ended")

	// The same client on a second connection: two more requests fit in
	// its 6, the next ones are answered 429 at once.
	b := dialH2(t, "127.0.0.2", addr)
	waitFor(t, "127.0.0.2's four streams to reach the handler", func() bool {
		n, _ := h.clients.held(clientIP("127.0.0.2:1"))
		return n == 4
	})
	b.open()
	b.open()
	waitFor(t, "six requests held", func() bool { n, _ := h.clients.held(clientIP("127.0.0.2:1")); return n == 6 })
	for range 2 {
		e := b.answer(b.open())
		assert.Equal(t, "429", e.status, "answered at once, got %+v", e)
	}
	n, _ := h.clients.held(clientIP("127.0.0.2:1"))
	assert.Equal(t, 6, n, "the refused requests hold nothing")
	assert.Zero(t, h.bodyBytes.Load(), "streams that sent no body hold no body budget")

	r, resp := postOver(t, client, srv, "other")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "other", r.Response.UID)
}

// TestHandler_largeRequestsKeepAReserve: large requests hold at most
// MaxConcurrentLarge of the slots, so ordinary reviews are answered while
// heavy ones take as long as they take.
func TestHandler_largeRequestsKeepAReserve(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var inLarge sync.WaitGroup
	inLarge.Add(1)
	var once sync.Once
	h := NewHandler(Options{MaxConcurrent: 2, LargeRequestBytes: 4 << 10, Timeout: 10 * time.Second})
	assert.Equal(t, 1, h.opts.MaxConcurrentLarge, "half of the slots by default")
	h.Start(policyFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		if len(payload) > 4<<10 {
			once.Do(inLarge.Done)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	url := newTestServer(t, h).URL + PathMutate
	large := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"large","object":{"x":"` +
		string(bytes.Repeat([]byte("A"), 8<<10)) + `"}}}`

	var wg sync.WaitGroup
	statuses := make([]int, 3)
	for i := range statuses {
		wg.Go(func() { statuses[i], _, _ = post(t, url, "application/json", large) })
	}
	inLarge.Wait()
	waitFor(t, "the other large ones to wait for the large slot", func() bool { return h.waitingLarge.Load() == 2 })
	// An ordinary review that waited for a slot would be refused 503 at
	// its deadline, with the large ones still held.
	for i := range 5 {
		status, _, body := post(t, url, "application/json", reviewBody(strconv.Itoa(i)))
		require.Equal(t, 200, status, "an ordinary review does not wait for the large ones")
		assert.True(t, decodeReview(t, body).Response.Allowed)
	}
	assert.Equal(t, int32(2), h.waitingLarge.Load(), "the large ones were still waiting")
	close(release)
	wg.Wait()
	assert.Equal(t, []int{200, 200, 200}, statuses, "the large requests are answered in turn")
}
