package webhook

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReviewUID: the uid is read from the first bytes of a review as the
// API server writes it, and from nothing else.
func TestReviewUID(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body, want string }{
		{"API server's order", `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u1","kind":`, "u1"},
		{"apiVersion first", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u2"`, "u2"},
		{"truncated in the uid", `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u3`, ""},
		{"uid not first", `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"kind":{},"uid":"u4"}}`, ""},
		{"no kind", `{"apiVersion":"admission.k8s.io/v1","request":{"uid":"u5"}}`, ""},
		{"v1beta1", `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"u6"}}`, ""},
		{"not a review", `{"kind":"Pod","apiVersion":"admission.k8s.io/v1","request":{"uid":"u7"}}`, ""},
		{"other member first", `{"response":{},"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u8"}}`, ""},
		{"uid a number", `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":8}}`, ""},
		{"request a string", `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":"x"}`, ""},
		{"array", `[1]`, ""},
		{"empty", ``, ""},
		{"garbage", "\x00\x01", ""},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, reviewUID([]byte(tc.body)), tc.name)
	}
}

// TestHandler_busyIsAReview: past MaxRequestsPerClient, a review is
// refused inside an HTTP 200 with its uid and code 429, so that
// failurePolicy Ignore never skips it for a busy webhook; a request that
// sends no body to read a uid from is answered 429 after uidWait.
func TestHandler_busyIsAReview(t *testing.T) {
	t.Parallel()
	var running atomic.Int32
	unblock := make(chan struct{})
	h := NewHandler(Options{MaxRequestsPerClient: 1})
	h.Start(policyFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		running.Add(1)
		if strings.Contains(string(payload), `"uid":"hold"`) {
			<-unblock
		}
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	srv := newTestServer(t, h)
	url := srv.URL + PathMutate
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release) // before the server's Close, also on a failure

	held := make(chan int, 1)
	go func() {
		status, _, _ := post(t, url, "application/json", reviewBody("hold"))
		held <- status
	}()
	waitFor(t, "the first request to be evaluated", func() bool { return running.Load() == 1 })

	status, header, body := post(t, url, "application/json", reviewBody("busy"))
	require.Equal(t, 200, status, "a busy answer is a review")
	assert.Equal(t, "application/json", header.Get("Content-Type"))
	r := decodeReview(t, body)
	assert.Equal(t, "busy", r.Response.UID)
	assert.False(t, r.Response.Allowed)
	require.NotNil(t, r.Response.Status)
	assert.Equal(t, 429, r.Response.Status.Code)
	assert.Contains(t, r.Response.Status.Message, "the webhook is busy: too many requests in flight from 127.0.0.1: at most 1 at once")
	assert.Equal(t, int32(1), running.Load(), "the refused review was not evaluated")

	// Headers only: nothing to read a uid from.
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, RetryAfterSeconds, resp.Header.Get("Retry-After"))

	release()
	assert.Equal(t, 200, <-held)
}

// TestHandler_largeBodiesKeepTheirReserve: large bodies waiting for their
// slot hold at most their reserve (half the budget), so one user's fat
// reviews cannot take the budget from the ordinary ones: those are all
// evaluated, and the large ones past the reserve are refused with code 429
// inside an HTTP 200, their uid echoed.
func TestHandler_largeBodiesKeepTheirReserve(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := NewHandler(Options{MaxBodyBytesInFlight: 256 << 10, MaxRequestBytes: 100 << 10, LargeRequestBytes: 16 << 10,
		MaxRequestsPerClient: -1})
	require.Equal(t, int64(128<<10), h.budget.largeLimit, "half of the budget")
	h.Start(policyFunc(func(context.Context, []byte) ([]byte, error) {
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	url := newTestServer(t, h).URL + PathMutate

	// Large bodies of one user, 40 KiB sent of each, stalled: each holds a
	// 64 KiB buffer, so two fill the reserve; without it, four would fill
	// the whole budget.
	fat := func(i int) string {
		return `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"fat-` + fmt.Sprint(i) + `","object":"` +
			strings.Repeat("A", 40<<10)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	for i := range 2 {
		wg.Go(func() {
			body := &stallingBody{prefix: strings.NewReader(fat(i)), release: release}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
			if err != nil {
				return
			}
			req.ContentLength = 90 << 10
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		})
	}
	waitFor(t, "two large bodies to hold the reserve", func() bool { return h.largeBodyBytes.Load() == 128<<10 })
	assert.Equal(t, int64(128<<10), h.bodyBytes.Load(), "they hold nothing else")

	// More of them, sent whole, are refused: a review at HTTP 200.
	for i := 2; i < 6; i++ {
		status, _, body := post(t, url, "application/json", fat(i)+`"}}`)
		require.Equal(t, 200, status)
		r := decodeReview(t, body)
		assert.Equal(t, fmt.Sprint("fat-", i), r.Response.UID, "uid echoed")
		assert.False(t, r.Response.Allowed)
		require.NotNil(t, r.Response.Status)
		assert.Equal(t, 429, r.Response.Status.Code)
		assert.Contains(t, r.Response.Status.Message, "the webhook is busy: large request bodies in flight would exceed 131072 bytes")
	}

	for i := range 20 {
		status, _, body := post(t, url, "application/json", reviewBody(fmt.Sprint("ordinary-", i)))
		require.Equal(t, 200, status)
		r := decodeReview(t, body)
		assert.True(t, r.Response.Allowed, "ordinary review %d evaluated: %+v", i, r.Response.Status)
	}
	assert.LessOrEqual(t, h.largeBodyBytes.Load(), int64(128<<10))
}
