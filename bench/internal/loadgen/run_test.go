package loadgen

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answer is what a fake webhook replies to a request with uid.
type answer func(uid string) (status int, body string)

// echo is a correct webhook that allows everything.
func echo(uid string) (int, string) {
	return http.StatusOK, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"` + uid + `","allowed":true}}`
}

// fake is a webhook that records what it was sent.
type fake struct {
	srv *httptest.Server

	mu            sync.Mutex
	uids          map[string]int // how often each uid was received
	malformed     []string       // what was wrong with requests that are not like kube-apiserver's
	open, maxOpen int            // connections open now and at most
	accepted      int            // connections accepted in all
}

func newFake(t *testing.T, reply answer) *fake {
	t.Helper()
	f := &fake{uids: map[string]int{}}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			Kind    string `json:"kind"`
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		err := json.NewDecoder(r.Body).Decode(&review)
		f.mu.Lock()
		switch {
		case err != nil:
			f.malformed = append(f.malformed, "decode: "+err.Error())
		case r.Method != http.MethodPost || r.URL.Path != "/mutate" || r.Header.Get("Content-Type") != "application/json":
			f.malformed = append(f.malformed, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		case r.URL.Query().Get("timeout") == "" || review.Kind != "AdmissionReview" || r.ProtoMajor != 1:
			f.malformed = append(f.malformed, fmt.Sprintf("timeout %q, kind %q, %s", r.URL.Query().Get("timeout"), review.Kind, r.Proto))
		}
		f.uids[review.Request.UID]++
		f.mu.Unlock()
		status, body := reply(review.Request.UID)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch s {
		case http.StateNew:
			f.open++
			f.accepted++
			f.maxOpen = max(f.maxOpen, f.open)
		case http.StateClosed, http.StateHijacked:
			f.open--
		}
	}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) url() string { return f.srv.URL + "/mutate" }

func (f *fake) tlsConfig() *tls.Config {
	return f.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
}

// received returns the requests received and whether their uids were all
// distinct.
func (f *fake) received() (n int, distinct bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.uids {
		n += c
	}
	return n, n == len(f.uids)
}

func mustFixtures(t *testing.T, pattern string) []Payload {
	t.Helper()
	var re *regexp.Regexp
	if pattern != "" {
		re = regexp.MustCompile(pattern)
	}
	p, err := LoadFixtures(re)
	require.NoError(t, err)
	return p
}

// The open loop sends exactly the scheduled requests: rate × time, a count
// that does not depend on how fast the machine is.
func TestRun_rate(t *testing.T) {
	t.Parallel()
	f := newFake(t, echo)
	r, err := Run(t.Context(), Options{
		URL:         f.url(),
		TLSConfig:   f.tlsConfig(),
		Payloads:    mustFixtures(t, `^(pod|deployment)/create/absent/inject$`),
		Connections: 4,
		Rate:        200,
		Warmup:      100 * time.Millisecond,
		Duration:    300 * time.Millisecond,
	})
	require.NoError(t, err)

	assert.Equal(t, ModeRate, r.Mode)
	assert.Equal(t, int64(60), r.Scheduled, "200/s for 300ms")
	assert.Equal(t, Counts{Sent: 60, Completed: 60}, r.Counts)
	assert.Equal(t, Counts{Sent: 20, Completed: 20}, r.WarmupCounts, "200/s for 100ms")
	assert.InDelta(t, 200, r.Throughput, 1e-9)
	assert.Equal(t, int64(60), r.Latency.Samples)
	assert.Positive(t, r.Latency.Min)
	assert.Empty(t, r.ErrorExamples)
	assert.Equal(t, 2, r.VerdictChecked)
	assert.Contains(t, r.URL, "timeout=10s")

	n, distinct := f.received()
	assert.Equal(t, 80, n)
	assert.True(t, distinct, "every request has its own uid")
	assert.Empty(t, f.malformed)
	assert.LessOrEqual(t, f.maxOpen, 4)
}

// At saturation every fixture is posted and answered; the connections are
// kept alive and never more than asked for.
func TestRun_saturation(t *testing.T) {
	t.Parallel()
	f := newFake(t, echo)
	payloads := mustFixtures(t, "")
	for i := range payloads {
		payloads[i].Expect = nil // the fake allows everything
	}
	r, err := Run(t.Context(), Options{
		URL:         f.url(),
		TLSConfig:   f.tlsConfig(),
		Payloads:    payloads,
		Connections: 3,
		Warmup:      50 * time.Millisecond,
		Duration:    200 * time.Millisecond,
	})
	require.NoError(t, err)

	assert.Equal(t, ModeSaturation, r.Mode)
	assert.Zero(t, r.Scheduled)
	assert.Positive(t, r.Completed)
	assert.Equal(t, r.Sent, r.Completed)
	assert.Zero(t, r.Failed())
	assert.Equal(t, r.Completed, r.Latency.Samples)
	assert.LessOrEqual(t, r.Latency.P50, r.Latency.P99)
	assert.LessOrEqual(t, r.Latency.P99, r.Latency.Max)
	assert.Positive(t, r.Throughput)
	assert.Positive(t, r.Loadgen.MaxRSS)

	n, distinct := f.received()
	assert.Equal(t, int(r.Sent+r.WarmupCounts.Sent), n)
	assert.True(t, distinct)
	assert.Empty(t, f.malformed)
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.LessOrEqual(t, f.maxOpen, 3, "connections open at once")
	assert.LessOrEqual(t, f.accepted, 3, "connections are reused")
	assert.Positive(t, f.accepted)
}

// Each wrong answer is counted in its class, and only there.
func TestRun_errors(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	allowed := mustFixtures(t, `^pod/create/absent/inject$`)                                  // expects allowed
	unchecked := []Payload{{Name: "x", prefix: allowed[0].prefix, suffix: allowed[0].suffix}} // no expectation

	tests := []struct {
		name     string
		reply    answer
		url      string // instead of the fake's
		payloads []Payload
		timeout  time.Duration
		maxBody  int64
		want     ErrorCounts
		example  string // regexp on the example of the class
	}{
		{
			name:  "wrong uid",
			reply: func(uid string) (int, string) { return echo(uid + "x") },
			want:  ErrorCounts{UIDMismatch: 10},
		},
		{
			name:  "wrong verdict",
			reply: func(uid string) (int, string) { return echo2(uid, "false") },
			want:  ErrorCounts{VerdictMismatch: 10},
		},
		{
			name:     "verdict not checked without an expectation",
			reply:    func(uid string) (int, string) { return echo2(uid, "false") },
			payloads: unchecked,
			want:     ErrorCounts{},
		},
		{
			name:  "status",
			reply: func(string) (int, string) { return http.StatusInternalServerError, "boom" },
			want:  ErrorCounts{HTTPStatus: 10},
		},
		{
			name:  "not JSON",
			reply: func(string) (int, string) { return http.StatusOK, "<html>" },
			want:  ErrorCounts{BadBody: 10},
		},
		{
			name: "not v1",
			reply: func(uid string) (int, string) {
				return http.StatusOK, `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"uid":"` + uid + `","allowed":true}}`
			},
			want: ErrorCounts{BadBody: 10},
		},
		{
			name: "no allowed",
			reply: func(uid string) (int, string) {
				return http.StatusOK, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"` + uid + `"}}`
			},
			want: ErrorCounts{BadBody: 10},
		},
		{
			name:    "too large",
			reply:   echo,
			maxBody: 20,
			want:    ErrorCounts{BadBody: 10},
		},
		{
			name: "connection refused",
			url:  closed.URL + "/mutate",
			want: ErrorCounts{Transport: 10},
		},
		{
			// Every send is due in the past by more than the timeout.
			name:    "late",
			reply:   echo,
			timeout: time.Nanosecond,
			want:    ErrorCounts{Late: 10},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.reply)
			opts := Options{
				URL:              f.url(),
				TLSConfig:        f.tlsConfig(),
				Payloads:         allowed,
				Connections:      2,
				Rate:             100,
				Duration:         100 * time.Millisecond,
				Timeout:          tc.timeout,
				MaxResponseBytes: tc.maxBody,
			}
			if tc.url != "" {
				opts.URL = tc.url
			}
			if tc.payloads != nil {
				opts.Payloads = tc.payloads
			}
			r, err := Run(t.Context(), opts)
			require.NoError(t, err)
			assert.Equal(t, tc.want, r.Errors)
			assert.Equal(t, int64(10), r.Scheduled)
			assert.Equal(t, 10-tc.want.Total(), r.Completed)
			assert.Equal(t, tc.want.Total(), r.Failed())
			assert.ElementsMatch(t, classesOf(tc.want), slices.Collect(maps.Keys(r.ErrorExamples)), "one example per class seen")
		})
	}
}

// echo2 answers with the given verdict.
func echo2(uid, allowed string) (int, string) {
	return http.StatusOK, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"` + uid + `","allowed":` + allowed + `}}`
}

// classesOf names the classes with errors in e.
func classesOf(e ErrorCounts) []string {
	var out []string
	for i, n := range []int64{e.Transport, e.HTTPStatus, e.BadBody, e.UIDMismatch, e.VerdictMismatch, e.Late} {
		if n > 0 {
			out = append(out, classNames[i])
		}
	}
	return out
}

func TestRun_serverPID(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	f := newFake(t, echo)
	r, err := Run(t.Context(), Options{
		URL:         f.url(),
		TLSConfig:   f.tlsConfig(),
		Payloads:    mustFixtures(t, `^pod/create/absent/inject$`),
		Connections: 2,
		Rate:        100,
		Duration:    100 * time.Millisecond,
		ServerPID:   os.Getpid(), // the fake runs in this process
	})
	require.NoError(t, err)
	require.NotNil(t, r.Server)
	s := r.Server
	assert.Empty(t, s.Error)
	assert.Equal(t, os.Getpid(), s.PID)
	assert.Positive(t, s.RSSBefore)
	assert.Positive(t, s.RSSAfter)
	assert.GreaterOrEqual(t, s.PeakRSS, s.RSSAfter)
	assert.GreaterOrEqual(t, s.PeakRSS, s.PeakRSSBefore)
	assert.GreaterOrEqual(t, s.CPUSeconds, 0.0)
}

// A cancelled run stops early, reports what it did and counts no failure.
func TestRun_interrupted(t *testing.T) {
	t.Parallel()
	f := newFake(t, echo)
	ctx, cancel := context.WithCancel(t.Context())
	stop := time.AfterFunc(100*time.Millisecond, cancel)
	defer stop.Stop()
	r, err := Run(ctx, Options{
		URL:         f.url(),
		TLSConfig:   f.tlsConfig(),
		Payloads:    mustFixtures(t, `^pod/create/absent/inject$`),
		Connections: 2,
		Rate:        100,
		Duration:    time.Hour,
	})
	require.NoError(t, err)
	assert.True(t, r.Interrupted)
	assert.Zero(t, r.Failed())
	assert.Equal(t, r.Sent, r.Completed)
}

func TestRun_options(t *testing.T) {
	t.Parallel()
	payloads := []Payload{{Name: "p", prefix: []byte(`{"request":{"uid":"`), suffix: []byte(`"}}`)}}
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "no url", opts: Options{Payloads: payloads}, wantErr: "check options: no url"},
		{name: "no payloads", opts: Options{URL: "https://127.0.0.1:1/"}, wantErr: "check options: no payloads"},
		{name: "negative connections", opts: Options{URL: "https://127.0.0.1:1/", Payloads: payloads, Connections: -1}, wantErr: "check options: connections -1: want 1 to 10000"},
		{name: "too many connections", opts: Options{URL: "https://127.0.0.1:1/", Payloads: payloads, Connections: MaxConnections + 1}, wantErr: "check options: connections 10001: want 1 to 10000"},
		{name: "negative rate", opts: Options{URL: "https://127.0.0.1:1/", Payloads: payloads, Rate: -1}, wantErr: "check options: rate -1: want 0 (saturation) to 1e9 per second"},
		{name: "negative warmup", opts: Options{URL: "https://127.0.0.1:1/", Payloads: payloads, Warmup: -1}, wantErr: "check options: negative duration, warmup or timeout"},
		{name: "scheme", opts: Options{URL: "ftp://127.0.0.1:1/", Payloads: payloads}, wantErr: `url "ftp://127.0.0.1:1/": want https:// (or http://)`},
		{name: "bad url", opts: Options{URL: "https://[::1", Payloads: payloads}, wantErr: `parse url: parse "https://[::1": missing ']' in host`},
		{name: "no such server pid", opts: Options{URL: "https://127.0.0.1:1/", Payloads: payloads, ServerPID: 1 << 30}, wantErr: "sample server: read process stat: open /proc/1073741824/stat: no such file or directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Run(t.Context(), tc.opts)
			assert.EqualError(t, err, tc.wantErr)
		})
	}
}

func Test_requestURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		url  string
		want string
	}{
		{name: "added", url: "https://127.0.0.1:8443/mutate", want: "https://127.0.0.1:8443/mutate?timeout=5s"},
		{name: "kept", url: "https://127.0.0.1:8443/mutate?timeout=1s", want: "https://127.0.0.1:8443/mutate?timeout=1s"},
		{name: "with others", url: "https://h/m?a=b", want: "https://h/m?a=b&timeout=5s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := requestURL(tc.url, 5*time.Second)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestWriteText(t *testing.T) {
	t.Parallel()
	r := &Result{
		URL: "https://127.0.0.1:8443/mutate?timeout=10s", Mode: ModeRate, Rate: 500, Connections: 32,
		Duration: 10 * time.Second, Warmup: 2 * time.Second, Elapsed: 12001 * time.Millisecond,
		Payloads: 2, VerdictChecked: 1, Scheduled: 5000,
		Counts:       Counts{Sent: 4999, Completed: 4998, Errors: ErrorCounts{UIDMismatch: 1, Late: 1}},
		Throughput:   499.8,
		Latency:      Latency{Samples: 4998, Min: 410 * time.Microsecond, Mean: time.Millisecond, P50: 820 * time.Microsecond, P90: 1300 * time.Microsecond, P99: 2900 * time.Microsecond, P999: 5100 * time.Microsecond, Max: 7200 * time.Microsecond},
		WarmupCounts: Counts{Sent: 1000, Completed: 1000},
		ErrorExamples: map[string]string{
			"uid_mismatch": "p: response.uid \"a\", sent \"b\"",
			"late":         "request 9 was more than 10s\nbehind schedule",
		},
		Loadgen:   ProcessUsage{CPUSeconds: 1.25, CPUPer1000: 0.25, MaxRSS: 20 << 20},
		Server:    &ServerUsage{PID: 42, CPUSeconds: 3, CPUPer1000: 0.6, RSSBefore: 30 << 20, RSSAfter: 40 << 20, PeakRSS: 50 << 20, PeakRSSBefore: 35 << 20},
		GoVersion: "go1.26.8", GOOS: "linux", GOARCH: "amd64", GOMAXPROCS: 2, NumCPU: 2,
	}
	var b strings.Builder
	require.NoError(t, WriteText(&b, r))
	want := `url              https://127.0.0.1:8443/mutate?timeout=10s
mode             fixed rate 500/s (open loop, latency from the scheduled time), 32 connections
window           warmup 2s, measured 10s, elapsed 12.001s
payloads         2 (1 with a verdict check)
requests         scheduled 5000, sent 4999, completed 4998, failed 2
warmup requests  sent 1000, completed 1000, failed 0
throughput       499.8/s
latency ms       min 0.410  p50 0.820  p90 1.300  p99 2.900  p99.9 5.100  max 7.200  mean 1.000  (4998 samples)
errors           transport 0, http status 0, bad body 0, uid mismatch 1, verdict mismatch 0, late 1
  uid_mismatch   p: response.uid "a", sent "b"
  late           request 9 was more than 10s behind schedule
loadgen cpu      1.250 s, 0.2500 s per 1000 requests, peak rss 20.0 MiB
server cpu       3.000 s, 0.6000 s per 1000 admissions (pid 42)
server rss       before 30.0 MiB, after 40.0 MiB, peak 50.0 MiB (peak before the run 35.0 MiB)
runtime          go1.26.8 linux/amd64, GOMAXPROCS 2, 2 CPUs
`
	assert.Equal(t, want, b.String())
}
