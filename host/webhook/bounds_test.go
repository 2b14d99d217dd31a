package webhook

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stallingBody sends prefix and then blocks until release is closed, as a
// client that declares a large body and sends only part of it.
type stallingBody struct {
	prefix  *strings.Reader
	release chan struct{}
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if b.prefix.Len() > 0 {
		return b.prefix.Read(p)
	}
	<-b.release
	return 0, io.ErrUnexpectedEOF
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestHandler_bodyMemoryFollowsBytesReceived: requests declaring 7 MiB and
// sending 100 bytes hold one small chunk each, not 7 MiB, and valid
// requests keep being answered meanwhile.
func TestHandler_bodyMemoryFollowsBytesReceived(t *testing.T) {
	t.Parallel()
	h := NewHandler(Options{})
	h.Start(policyFunc(func(context.Context, []byte) ([]byte, error) {
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	url := newTestServer(t, h).URL + PathMutate

	const stalled = 20
	release := make(chan struct{})
	done := make(chan struct{}, stalled)
	for range stalled {
		go func() {
			defer func() { done <- struct{}{} }()
			body := &stallingBody{prefix: strings.NewReader(strings.Repeat(" ", 100)), release: release}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
			if err != nil {
				return
			}
			req.ContentLength = DefaultMaxRequestBytes
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}()
	}
	waitFor(t, "the stalled requests to be charged", func() bool { return h.bodyBytes.Load() >= stalled*minBodyChunk })
	assert.Equal(t, int64(stalled*minBodyChunk), h.bodyBytes.Load(),
		"each stalled request holds one chunk, whatever it declared")

	status, _, body := post(t, url, "application/json", reviewBody("while-stalled"))
	require.Equal(t, 200, status)
	assert.True(t, decodeReview(t, body).Response.Allowed)

	close(release)
	for range stalled {
		<-done
	}
	waitFor(t, "the budget to be given back", func() bool { return h.bodyBytes.Load() == 0 })
}

// TestHandler_bodyBudget: past the budget of bodies in flight, a review
// is refused with code 429 inside an HTTP 200, its uid echoed (a busy
// webhook is never skipped under failurePolicy Ignore), and the budget is
// given back afterwards.
func TestHandler_bodyBudget(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg, nil, 1, "test")
	require.NoError(t, err)
	h := NewHandler(Options{Metrics: metrics, MaxBodyBytesInFlight: 256 << 10})
	h.Start(policyFunc(func(context.Context, []byte) ([]byte, error) {
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	url := newTestServer(t, h).URL + PathMutate

	// One stalled request has sent 200 KiB: its buffer takes the budget.
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		body := &stallingBody{prefix: strings.NewReader(strings.Repeat(" ", 200<<10)), release: release}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
		if err != nil {
			return
		}
		req.ContentLength = 1 << 20
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	waitFor(t, "the stalled request to be charged", func() bool { return h.bodyBytes.Load() >= 200<<10 })

	big := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"big","object":{"x":"` +
		strings.Repeat("A", 100<<10) + `"}}}`
	status, _, body := post(t, url, "application/json", big)
	assert.Equal(t, 200, status)
	r := decodeReview(t, body)
	assert.Equal(t, "big", r.Response.UID)
	assert.False(t, r.Response.Allowed)
	assert.Equal(t, 429, r.Response.Status.Code)
	assert.Contains(t, r.Response.Status.Message, "the webhook is busy: request bodies in flight would exceed 262144 bytes")
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.errors.WithLabelValues(CauseOverloaded)))

	close(release)
	<-done
	waitFor(t, "the budget to be given back", func() bool { return h.bodyBytes.Load() == 0 })
	status, _, _ = post(t, url, "application/json", reviewBody("after"))
	assert.Equal(t, 200, status)
}

// TestHandler_slots: work on a request waits for one of MaxConcurrent
// slots within its deadline; one that gets none is refused with code 429
// inside an HTTP 200, its uid echoed.
func TestHandler_slots(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg, nil, 1, "test")
	require.NoError(t, err)
	var running atomic.Int32
	unblock := make(chan struct{})
	h := NewHandler(Options{Metrics: metrics, MaxConcurrent: 1, Timeout: 300 * time.Millisecond})
	h.Start(policyFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		running.Add(1)
		if strings.Contains(string(payload), `"uid":"hold"`) {
			<-unblock
		}
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	url := newTestServer(t, h).URL + PathMutate

	held := make(chan int, 1)
	go func() {
		status, _, _ := post(t, url, "application/json", reviewBody("hold"))
		held <- status
	}()
	waitFor(t, "the first request to hold the slot", func() bool { return running.Load() == 1 })

	status, _, body := post(t, url, "application/json", reviewBody("waits"))
	assert.Equal(t, 200, status)
	r := decodeReview(t, body)
	assert.Equal(t, "waits", r.Response.UID)
	assert.False(t, r.Response.Allowed)
	assert.Equal(t, 429, r.Response.Status.Code)
	assert.Contains(t, r.Response.Status.Message, "the webhook is busy: no slot became free within the deadline")
	assert.Equal(t, int32(1), running.Load(), "the second request never reached the policy")
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.errors.WithLabelValues(CauseBusy)))

	close(unblock)
	assert.Equal(t, 200, <-held)
	status, _, _ = post(t, url, "application/json", reviewBody("next"))
	assert.Equal(t, 200, status)
}

// TestHandler_patchUnderDeadline: computing the patch of a huge mutated
// object counts against the request's deadline.
func TestHandler_patchUnderDeadline(t *testing.T) {
	t.Parallel()
	var annotations strings.Builder
	for i := range 300_000 {
		if i > 0 {
			annotations.WriteByte(',')
		}
		fmt.Fprintf(&annotations, `"k%d":"v"`, i)
	}
	object := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{` + annotations.String() + `}}}`
	// The policy rewrites every annotation and answers only once the
	// deadline has passed: the patch has no time left.
	mutated := strings.ReplaceAll(object, `":"v"`, `":"w"`)
	h := NewHandler(Options{Timeout: 200 * time.Millisecond})
	h.Start(policyFunc(func(ctx context.Context, _ []byte) ([]byte, error) {
		<-ctx.Done()
		return []byte(`{"accepted":true,"mutated_object":` + mutated + `}`), nil
	}), emptySettings)
	url := newTestServer(t, h).URL + PathMutate
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"huge",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":` + object + `}}`

	status, _, respBody := post(t, url, "application/json", body)
	require.Equal(t, 200, status)
	r := decodeReview(t, respBody)
	assert.Equal(t, "huge", r.Response.UID)
	assert.False(t, r.Response.Allowed)
	assert.Contains(t, r.Response.Status.Message, "create patch: context deadline exceeded")
}

// TestMetrics_labelsAreBounded: whatever kinds and operations clients
// send, the admissions metric keeps a fixed set of label values.
func TestMetrics_labelsAreBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg, nil, 1, "test")
	require.NoError(t, err)
	h := NewHandler(Options{Metrics: metrics})
	h.Start(policyFunc(func(context.Context, []byte) ([]byte, error) {
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	url := newTestServer(t, h).URL + PathMutate

	send := func(kind, operation string) {
		body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",` +
			`"kind":{"group":"","version":"v1","kind":"` + kind + `"},"operation":"` + operation + `"}}`
		status, _, _ := post(t, url, "application/json", body)
		require.Equal(t, 200, status)
	}
	for i := range 50 {
		send(fmt.Sprintf("Kind%d%s", i, strings.Repeat("k", 1000)), fmt.Sprintf("OP%d%s", i, strings.Repeat("o", 10000)))
	}
	send("Pod", "CREATE")
	send("Deployment", "UPDATE")

	assert.Equal(t, 3, testutil.CollectAndCount(metrics.admissions), "other/other, Pod/CREATE, Deployment/UPDATE")
	assert.Equal(t, 50.0, testutil.ToFloat64(metrics.admissions.WithLabelValues("other", "other", OutcomeAllowed, stageMutate)))
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.admissions.WithLabelValues("Pod", "CREATE", OutcomeAllowed, stageMutate)))
}
