package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunkedReader hands out data in the given chunk sizes, and before each
// Read records what its reader had charged so far.
type chunkedReader struct {
	data     []byte
	chunks   []int
	inFlight *atomic.Int64
	// atRead[i] is the charge when Read i was called, received[i] the
	// bytes handed out before it.
	atRead, received []int64
	sent             int
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	r.atRead = append(r.atRead, r.inFlight.Load())
	r.received = append(r.received, int64(r.sent))
	if r.sent == len(r.data) {
		return 0, io.EOF
	}
	n := len(r.data) - r.sent
	if len(r.chunks) > 0 {
		n = min(n, r.chunks[0])
		r.chunks = r.chunks[1:]
	}
	n = copy(p, r.data[r.sent:r.sent+n])
	r.sent += n
	return n, nil
}

// budgetOf is a budget of limit bytes counted in inFlight, with no
// large bodies.
func budgetOf(inFlight *atomic.Int64, limit int64) *bodyBudget {
	return &bodyBudget{all: inFlight, large: new(atomic.Int64), limit: limit, largeLimit: limit, largeFrom: 1 << 40}
}

// TestReadBody_chargesOnlyWhatArrived: whatever the sizes the bytes
// arrive in, a body is charged nothing before its first byte, never more
// than twice what it received (or 1 KiB) while it waits for more, and the
// body read is exact.
func TestReadBody_chargesOnlyWhatArrived(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		size := rng.IntN(200 << 10)
		if i%10 == 0 {
			size = rng.IntN(3 << 10)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte('a' + j%26)
		}
		var chunks []int
		for range 50 {
			chunks = append(chunks, 1+rng.IntN([]int{1, 100, 5000, 70000}[rng.IntN(4)]))
		}
		var inFlight atomic.Int64
		r := &chunkedReader{data: data, chunks: chunks, inFlight: &inFlight}
		body, charged, err := readBody(r, DefaultMaxRequestBytes, budgetOf(&inFlight, 1<<30), false)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, body), "case %d: body read exactly", i)
		require.Equal(t, charged.bytes, inFlight.Load(), "case %d: the charge returned is what the budget holds", i)
		assert.Equal(t, int64(cap(body)), charged.bytes, "case %d: the charge is the buffer", i)
		assert.Equal(t, int64(0), r.atRead[0], "case %d: nothing charged before the first byte", i)
		for k := range r.atRead {
			assert.LessOrEqual(t, r.atRead[k], max(minBodyChunk, 2*r.received[k]),
				"case %d, read %d: charged %d after receiving %d bytes", i, k, r.atRead[k], r.received[k])
		}
		putBody(body)
	}
}

// TestReadBody_budget: a read that would take the bodies in flight past
// the budget stops with errBudget, charging nothing more; the charge it
// returns is what it still holds.
func TestReadBody_budget(t *testing.T) {
	t.Parallel()
	var inFlight atomic.Int64
	inFlight.Store(60 << 10) // other requests' bodies
	data := bytes.Repeat([]byte("x"), 10<<10)
	_, charged, err := readBody(bytes.NewReader(data), DefaultMaxRequestBytes, budgetOf(&inFlight, 64<<10), false)
	require.ErrorIs(t, err, errBudget)
	assert.Equal(t, int64(4<<10), charged.bytes, "the 1, 2 and 4 KiB buffers fit; the 8 KiB one does not")
	assert.Equal(t, int64(64<<10), inFlight.Load())

	// A body whose first byte does not fit is charged nothing.
	_, charged, err = readBody(strings.NewReader("{"), DefaultMaxRequestBytes, budgetOf(&inFlight, 64<<10), false)
	require.ErrorIs(t, err, errBudget)
	assert.Zero(t, charged.bytes)
	assert.Equal(t, int64(64<<10), inFlight.Load())
}

// TestReadBody_limit: a body one byte over the limit is noticed with a
// buffer of limit+1 bytes at most.
func TestReadBody_limit(t *testing.T) {
	t.Parallel()
	for _, limit := range []int64{10, 1 << 10, 5000, 64 << 10} {
		var inFlight atomic.Int64
		data := bytes.Repeat([]byte("x"), int(limit)+1)
		rec := httptestRecorder{}
		_, charged, err := readBody(http.MaxBytesReader(rec, io.NopCloser(bytes.NewReader(data)), limit), limit, budgetOf(&inFlight, 1<<30), false)
		var mbe *http.MaxBytesError
		require.ErrorAs(t, err, &mbe, "limit %d", limit)
		assert.LessOrEqual(t, charged.bytes, limit+1, "limit %d", limit)

		body, _, err := readBody(http.MaxBytesReader(rec, io.NopCloser(bytes.NewReader(data[:limit])), limit), limit, budgetOf(&inFlight, 1<<30), false)
		require.NoError(t, err, "limit %d", limit)
		assert.Len(t, body, int(limit))
	}
}

// httptestRecorder is the ResponseWriter http.MaxBytesReader wants.
type httptestRecorder struct{}

func (httptestRecorder) Header() http.Header         { return http.Header{} }
func (httptestRecorder) Write(p []byte) (int, error) { return len(p), nil }
func (httptestRecorder) WriteHeader(int)             {}

// TestHandler_headersOnlyHoldNothing: hundreds of requests that declare
// 7 MiB and send no byte of it hold no share of the body budget, however
// small the budget: an ordinary review is answered meanwhile, and the
// budget is whole when they go.
func TestHandler_headersOnlyHoldNothing(t *testing.T) {
	t.Parallel()
	h := NewHandler(Options{MaxBodyBytesInFlight: 64 << 10, MaxRequestsPerClient: -1})
	h.Start(policyFunc(func(context.Context, []byte) ([]byte, error) {
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	var reading atomic.Int64
	srv := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &firstReadCounter{ReadCloser: r.Body, count: &reading}
		h.ServeHTTP(w, r)
	}))

	const idle = 300
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range idle {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = fmt.Fprintf(c, "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", DefaultMaxRequestBytes)
		require.NoError(t, err)
	}
	waitFor(t, "the requests to wait in readBody for their first byte", func() bool { return reading.Load() == idle })
	assert.Zero(t, h.bodyBytes.Load(), "requests that sent no body byte are charged nothing")

	for i := range 5 {
		status, _, body := post(t, srv.URL+PathMutate, "application/json", reviewBody(fmt.Sprint("ordinary-", i)))
		require.Equal(t, 200, status)
		assert.True(t, decodeReview(t, body).Response.Allowed)
	}

	// One byte each: 1 KiB each, so 64 of them fill the 64 KiB budget and
	// the others are refused 503, not held.
	for _, c := range conns {
		_, _ = c.Write([]byte("{"))
	}
	waitFor(t, "the first bytes to be charged", func() bool { return h.bodyBytes.Load() == 64<<10 })
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	waitFor(t, "the budget to be given back", func() bool { return h.bodyBytes.Load() == 0 })
}

// firstReadCounter counts, once per body, the handler's first Read: from
// then on the request is past every check made before its body is read.
type firstReadCounter struct {
	io.ReadCloser
	count *atomic.Int64
	once  sync.Once
}

func (r *firstReadCounter) Read(p []byte) (int, error) {
	r.once.Do(func() { r.count.Add(1) })
	return r.ReadCloser.Read(p)
}
