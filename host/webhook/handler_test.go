package webhook

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

// hostileWasm is testdata/hostile.wat (see its header for what each uid
// prefix makes it do), built with `wat2wasm hostile.wat`.
//
//go:embed testdata/hostile.wasm
var hostileWasm []byte

// review is the decoded answer of the webhook, strictly typed so that a
// malformed answer fails the test.
type review struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Response   fixturecheck.AdmissionResponse `json:"response"`
}

func decodeReview(t *testing.T, body []byte) review {
	t.Helper()
	var r review
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), "answer is an AdmissionReview: %s", body)
	assert.Equal(t, "admission.k8s.io/v1", r.APIVersion)
	assert.Equal(t, "AdmissionReview", r.Kind)
	return r
}

// reviewBody builds an AdmissionReview whose request starts with the uid,
// as the hostile guest needs.
func reviewBody(uid string) string {
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"` + uid +
		`","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"ns","name":"p",` +
		`"userInfo":{"username":"alice"},"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}}}`
}

// hostileEngine compiles the hostile guest.
func hostileEngine(t *testing.T, opts engine.Options) *engine.Engine {
	t.Helper()
	e, err := engine.New(t.Context(), hostileWasm, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

func emptySettings() json.RawMessage { return json.RawMessage("{}") }

// newTestServer serves h over plain HTTP on 127.0.0.1 (the TLS side is
// tested with the real server).
func newTestServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, contentType, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, body
}

func TestHandler_hostileInput(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg, nil, 1, "test")
	require.NoError(t, err)
	h := NewHandler(Options{Metrics: metrics, MaxRequestBytes: 64 << 10})
	h.Start(hostileEngine(t, engine.Options{MaxInstances: 2}), emptySettings)
	srv := newTestServer(t, h)
	url := srv.URL + PathMutate

	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	deep600 := strings.Repeat("[", 600) + strings.Repeat("]", 600)
	tests := []struct {
		name        string
		method      string
		contentType string
		body        string
		chunked     bool
		wantStatus  int
		wantMessage string
		wantCause   string
		// wantUID: refused for its depth or size, not its form, the
		// review the API server may have sent is answered with its uid
		// at HTTP 200 (the code in the review is still wantStatus).
		wantUID string
	}{
		{name: "GET", method: http.MethodGet, wantStatus: 405, wantMessage: "method GET is not allowed", wantCause: CauseMethod},
		{name: "PUT", method: http.MethodPut, contentType: "application/json", body: reviewBody("a1"),
			wantStatus: 405, wantMessage: "method PUT is not allowed", wantCause: CauseMethod},
		{name: "no content type", body: reviewBody("a1"), wantStatus: 415,
			wantMessage: `content type "" is not supported: want application/json`, wantCause: CauseContentType},
		{name: "text/plain", contentType: "text/plain", body: reviewBody("a1"), wantStatus: 415,
			wantMessage: `content type "text/plain" is not supported`, wantCause: CauseContentType},
		{name: "yaml", contentType: "application/yaml", body: reviewBody("a1"), wantStatus: 415,
			wantMessage: "want application/json", wantCause: CauseContentType},
		{name: "latin-1 charset", contentType: "application/json; charset=iso-8859-1", body: reviewBody("a1"),
			wantStatus: 415, wantMessage: "not supported", wantCause: CauseContentType},
		{name: "empty body", contentType: "application/json", wantStatus: 400,
			wantMessage: "request body is empty", wantCause: CauseBadRequest},
		{name: "garbage", contentType: "application/json", body: "\x00\x01hello", wantStatus: 400,
			wantMessage: "decode admission review: invalid character", wantCause: CauseBadRequest},
		{name: "truncated JSON", contentType: "application/json", body: reviewBody("a1")[:80], wantStatus: 400,
			wantMessage: "decode admission review: unexpected end of JSON input", wantCause: CauseBadRequest},
		{name: "deeply nested", contentType: "application/json", body: deep, wantStatus: 400,
			wantMessage: "decode admission review: JSON nests deeper than 512 levels", wantCause: CauseBadRequest},
		{name: "deeply nested object", contentType: "application/json",
			body:       `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a1","object":{"spec":` + deep600 + `}}}`,
			wantStatus: 400, wantMessage: "JSON nests deeper than 512 levels", wantCause: CauseBadRequest, wantUID: "a1"},
		{name: "array", contentType: "application/json", body: `[1,2]`, wantStatus: 400,
			wantMessage: "must be a JSON object, got array", wantCause: CauseBadRequest},
		{name: "null", contentType: "application/json", body: `null`, wantStatus: 400,
			wantMessage: "must be a JSON object, got null", wantCause: CauseBadRequest},
		{name: "no request", contentType: "application/json",
			body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, wantStatus: 400,
			wantMessage: "field request is missing", wantCause: CauseBadRequest},
		{name: "request is a string", contentType: "application/json",
			body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"x"}`, wantStatus: 400,
			wantMessage: "field request: must be a JSON object, got string", wantCause: CauseBadRequest},
		{name: "no uid", contentType: "application/json",
			body:       `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`,
			wantStatus: 400, wantMessage: "field request.uid is missing or empty", wantCause: CauseBadRequest},
		{name: "uid is a number", contentType: "application/json",
			body:       `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":42}}`,
			wantStatus: 400, wantMessage: "field request.uid must be a string, got 42", wantCause: CauseBadRequest},
		{name: "v1beta1", contentType: "application/json",
			body: strings.Replace(reviewBody("a1"), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1), wantStatus: 400,
			wantMessage: `field apiVersion must be "admission.k8s.io/v1", got "admission.k8s.io/v1beta1"`, wantCause: CauseBadRequest},
		{name: "bare request", contentType: "application/json", body: `{"uid":"a1","operation":"CREATE"}`,
			wantStatus: 400, wantMessage: "field apiVersion must be", wantCause: CauseBadRequest},
		{name: "wrong kind", contentType: "application/json",
			body: strings.Replace(reviewBody("a1"), `"kind":"AdmissionReview"`, `"kind":"Pod"`, 1), wantStatus: 400,
			wantMessage: `field kind must be "AdmissionReview", got "Pod"`, wantCause: CauseBadRequest},
		{name: "over the limit", contentType: "application/json",
			body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a1","object":{"x":"` +
				strings.Repeat("A", 70<<10) + `"}}}`,
			wantStatus: 413, wantMessage: "exceeds the limit of 65536 bytes", wantCause: CauseTooLarge, wantUID: "a1"},
		{name: "over the limit, chunked", contentType: "application/json", chunked: true,
			body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a1","object":{"x":"` +
				strings.Repeat("A", 70<<10) + `"}}}`,
			wantStatus: 413, wantMessage: "request body exceeds the limit of 65536 bytes", wantCause: CauseTooLarge, wantUID: "a1"},
		{name: "over the limit, not a review", contentType: "application/json",
			body:       `{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"a1","object":{"x":"` + strings.Repeat("A", 70<<10) + `"}}}`,
			wantStatus: 413, wantMessage: "exceeds the limit of 65536 bytes", wantCause: CauseTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			req, err := http.NewRequestWithContext(t.Context(), method, url, body)
			require.NoError(t, err)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			status, header, respBody := do(t, req)
			if tc.wantUID != "" {
				assert.Equal(t, 200, status)
			} else {
				assert.Equal(t, tc.wantStatus, status)
			}
			assert.Equal(t, "application/json", header.Get("Content-Type"))
			r := decodeReview(t, respBody)
			assert.False(t, r.Response.Allowed)
			assert.Equal(t, tc.wantUID, r.Response.UID)
			require.NotNil(t, r.Response.Status)
			assert.Equal(t, tc.wantStatus, r.Response.Status.Code)
			assert.Contains(t, r.Response.Status.Message, tc.wantMessage)
			if tc.wantStatus == 405 {
				assert.Equal(t, "POST", header.Get("Allow"))
			}
		})
	}

	// Every cause was counted once per case, and the server still answers.
	want := map[string]int{}
	for _, tc := range tests {
		want[tc.wantCause]++
	}
	for cause, n := range want {
		assert.Equal(t, float64(n), testutil.ToFloat64(metrics.errors.WithLabelValues(cause)), cause)
	}
	status, _, body := post(t, url, "application/json", reviewBody("a-after"))
	require.Equal(t, 200, status)
	r := decodeReview(t, body)
	assert.Equal(t, "a-after", r.Response.UID)
	assert.True(t, r.Response.Allowed)
}

// TestHandler_failingGuest: whatever the guest does wrong, the answer is a
// well-formed AdmissionReview with the request's uid, allowed=false and
// code 500, within the deadline; the broken instance is replaced and the
// next request is answered normally.
func TestHandler_failingGuest(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := hostileEngine(t, engine.Options{MaxInstances: 2, Timeout: 5 * time.Second, MemoryLimitPages: 64})
	metrics, err := NewMetrics(reg, e.Stats, 2, "test")
	require.NoError(t, err)
	// Long enough for the guest that grows its memory page by page to reach
	// its limit while the whole suite runs in parallel under -race.
	const timeout = time.Second
	h := NewHandler(Options{Metrics: metrics, Timeout: timeout})
	h.Start(e, emptySettings)
	url := newTestServer(t, h).URL + PathMutate

	tests := []struct {
		name        string
		uid         string
		wantMessage string
		wantCause   string
		replaced    bool
	}{
		{name: "trap", uid: "t1", wantMessage: "guest trapped", wantCause: CauseTrap, replaced: true},
		{name: "loops forever", uid: "l1", wantMessage: "guest timed out", wantCause: CauseTimeout, replaced: true},
		{name: "grows memory without bound", uid: "g1", wantMessage: "guest trapped", wantCause: CauseTrap, replaced: true},
		{name: "proc_exit(1)", uid: "e1", wantMessage: "guest exited", wantCause: CauseExited, replaced: true},
		{name: "invalid JSON", uid: "j1", wantMessage: "decode validation response", wantCause: CauseBadResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.Stats().Replacements
			causeBefore := testutil.ToFloat64(metrics.errors.WithLabelValues(tc.wantCause))
			start := time.Now()
			status, _, body := post(t, url, "application/json", reviewBody(tc.uid))
			elapsed := time.Since(start)
			require.Equal(t, 200, status)
			r := decodeReview(t, body)
			assert.Equal(t, tc.uid, r.Response.UID)
			assert.False(t, r.Response.Allowed)
			require.NotNil(t, r.Response.Status)
			assert.Equal(t, 500, r.Response.Status.Code)
			assert.Contains(t, r.Response.Status.Message, tc.wantMessage)
			assert.NotContains(t, r.Response.Status.Message, "\n", "one line, no stack trace")
			// A correctness bound, not a speed goal: the deadline stopped
			// the guest rather than the test's own timeout.
			assert.Less(t, elapsed, 10*timeout, "answered within the deadline")
			assert.Equal(t, causeBefore+1, testutil.ToFloat64(metrics.errors.WithLabelValues(tc.wantCause)), "counted as %s", tc.wantCause)
			if tc.replaced {
				assert.Equal(t, before+1, e.Stats().Replacements, "the instance was thrown away")
			}

			status, _, body = post(t, url, "application/json", reviewBody("a-"+tc.uid))
			require.Equal(t, 200, status)
			r = decodeReview(t, body)
			assert.True(t, r.Response.Allowed, "the next request is answered normally")
			assert.Equal(t, "a-"+tc.uid, r.Response.UID)
		})
	}
	assert.LessOrEqual(t, e.Stats().Instances, 2)
}

// TestHandler_apiServerTimeout: the API server's ?timeout= shortens the
// deadline, and a full instance set makes a request wait no longer than it.
func TestHandler_apiServerTimeout(t *testing.T) {
	t.Parallel()
	e := hostileEngine(t, engine.Options{MaxInstances: 1, Timeout: time.Minute})
	h := NewHandler(Options{Timeout: time.Minute})
	h.Start(e, emptySettings)
	url := newTestServer(t, h).URL + PathMutate

	start := time.Now()
	status, _, body := post(t, url+"?timeout=200ms", "application/json", reviewBody("l-short"))
	require.Equal(t, 200, status)
	r := decodeReview(t, body)
	assert.Contains(t, r.Response.Status.Message, "guest timed out")
	assert.Less(t, time.Since(start), 20*time.Second, "the API server's timeout, not the handler's minute, applied")

	// Occupy the only instance, then ask with a short API server timeout.
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"?timeout=3s",
			strings.NewReader(reviewBody("l-busy")))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return e.Stats().Idle == 0 && e.Stats().Instances == 1 },
		10*time.Second, 5*time.Millisecond, "the loop holds the instance")
	status, _, body = post(t, url+"?timeout=100ms", "application/json", reviewBody("a-waiting"))
	require.Equal(t, 200, status)
	r = decodeReview(t, body)
	assert.Equal(t, "a-waiting", r.Response.UID)
	assert.False(t, r.Response.Allowed)
	assert.Contains(t, r.Response.Status.Message, "no guest instance available")
	<-busy
}

func TestHandler_readiness(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg, nil, 1, "test")
	require.NoError(t, err)
	h := NewHandler(Options{Metrics: metrics})
	url := newTestServer(t, h).URL

	get := func(path string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+path, nil)
		require.NoError(t, err)
		status, _, _ := do(t, req)
		return status
	}
	assert.Equal(t, 200, get(PathHealthz), "alive while loading")
	assert.Equal(t, 503, get(PathReadyz), "not ready before Start")
	h.SetReady(true)
	assert.Equal(t, 503, get(PathReadyz), "SetReady cannot make it ready without a policy")
	assert.Equal(t, float64(0), testutil.ToFloat64(metrics.ready))

	status, _, body := post(t, url+PathMutate, "application/json", reviewBody("a-early"))
	require.Equal(t, 200, status)
	r := decodeReview(t, body)
	assert.Equal(t, "a-early", r.Response.UID)
	assert.False(t, r.Response.Allowed)
	assert.Equal(t, 503, r.Response.Status.Code)
	assert.Contains(t, r.Response.Status.Message, "not loaded yet")

	h.Start(hostileEngine(t, engine.Options{MaxInstances: 1}), emptySettings)
	assert.Equal(t, 200, get(PathReadyz))
	assert.Equal(t, float64(1), testutil.ToFloat64(metrics.ready))
	h.SetReady(false)
	assert.Equal(t, 503, get(PathReadyz), "shutting down")
	status, _, body = post(t, url+PathMutate, "application/json", reviewBody("a-draining"))
	require.Equal(t, 200, status)
	assert.True(t, decodeReview(t, body).Response.Allowed, "still evaluating while draining")
}

// policyFunc adapts a function to Policy.
type policyFunc func(ctx context.Context, payload []byte) ([]byte, error)

func (f policyFunc) Validate(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}

func TestHandler_panicIsContained(t *testing.T) {
	t.Parallel()
	var calls sync.Map
	h := NewHandler(Options{})
	h.Start(policyFunc(func(_ context.Context, payload []byte) ([]byte, error) {
		if bytes.Contains(payload, []byte(`"uid":"boom"`)) {
			calls.Store("boom", true)
			panic("policy bug")
		}
		return []byte(`{"accepted":true}`), nil
	}), emptySettings)
	url := newTestServer(t, h).URL + PathMutate

	// The review was read: HTTP 200 with its uid, like any failed
	// evaluation.
	status, _, body := post(t, url, "application/json", reviewBody("boom"))
	assert.Equal(t, 200, status)
	r := decodeReview(t, body)
	assert.Equal(t, "boom", r.Response.UID)
	assert.False(t, r.Response.Allowed)
	assert.Equal(t, 500, r.Response.Status.Code)
	assert.Contains(t, r.Response.Status.Message, "internal error: policy bug")
	_, called := calls.Load("boom")
	assert.True(t, called)

	status, _, body = post(t, url, "application/json", reviewBody("fine"))
	require.Equal(t, 200, status)
	assert.True(t, decodeReview(t, body).Response.Allowed)
}

// TestHandler_passesThrough: the policy's verdict, message, code and the
// settings in force at the time of each request reach the answer.
func TestHandler_passesThrough(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	current := json.RawMessage(`{"v":1}`)
	seen := make(chan string, 2)
	h := NewHandler(Options{})
	h.Start(policyFunc(func(_ context.Context, payload []byte) ([]byte, error) {
		var p struct {
			Settings json.RawMessage `json:"settings"`
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, err
		}
		seen <- string(p.Settings)
		return []byte(`{"accepted":false,"message":"no <way> & never","code":403,"warnings":["w1"]}`), nil
	}), func() json.RawMessage { mu.Lock(); defer mu.Unlock(); return current })
	url := newTestServer(t, h).URL + PathMutate

	status, _, body := post(t, url, "application/json; charset=utf-8", reviewBody("x1"))
	require.Equal(t, 200, status)
	r := decodeReview(t, body)
	assert.Equal(t, "x1", r.Response.UID)
	assert.False(t, r.Response.Allowed)
	assert.Equal(t, 403, r.Response.Status.Code)
	assert.Equal(t, "no <way> & never", r.Response.Status.Message)
	assert.Equal(t, []string{"w1"}, r.Response.Warnings)
	assert.Equal(t, `{"v":1}`, <-seen)

	mu.Lock()
	current = json.RawMessage(`{"v":2}`)
	mu.Unlock()
	_, _, _ = post(t, url, "application/json", reviewBody("x2"))
	assert.Equal(t, `{"v":2}`, <-seen, "settings are read per request")
}

// TestHandler_hammer runs many concurrent requests of every kind against
// two instances: every answer must carry its own uid and the right verdict
// (run under -race by make test).
func TestHandler_hammer(t *testing.T) {
	t.Parallel()
	e := hostileEngine(t, engine.Options{MaxInstances: 2, MemoryLimitPages: 64})
	h := NewHandler(Options{Timeout: 2 * time.Second})
	h.Start(e, emptySettings)
	url := newTestServer(t, h).URL + PathMutate

	const workers, perWorker = 16, 40
	kinds := []struct {
		prefix  string
		allowed bool
		code    int
	}{
		{prefix: "a", allowed: true},
		{prefix: "d", code: 403},
		{prefix: "t", code: 500},
		{prefix: "j", code: 500},
		{prefix: "e", code: 500},
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 30 * time.Second}
			for i := range perWorker {
				k := kinds[(w+i)%len(kinds)]
				uid := fmt.Sprintf("%s-%d-%d", k.prefix, w, i)
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(reviewBody(uid)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				var r review
				if err := json.Unmarshal(body, &r); err != nil {
					errs <- fmt.Errorf("%s: %w", uid, err)
					continue
				}
				code := 0
				if r.Response.Status != nil {
					code = r.Response.Status.Code
				}
				if r.Response.UID != uid || r.Response.Allowed != k.allowed || code != k.code {
					errs <- fmt.Errorf("%s: got uid %q allowed %v code %d", uid, r.Response.UID, r.Response.Allowed, code)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := e.Stats()
	assert.LessOrEqual(t, st.Instances, 2, "the instance set stays bounded")
	assert.Positive(t, st.Replacements)
}
