// Package hostile sends the attacks a fail-closed admission webhook must
// survive to a real `yunikorn-userinfo serve` on 127.0.0.1, one class at a
// time, and checks the bounds: memory, time, metric series, answers. It
// prints what it measured, so the same run serves as a report.
//
// The connection classes attack from 127.0.0.2-127.0.0.9 while 127.0.0.1
// plays the API server, so that they show the per-client limits holding
// attackers without punishing anyone else; they hold some 2,500
// connections, so the test raises its open-file limit (and serve's, which
// it inherits) to the hard limit. The connection-cap flood attacks a
// serve of its own from 127.0.0.2-127.0.0.14 (13 addresses, past
// --max-conns), with 127.0.0.1 trusted by its address or by a client
// certificate.
//
// Run it with `make hostile`. HOSTILE_BINARY names the serve binary
// (default: ../../build/yunikorn-userinfo); HOSTILE_REPORT_ONLY=1 measures
// and prints without failing, to take the figures of an older build.
package hostile

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/yunikorn-userinfo/userinfo/internal/syncbuf"
	"github.com/yunikorn-userinfo/userinfo/internal/testnet"
)

// The container limit the shipped Deployment sets; every class must stay
// well under it.
const containerLimit = 256 << 20

// server is one running serve process.
type server struct {
	cmd     *exec.Cmd
	addr    string
	metrics string
	client  *http.Client
	tlsConf *tls.Config
	stderr  *syncbuf.Buffer
}

func binary(t *testing.T) string {
	t.Helper()
	path := os.Getenv("HOSTILE_BINARY")
	if path == "" {
		path = filepath.Join("..", "..", "build", "yunikorn-userinfo")
	}
	path, err := filepath.Abs(path)
	require.NoError(t, err)
	_, err = os.Stat(path)
	require.NoError(t, err, "serve binary (make build)")
	return path
}

// reportOnly: measure and print, but do not fail on a bound.
func reportOnly() bool { return os.Getenv("HOSTILE_REPORT_ONLY") != "" }

// bound checks a measured figure against its bound and prints both.
func bound(t *testing.T, class, what string, got, limit float64, unit string) {
	t.Helper()
	ok := got <= limit
	mark := "ok"
	if !ok {
		mark = "OVER"
	}
	fmt.Printf("hostile: %-28s %-44s %12.1f %-3s (bound %.0f %s) %s\n", class, what, got, unit, limit, unit, mark)
	if !reportOnly() {
		assert.LessOrEqual(t, got, limit, "%s: %s", class, what)
	}
}

// check is a yes/no property, printed and asserted.
func check(t *testing.T, class, what string, ok bool, detail string) {
	t.Helper()
	mark := "ok"
	if !ok {
		mark = "FAILED"
	}
	fmt.Printf("hostile: %-28s %-44s %s %s\n", class, what, mark, detail)
	if !reportOnly() {
		assert.True(t, ok, "%s: %s: %s", class, what, detail)
	}
}

// startServe runs serve with a self-signed certificate and waits until it
// is ready.
func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	return startServeWith(t, nil, args...)
}

// startServeWith is startServe with a client certificate for its clients
// (serve given --client-ca-file requires one), nil for none.
func startServeWith(t *testing.T, clientCert *tls.Certificate, args ...string) *server {
	t.Helper()
	dir := t.TempDir()
	addrs := testnet.FreeAddrs(t, 2)
	s := &server{addr: addrs[0], metrics: addrs[1], stderr: &syncbuf.Buffer{}}
	all := append([]string{"serve", "--self-signed", "--self-signed-dir", dir, "--listen", s.addr,
		"--metrics-listen", s.metrics, "--log-level", "warn"}, args...)
	s.cmd = exec.Command(binary(t), all...)
	// What serve sets itself inside the shipped Deployment's 256 MiB
	// container (80% of the cgroup limit); this machine has no such limit.
	s.cmd.Env = append(os.Environ(), fmt.Sprintf("GOMEMLIMIT=%d", containerLimit*8/10))
	s.cmd.Stderr = s.stderr
	require.NoError(t, s.cmd.Start())
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ca, err := os.ReadFile(filepath.Join(dir, "ca.crt")); err == nil && s.tlsConf == nil {
			pool := x509.NewCertPool()
			if pool.AppendCertsFromPEM(ca) {
				s.tlsConf = &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
				if clientCert != nil {
					s.tlsConf.Certificates = []tls.Certificate{*clientCert}
				}
				s.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
					TLSClientConfig: s.tlsConf.Clone(), ForceAttemptHTTP2: true, MaxConnsPerHost: 16,
				}}
			}
		}
		if s.client != nil {
			if resp, err := s.client.Get("https://" + s.addr + "/readyz"); err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return s
				}
			}
		}
		require.True(t, time.Now().Before(deadline), "serve did not become ready: %s", s.stderr.String())
		time.Sleep(50 * time.Millisecond)
	}
}

// rss returns the resident set of the process, in bytes; peak the high-water
// mark since the last resetPeak.
func (s *server) rss(t *testing.T) (now, peak float64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			now = kb * 1024
		case "VmHWM:":
			peak = kb * 1024
		}
	}
	return now, peak
}

// resetPeak starts a new high-water mark of the resident set.
func (s *server) resetPeak(t *testing.T) {
	t.Helper()
	require.NoError(t, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.cmd.Process.Pid), []byte("5"), 0))
}

// answer is the part of an AdmissionReview answer the classes look at.
type answer struct {
	HTTP     int
	UID      string
	Allowed  bool
	Code     int
	Message  string
	Patched  bool
	Duration time.Duration
}

func (s *server) review(ctx context.Context, body []byte) (answer, error) {
	return s.reviewWith(ctx, s.client, body)
}

// apiClient is a client as the API server's: HTTP/1.1 only (it calls
// admission webhooks over HTTP/1.1, one connection per call in flight).
func (s *server) apiClient() *http.Client {
	conf := s.tlsConf.Clone()
	conf.NextProtos = []string{"http/1.1"}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: conf, MaxIdleConnsPerHost: 64}}
}

func (s *server) reviewWith(ctx context.Context, client *http.Client, body []byte) (answer, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+s.addr+"/mutate", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	var r struct {
		Response struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
			Patch   []byte `json:"patch"`
			Status  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return answer{}, fmt.Errorf("decode answer (HTTP %d): %w: %.200s", resp.StatusCode, err, out)
	}
	a := answer{HTTP: resp.StatusCode, UID: r.Response.UID, Allowed: r.Response.Allowed,
		Patched: len(r.Response.Patch) > 0, Duration: time.Since(start)}
	if r.Response.Status != nil {
		a.Code, a.Message = r.Response.Status.Code, r.Response.Status.Message
	}
	return a, nil
}

// podReview is a Pod CREATE review by user, with extra JSON members for
// userInfo and metadata.
func podReview(uid, user, userInfoExtra, metadataExtra, operation string) []byte {
	if operation == "" {
		operation = "CREATE"
	}
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"` + uid + `",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"operation":"` + operation + `","namespace":"ns","name":"p","userInfo":{"username":"` + user + `"` + userInfoExtra + `},` +
		`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"` + metadataExtra + `},` +
		`"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}`)
}

// validStillAnswered sends an ordinary review and checks it is answered.
func validStillAnswered(t *testing.T, s *server, class string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	a, err := s.review(ctx, podReview("valid", "alice", "", "", ""))
	ok := err == nil && a.HTTP == 200 && a.Allowed && a.Patched
	check(t, class, "an ordinary review is answered meanwhile", ok, fmt.Sprintf("(%v, %+v)", err, a))
	if err == nil {
		bound(t, class, "its latency", float64(a.Duration.Milliseconds()), 2000, "ms")
	}
}

func TestHostile(t *testing.T) {
	files := raiseFileLimit(t)
	s := startServe(t, "--instances", "2", "--settings-json", `{"externalUsers":["^livy$"]}`)
	base, _ := s.rss(t)
	fmt.Printf("hostile: serve started, RSS %.1f MiB, open-file limit %d\n", base/(1<<20), files)

	t.Run("idle connections, HTTP/1.1", func(t *testing.T) { idleDeclaredHTTP1(t, s); afterAttack(t, s) })
	t.Run("slowloris headers", func(t *testing.T) { slowlorisHeaders(t, s); afterAttack(t, s) })
	t.Run("slow bodies", func(t *testing.T) { slowBodies(t, s); afterAttack(t, s) })
	t.Run("HTTP/2 held streams", func(t *testing.T) { http2HeldStreams(t, s); afterAttack(t, s) })

	t.Run("declared bodies, HTTP/1.1", func(t *testing.T) { declaredBodiesHTTP1(t, s) })
	t.Run("declared bodies, HTTP/2", func(t *testing.T) { declaredBodiesHTTP2(t, s) })
	t.Run("metric labels", func(t *testing.T) { metricLabels(t, s) })
	t.Run("huge object", func(t *testing.T) { hugeObject(t, s) })
	t.Run("deep annotation value", func(t *testing.T) { deepValue(t, s) })
	t.Run("many groups", func(t *testing.T) { manyGroups(t, s) })
	t.Run("settings", func(t *testing.T) { dangerousSettings(t) })
	t.Run("mixed load", mixedLoad)
	t.Run("fat dry-run flood", fatFlood)
	t.Run("connection cap flood, trusted source", func(t *testing.T) { capFlood(t, trustSource) })
	t.Run("connection cap flood, client certificate", func(t *testing.T) { capFlood(t, trustCertificate) })
	t.Run("connection cap flood, no trust", func(t *testing.T) { capFlood(t, trustNone) })
}

// Class 1: requests that declare a 7 MiB body and send only their headers.
func declaredBodiesHTTP1(t *testing.T, s *server) {
	const class, conns = "declared-body/http1", 40
	before, _ := s.rss(t)
	var open []net.Conn
	defer func() {
		for _, c := range open {
			_ = c.Close()
		}
	}()
	for range conns {
		c, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: s.tlsConf.RootCAs, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
		require.NoError(t, err)
		open = append(open, c)
		_, err = fmt.Fprintf(c, "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 7<<20)
		require.NoError(t, err)
	}
	time.Sleep(time.Second)
	after, _ := s.rss(t)
	bound(t, class, fmt.Sprintf("RSS growth, %d connections", conns), (after-before)/(1<<20), 32, "MiB")
	validStillAnswered(t, s, class)
}

// Class 1 over HTTP/2: one connection, many streams, each declaring 7 MiB.
func declaredBodiesHTTP2(t *testing.T, s *server) {
	const class, streams = "declared-body/http2", 100
	before, _ := s.rss(t)
	c, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: s.tlsConf.RootCAs, ServerName: "localhost", NextProtos: []string{"h2"}})
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, "h2", c.ConnectionState().NegotiatedProtocol)
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(c, c)
	require.NoError(t, fr.WriteSettings())
	var maxStreams uint32
	var refused int
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			mu.Lock()
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
					maxStreams = v
				}
			case *http2.RSTStreamFrame:
				refused++
			}
			mu.Unlock()
		}
	}()
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for i := range streams {
		hbuf.Reset()
		for _, h := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "localhost"}, {":path", "/mutate"},
			{"content-type", "application/json"}, {"content-length", strconv.Itoa(7 << 20)}} {
			require.NoError(t, enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]}))
		}
		id := uint32(2*i + 1)
		mu.Lock()
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true})
		if err == nil {
			err = fr.WriteData(id, false, []byte("{"))
		}
		mu.Unlock()
		require.NoError(t, err)
	}
	time.Sleep(time.Second)
	after, _ := s.rss(t)
	mu.Lock()
	fmt.Printf("hostile: %-28s server MAX_CONCURRENT_STREAMS %d, streams reset %d of %d\n", class, maxStreams, refused, streams)
	mu.Unlock()
	bound(t, class, fmt.Sprintf("RSS growth, %d streams on 1 connection", streams), (after-before)/(1<<20), 32, "MiB")
	validStillAnswered(t, s, class)
}

// Class 2: made-up operations and kinds of any length.
func metricLabels(t *testing.T, s *server) {
	const class = "metric-labels"
	round := func(r int) (pageSize, series int) {
		for i := range 40 {
			id := strconv.Itoa(r*100 + i)
			body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"m` + id + `",` +
				`"kind":{"group":"","version":"v1","kind":"Kind` + id + strings.Repeat("k", 1000) + `"},` +
				`"operation":"OP` + id + strings.Repeat("o", 1<<20) + `","userInfo":{"username":"u"}}}`)
			a, err := s.review(t.Context(), body)
			require.NoError(t, err)
			require.Equal(t, 200, a.HTTP)
		}
		resp, err := http.Get("http://" + s.metrics + "/metrics")
		require.NoError(t, err)
		page, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		for _, line := range strings.Split(string(page), "\n") {
			if strings.HasPrefix(line, "yunikorn_userinfo_admissions_total{") {
				series++
			}
		}
		return len(page), series
	}
	size1, series1 := round(1)
	after1, _ := s.rss(t)
	size2, series2 := round(2)
	after2, _ := s.rss(t)
	bound(t, class, "/metrics size after 40 x 1 MiB operations", float64(size1)/1024, 64, "KiB")
	bound(t, class, "/metrics growth after 40 more", float64(size2-size1)/1024, 1, "KiB")
	bound(t, class, "admissions_total series after 80", float64(series2), 16, "")
	check(t, class, "no new series in the second round", series2 == series1, fmt.Sprintf("(%d then %d)", series1, series2))
	// The Go heap breathes with the collector's pace; what must not happen
	// is growth with every round, as the label values did.
	bound(t, class, "RSS growth in the second round", (after2-after1)/(1<<20), 32, "MiB")
	bound(t, class, "RSS after 80", after2/(1<<20), containerLimit*8/10/(1<<20), "MiB")
}

// annotations returns n annotation members.
func annotations(n int) string {
	var b strings.Builder
	b.WriteString(`,"annotations":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"v"`, i)
	}
	b.WriteByte('}')
	return b.String()
}

// Class 3: a Pod with as many annotations as fit in the API server's
// 3 MiB request limit, one and four at once. Four at once are evaluated
// one after another (large requests hold at most one of the two slots):
// on a quiet machine all four are mutated within the deadline; on a busy
// one the last are refused when their turn comes too late.
func hugeObject(t *testing.T, s *server) {
	const class = "huge-object"
	const n = 230_000 // a review of 3.0 MiB, the API server's request limit
	body := podReview("huge", "alice", "", annotations(n), "")
	fmt.Printf("hostile: %-28s review of %.1f MiB, %d annotations\n", class, float64(len(body))/(1<<20), n)
	for _, parallel := range []int{1, 4} {
		s.resetPeak(t)
		var wg sync.WaitGroup
		answers := make([]answer, parallel)
		errs := make([]error, parallel)
		for i := range parallel {
			wg.Go(func() { answers[i], errs[i] = s.review(t.Context(), body) })
		}
		wg.Wait()
		_, peak := s.rss(t)
		var slowest time.Duration
		mutated, refused := 0, 0
		for i := range parallel {
			require.NoError(t, errs[i])
			a := answers[i]
			switch {
			case a.HTTP == 200 && a.Allowed && a.Patched:
				mutated++
			case a.HTTP == 200 && !a.Allowed && (a.Code == 429 || (a.Code == 500 && strings.Contains(a.Message, "deadline"))):
				// Large requests are evaluated --max-concurrent-large (1)
				// at a time: the ones whose turn comes too late for their
				// deadline are refused, busy (429, inside an HTTP 200) or,
				// when the turn came with too little of it left, a guest
				// timeout.
				refused++
				fmt.Printf("hostile: %-28s %d at once: refused in its turn: %d %d %q\n", class, parallel, a.HTTP, a.Code, a.Message)
			default:
				check(t, class, fmt.Sprintf("%d at once: answered, mutated", parallel), false,
					fmt.Sprintf("(%d %v %d %q)", a.HTTP, a.Allowed, a.Code, a.Message))
			}
			slowest = max(slowest, a.Duration)
		}
		if parallel == 1 {
			check(t, class, "1 at once: mutated", mutated == 1, "")
		} else {
			check(t, class, fmt.Sprintf("%d at once: mutated in turn, the rest refused within the deadline", parallel), mutated >= 1,
				fmt.Sprintf("(%d mutated, %d refused)", mutated, refused))
		}
		// Every answer by the deadline (--timeout 2s), plus the transfer.
		bound(t, class, fmt.Sprintf("%d at once: slowest answer", parallel), float64(slowest.Milliseconds()), 2500, "ms")
		// The Go memory limit (80% of the container's) makes the collector
		// work harder rather than let the heap grow past it: the peak stays
		// under the container limit with a margin for memory outside the
		// Go heap (compiled code, thread stacks).
		bound(t, class, fmt.Sprintf("%d at once: peak RSS", parallel), peak/(1<<20), containerLimit*9/10/(1<<20), "MiB")
	}
	validStillAnswered(t, s, class)
}

// Class 4a: an allowed submitter's user.info nested 1,300 levels deep.
func deepValue(t *testing.T, s *server) {
	const class = "deep-annotation-value"
	value, err := json.Marshal(strings.Repeat("[", 1300) + strings.Repeat("]", 1300))
	require.NoError(t, err)
	a, err := s.review(t.Context(), podReview("deep", "livy", "", `,"annotations":{"yunikorn.apache.org/user.info":`+string(value)+`}`, ""))
	require.NoError(t, err)
	check(t, class, "answered 400 naming the annotation, no trap", a.HTTP == 200 && !a.Allowed && a.Code == 400 &&
		strings.Contains(a.Message, "yunikorn.apache.org/user.info is invalid: value nests deeper"),
		fmt.Sprintf("(%d %q)", a.Code, a.Message))
}

// Class 4b: 50,000 groups, again and again on the same instances.
func manyGroups(t *testing.T, s *server) {
	const class = "many-groups"
	groups := make([]string, 50_000)
	for i := range groups {
		groups[i] = "group-" + strconv.Itoa(i)
	}
	g, err := json.Marshal(groups)
	require.NoError(t, err)
	body := podReview("groups", "alice", `,"groups":`+string(g), "", "")
	var times []float64
	failed := 0
	for range 20 {
		a, err := s.review(t.Context(), body)
		require.NoError(t, err)
		if !(a.HTTP == 200 && a.Allowed && a.Patched) {
			failed++
			fmt.Printf("hostile: %-28s failed: %d %q\n", class, a.Code, a.Message)
		}
		times = append(times, float64(a.Duration.Milliseconds()))
	}
	sort.Float64s(times)
	check(t, class, "20 reviews of 50,000 groups all mutated", failed == 0, fmt.Sprintf("(%d failed)", failed))
	bound(t, class, "median answer", times[len(times)/2], 2000, "ms")
	bound(t, class, "slowest answer", times[len(times)-1], 2000, "ms")
}

// Class 5: settings that would trust everyone or split a pattern.
func dangerousSettings(t *testing.T) {
	const class = "settings"
	for _, tc := range []struct{ settings, want string }{
		{`{"externalUsers":[""]}`, `settings.externalUsers[0]: empty pattern`},
		{`{"systemUsers":["^a$",""]}`, `settings.systemUsers[1]: empty pattern`},
		{`{"externalGroups":"^ops$,"}`, `settings.externalGroups[1]: empty pattern`},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		cmd := exec.CommandContext(ctx, binary(t), "run", "-r", "-", "--settings-json", tc.settings)
		cmd.Stdin = bytes.NewReader(podReview("s", "alice", "", "", ""))
		out, err := cmd.CombinedOutput()
		cancel()
		check(t, class, "refused: "+tc.settings, err != nil && strings.Contains(string(out), tc.want), strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "run", "-r", "-", "--settings-json", `{"externalUsers":"^svc-[a-z]{1,8}$"}`)
	cmd.Stdin = bytes.NewReader(podReview("split", "mallory8}", "", `,"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"bob\"}"}`, ""))
	out, err := cmd.Output()
	check(t, class, "{1,8} not split: mallory8} refused", err == nil && strings.Contains(string(out), `"allowed":false`) &&
		strings.Contains(string(out), `"code":403`), strings.TrimSpace(string(out)))
}
