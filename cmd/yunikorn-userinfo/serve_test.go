package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/host/certwatch"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
	"github.com/yunikorn-userinfo/userinfo/internal/syncbuf"
	"github.com/yunikorn-userinfo/userinfo/internal/testnet"
)

// hostileGuest is the webhook package's failure-test guest: the first
// character of request.uid picks what validate does (see its .wat).
const hostileGuest = "../../host/webhook/testdata/hostile.wasm"

// syncBuffer holds the server's log, written and read concurrently.
type syncBuffer = syncbuf.Buffer

// tlsFiles is a CA and a serving certificate for 127.0.0.1 on disk.
type tlsFiles struct {
	ca       *certwatch.CA
	certFile string
	keyFile  string
}

func newTLSFiles(t *testing.T) *tlsFiles {
	t.Helper()
	ca, err := certwatch.NewCA("serve test CA", time.Hour)
	require.NoError(t, err)
	dir := t.TempDir()
	f := &tlsFiles{ca: ca, certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	f.rotate(t)
	return f
}

// rotate writes a new serving certificate and returns its serial.
func (f *tlsFiles) rotate(t *testing.T) *big.Int {
	t.Helper()
	certPEM, keyPEM, err := f.ca.Issue(certwatch.IssueOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	require.NoError(t, err)
	writeAtomically(t, f.keyFile, keyPEM)
	writeAtomically(t, f.certFile, certPEM)
	leaf, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(leaf.Certificate[0])
	require.NoError(t, err)
	return cert.SerialNumber
}

func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func (f *tlsFiles) client(t *testing.T, clientCert *tls.Certificate) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(f.ca.Certificate())
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if clientCert != nil {
		cfg.Certificates = []tls.Certificate{*clientCert}
	}
	tr := &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// server is a `serve` running in-process.
type server struct {
	url     string // https://127.0.0.1:port
	metrics string // http://127.0.0.1:port
	stderr  *syncBuffer
	stop    context.CancelFunc
	exited  chan struct{} // closed when serve returned
	code    int           // its exit code, once exited is closed
}

// wait returns the exit code, failing the test if serve does not exit.
func (s *server) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.exited:
		return s.code
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit")
		return -1
	}
}

var readyLine = regexp.MustCompile(`(?m)^yunikorn_userinfo_ready 1$`)

// startServe runs `serve` with args plus listen flags on 127.0.0.1:0 and
// waits until it is ready. With wantReady false it only waits for the
// listeners (or for an early exit).
func startServe(t *testing.T, cache wazero.CompilationCache, wantReady bool, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{stderr: &syncBuffer{}, stop: cancel, exited: make(chan struct{})}
	listening := make(chan struct{})
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, args...)
	go func() {
		defer close(s.exited)
		s.code = runWith(ctx, args, deps{
			stdin: strings.NewReader(""), stdout: io.Discard, stderr: s.stderr,
			policy: embeddedPolicy, cache: cache,
			onListen: func(webhook, metrics net.Addr) {
				s.url = "https://" + webhook.String()
				s.metrics = "http://" + metrics.String()
				close(listening)
			},
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	select {
	case <-listening:
	case <-s.exited:
		return s
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not listen; stderr: %s", s.stderr.String())
	}
	if wantReady {
		require.Eventually(t, func() bool { return readyLine.MatchString(scrape(t, s.metrics)) },
			30*time.Second, 5*time.Millisecond, "serve became ready; stderr: %s", s.stderr.String())
	}
	return s
}

// compilationCache is a compilation cache shared by the servers of one
// test, closed when it ends.
func compilationCache(t *testing.T) wazero.CompilationCache {
	t.Helper()
	cache := wazero.NewCompilationCache()
	t.Cleanup(func() { _ = cache.Close(context.Background()) })
	return cache
}

func postReview(t *testing.T, client *http.Client, url string, body []byte) (int, []byte) {
	t.Helper()
	return postReviewTo(t, client, url+"/mutate", body)
}

func postReviewTo(t *testing.T, client *http.Client, endpoint string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint+"?timeout=10s", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// answerAndGolden posts case c to endpoint and returns the answer, with
// the answer `run` gives for it (the golden file).
func answerAndGolden(t *testing.T, client *http.Client, endpoint string, c fixtures.Case, golden map[string]string) (got, run fixturecheck.AdmissionResponse) {
	t.Helper()
	status, body := postReviewTo(t, client, endpoint, wrapReview(c.Request))
	require.Equal(t, http.StatusOK, status, "body: %s", body)
	var r struct {
		Response fixturecheck.AdmissionResponse `json:"response"`
	}
	require.NoError(t, json.Unmarshal(body, &r))
	require.NoError(t, json.Unmarshal([]byte(golden[c.Name]), &run))
	return r.Response, run
}

func wrapReview(request []byte) []byte {
	return []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":` + string(request) + `}`)
}

// TestServe_fixtures posts every shared fixture to a real `serve` over
// HTTPS, one server per distinct settings document: each answer is the
// AdmissionReview around exactly the line `run` prints (the golden file),
// and the patch, applied to the original object, gives the expected object.
// Settings that the policy refuses stop serve at start with its message.
func TestServe_fixtures(t *testing.T) {
	cases, err := fixtures.Load()
	require.NoError(t, err)
	golden := readGolden(t)
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	cache := compilationCache(t)

	groups := map[string][]fixtures.Case{}
	var order []string
	for _, c := range cases {
		key := string(c.Settings)
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], c)
	}
	for i, key := range order {
		t.Run(fmt.Sprintf("settings-%d", i), func(t *testing.T) {
			group := groups[key]
			if rest, invalid := strings.CutPrefix(group[0].Expect.Message, "settings are not valid: "); invalid {
				s := startServe(t, cache, false, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--settings-json", key)
				assert.Equal(t, 1, s.wait(t))
				assert.Contains(t, s.stderr.String(), "Error: provided settings are not valid: "+rest+"\n")
				assert.NotContains(t, s.stderr.String(), "webhook ready")
				return
			}
			s := startServe(t, cache, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--settings-json", key,
				"--context-dir", fixtures.ClusterDir())
			for _, c := range group {
				t.Run(c.Name, func(t *testing.T) {
					status, body := postReview(t, client, s.url, wrapReview(c.Request))
					require.Equal(t, http.StatusOK, status, "body: %s", body)
					line, ok := golden[c.Name]
					require.True(t, ok, "case %s is in the golden file", c.Name)
					assert.Equal(t, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":`+line+`}`, string(body),
						"serve answers what run prints")
					var r struct {
						Response json.RawMessage `json:"response"`
					}
					require.NoError(t, json.Unmarshal(body, &r))
					fixturecheck.CheckAdmissionResponse(t, c, r.Response)
				})
			}
			s.stop()
			assert.Equal(t, 0, s.wait(t), "clean shutdown; stderr: %s", s.stderr.String())
			assert.Contains(t, s.stderr.String(), `"msg":"shut down cleanly"`)
		})
	}
}

// TestServe_validatingTwin: with --validate-overlay '{"validateOnly":true}'
// /validate answers every fixture that uses the default settings as the
// policy's validating twin: where /mutate would patch, it refuses with
// the twin's message; everywhere else it answers exactly what /mutate does.
// Without the overlay, the host itself refuses a patch at /validate.
func TestServe_validatingTwin(t *testing.T) {
	cases, err := fixtures.Load()
	require.NoError(t, err)
	golden := readGolden(t)
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	cache := compilationCache(t)

	s := startServe(t, cache, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--validate-overlay", `{"validateOnly":true}`)
	refused := 0
	for _, c := range cases {
		if string(c.Settings) != "{}" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			got, mutate := answerAndGolden(t, client, s.url+"/validate", c, golden)
			if mutate.Patch == nil {
				assert.Equal(t, mutate, got, "no change at /mutate: the same answer at /validate")
				return
			}
			refused++
			assert.False(t, got.Allowed)
			assert.Nil(t, got.Patch)
			require.NotNil(t, got.Status)
			assert.Equal(t, http.StatusForbidden, got.Status.Code)
			assert.Regexp(t, `^annotation yunikorn.apache.org/user.info (is missing|was removed): `, got.Status.Message)
		})
	}
	assert.Positive(t, refused, "some fixtures are refused at /validate")
	assert.Regexp(t, `yunikorn_userinfo_stage_denials_total\{stage="validate"\} [1-9]`, scrape(t, s.metrics))

	t.Run("no overlay", func(t *testing.T) {
		s := startServe(t, cache, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile)
		for _, c := range cases {
			if c.Name != "pod/create/absent/inject" {
				continue
			}
			status, body := postReviewTo(t, client, s.url+"/validate", wrapReview(c.Request))
			require.Equal(t, http.StatusOK, status)
			assert.Contains(t, string(body), `"allowed":false`)
			assert.Contains(t, string(body), "refused at the validating stage: the policy would change the object")
			return
		}
		t.Fatal("no fixture pod/create/absent/inject")
	})

	t.Run("overlay the policy refuses", func(t *testing.T) {
		s := startServe(t, cache, false, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--validate-overlay", `{"validateOnly":"yes"}`)
		assert.Equal(t, 1, s.wait(t))
		assert.Contains(t, s.stderr.String(), `settings with the validate overlay: provided settings are not valid: settings.validateOnly: must be a boolean, got string "yes"`)
	})
}

// TestServe_hammer sends the fixtures from many connections at once to a
// server with two instances (under -race in make test): every answer must
// be the golden one for its own request.
func TestServe_hammer(t *testing.T) {
	t.Parallel()
	cases, err := fixtures.Load()
	require.NoError(t, err)
	golden := readGolden(t)
	var mine []fixtures.Case
	for _, c := range cases {
		if string(c.Settings) == "{}" {
			mine = append(mine, c)
		}
	}
	require.NotEmpty(t, mine)
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	// The header timeout counts from the connection's start, TLS handshake
	// included: 24 handshakes at once under the race detector on a loaded
	// machine can take longer than the default, which is not what this
	// test is about.
	s := startServe(t, nil, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"--instances", "2", "--log-level", "warn", "--read-header-timeout", "2m")

	const workers, rounds = 24, 2
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for i := range mine {
					c := mine[(i+w+r)%len(mine)]
					req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.url+"/mutate", bytes.NewReader(wrapReview(c.Request)))
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						errs <- err
						return
					}
					body, _ := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					want := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":` + golden[c.Name] + `}`
					if string(body) != want {
						errs <- fmt.Errorf("%s: got %s", c.Name, body)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	metrics := scrape(t, s.metrics)
	assert.Contains(t, metrics, "yunikorn_userinfo_instances_max 2")
	assert.Contains(t, metrics, "yunikorn_userinfo_in_flight_requests 0")
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// TestServe_failingGuest runs serve on a guest that traps, loops, grows
// memory, exits or answers garbage on request: each answer is allowed=false
// code 500 with the request's uid, and the server keeps answering.
func TestServe_failingGuest(t *testing.T) {
	t.Parallel()
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	s := startServe(t, nil, true, hostileGuest, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"--instances", "2", "--timeout", "1s", "--memory-limit", "4")

	body := func(uid string) []byte {
		return wrapReview([]byte(`{"uid":"` + uid + `","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","userInfo":{"username":"u"},"object":{"kind":"Pod"}}`))
	}
	tests := []struct {
		uid     string
		message string
	}{
		{uid: "trap", message: "guest trapped"},
		{uid: "loop", message: "guest timed out"},
		{uid: "grow", message: "guest trapped"},
		{uid: "exit", message: "guest exited"},
		{uid: "json", message: "decode validation response"},
	}
	for _, tc := range tests {
		t.Run(tc.uid, func(t *testing.T) {
			status, out := postReview(t, client, s.url, body(tc.uid))
			require.Equal(t, http.StatusOK, status)
			var r struct {
				Response fixturecheck.AdmissionResponse `json:"response"`
			}
			require.NoError(t, json.Unmarshal(out, &r), "%s", out)
			assert.Equal(t, tc.uid, r.Response.UID)
			assert.False(t, r.Response.Allowed)
			require.NotNil(t, r.Response.Status)
			assert.Equal(t, 500, r.Response.Status.Code)
			assert.Contains(t, r.Response.Status.Message, tc.message)

			status, out = postReview(t, client, s.url, body("accept-after-"+tc.uid))
			require.Equal(t, http.StatusOK, status)
			assert.Contains(t, string(out), `"uid":"accept-after-`+tc.uid+`","allowed":true`)
		})
	}
	assert.Contains(t, s.stderr.String(), `"decision":"error"`)
	assert.Regexp(t, `yunikorn_userinfo_instance_replacements_total [1-9]`, scrape(t, s.metrics))
}

// TestServe_certificateRotation: new files are served without a restart;
// a broken update keeps the old certificate.
func TestServe_certificateRotation(t *testing.T) {
	t.Parallel()
	tlsf := newTLSFiles(t)
	s := startServe(t, nil, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--cert-reload-interval", "20ms")
	addr := strings.TrimPrefix(s.url, "https://")
	pool := x509.NewCertPool()
	pool.AddCert(tlsf.ca.Certificate())
	servedSerial := func() *big.Int {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	first := servedSerial()

	second := tlsf.rotate(t)
	require.NotEqual(t, first, second)
	require.Eventually(t, func() bool { return servedSerial().Cmp(second) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the new certificate is served")

	// rotate writes the key before the certificate, so a poll between the
	// two renames may already have counted one failed reload (a key that
	// does not match the certificate); the broken update must add another.
	failedBefore := failedCertReloads(t, scrape(t, s.metrics))
	writeAtomically(t, tlsf.certFile, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"))
	require.Eventually(t, func() bool {
		return failedCertReloads(t, scrape(t, s.metrics)) > failedBefore
	}, 10*time.Second, 10*time.Millisecond, "the broken update was seen")
	assert.Equal(t, 0, servedSerial().Cmp(second), "the last good certificate stays")

	third := tlsf.rotate(t)
	require.Eventually(t, func() bool { return servedSerial().Cmp(third) == 0 }, 10*time.Second, 10*time.Millisecond)
}

// failedCertReloads reads the failed-certificate-reload counter from a
// metrics scrape; a counter not yet exported reads as zero.
func failedCertReloads(t *testing.T, metrics string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^yunikorn_userinfo_tls_reloads_total\{outcome="failed",what="certificate"\} (\d+)$`).FindStringSubmatch(metrics)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// TestServe_clientCA: with --client-ca-file only clients with a certificate
// from that CA get an answer.
func TestServe_clientCA(t *testing.T) {
	t.Parallel()
	tlsf := newTLSFiles(t)
	clientCA, err := certwatch.NewCA("api server client CA", time.Hour)
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	require.NoError(t, os.WriteFile(caFile, clientCA.CertPEM(), 0o600))
	s := startServe(t, nil, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--client-ca-file", caFile)

	certPEM, keyPEM, err := clientCA.Issue(certwatch.IssueOptions{CommonName: "kube-apiserver", DNSNames: []string{"kube-apiserver"}, Usage: certwatch.UsageClient})
	require.NoError(t, err)
	good, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	certPEM, keyPEM, err = tlsf.ca.Issue(certwatch.IssueOptions{DNSNames: []string{"intruder"}, Usage: certwatch.UsageClient})
	require.NoError(t, err)
	wrong, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)

	review := wrapReview([]byte(`{"uid":"mtls","kind":{"group":"","version":"v1","kind":"ConfigMap"},"operation":"CREATE","userInfo":{"username":"u"},"object":{}}`))
	for name, cert := range map[string]*tls.Certificate{"no certificate": nil, "another CA": &wrong} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+"/mutate", bytes.NewReader(review))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := tlsf.client(t, cert).Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		assert.Error(t, err, name)
	}
	status, body := postReview(t, tlsf.client(t, &good), s.url, review)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, string(body), `"uid":"mtls","allowed":true`)

	// HTTP/2 is offered with a client CA as without one.
	h2 := tlsf.client(t, &good)
	h2.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+"/mutate", bytes.NewReader(review))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h2.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, "HTTP/2.0", resp.Proto)
}

// TestServe_settingsReload: a changed settings file is applied; invalid
// settings are logged and ignored; the old ones stay in force.
func TestServe_settingsReload(t *testing.T) {
	t.Parallel()
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	settingsFile := filepath.Join(t.TempDir(), "settings.yaml")
	writeAtomically(t, settingsFile, []byte("externalUsers: []\n"))
	s := startServe(t, nil, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"-s", settingsFile, "--settings-reload-interval", "20ms")

	// front-end submits a Pod already attributed to alice: refused unless
	// front-end is an allowed external user.
	pod := `{"uid":"fe","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"operation":"CREATE","namespace":"ns","userInfo":{"username":"front-end","groups":["system:authenticated"]},` +
		`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","annotations":` +
		`{"yunikorn.apache.org/user.info":"{\"user\":\"alice\",\"groups\":[\"dev\"]}"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}`
	allowed := func() bool {
		_, body := postReview(t, client, s.url, wrapReview([]byte(pod)))
		return strings.Contains(string(body), `"allowed":true`)
	}
	require.False(t, allowed(), "front-end may not attribute pods to others yet")

	writeAtomically(t, settingsFile, []byte("externalUsers: [front-end]\n"))
	require.Eventually(t, allowed, 10*time.Second, 10*time.Millisecond, "the new settings apply")

	writeAtomically(t, settingsFile, []byte("externalUsers: ['[unclosed']\n"))
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, s.metrics), `yunikorn_userinfo_settings_reloads_total{outcome="invalid"} 1`)
	}, 10*time.Second, 10*time.Millisecond, "the invalid settings were seen; stderr: %s", s.stderr.String())
	assert.True(t, allowed(), "the previous settings stay in force")
	assert.Contains(t, s.stderr.String(), "new settings refused by the policy")
}

// TestServe_deepRequest: the policy copes with nesting up to the limit; a
// request beyond it gets a clear refusal with code 400, inside an HTTP
// 200 so that failurePolicy: Ignore cannot skip it, instead of a guest
// stack overflow.
func TestServe_deepRequest(t *testing.T) {
	t.Parallel()
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	s := startServe(t, nil, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile)
	review, err := os.ReadFile("../../testdata/requests/review-alice-pod.json")
	require.NoError(t, err)
	nested := func(levels int) []byte {
		deep := strings.Repeat("[", levels) + strings.Repeat("]", levels)
		out := bytes.Replace(review, []byte(`"spec": {`), []byte(`"spec": {"deep": `+deep+`,`), 1)
		require.NotEqual(t, review, out, "the fixture has a spec to nest in")
		return out
	}
	status, body := postReview(t, client, s.url, nested(500))
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, string(body), `"allowed":true,"patchType":"JSONPatch"`)

	status, body = postReview(t, client, s.url, nested(600))
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, string(body), `"allowed":false`)
	assert.Contains(t, string(body), `JSON nests deeper than 512 levels`)
	assert.Contains(t, string(body), `"code":400`)
}

func TestServe_argumentErrors(t *testing.T) {
	t.Parallel()
	tlsf := newTLSFiles(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no certificate", args: []string{"serve"}, want: "missing --cert-file and --key-file"},
		{name: "no key", args: []string{"serve", "--cert-file", tlsf.certFile}, want: "missing --key-file"},
		{name: "key is not a key", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.certFile},
			want: "load TLS files: "},
		{name: "zero instances", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--instances", "0"},
			want: "invalid --instances 0"},
		{name: "zero connections per client", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--max-conns-per-client", "0"},
			want: "invalid --max-conns-per-client 0: must be positive, or -1 for no limit"},
		{name: "trusted source not a CIDR", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--trusted-source-cidrs", "10.0.0.0/24,10.0.1.7"},
			want: `invalid --trusted-source-cidrs[1] "10.0.1.7": netip.ParsePrefix("10.0.1.7"): no '/'`},
		{name: "trusted source everyone", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--trusted-source-cidrs", "0.0.0.0/0"},
			want: `invalid --trusted-source-cidrs[0] "0.0.0.0/0": trusts every address`},
		{name: "reserve past the cap", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--trusted-source-cidrs", "10.0.0.0/24",
			"--max-conns", "100", "--reserved-conns", "100"},
			want: "invalid --reserved-conns 100: must be less than --max-conns (100)"},
		{name: "zero pending", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--max-pending-conns", "0"},
			want: "invalid --max-pending-conns 0: must be positive, or -1 for no limit"},
		{name: "requests per client below -1", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--max-requests-per-client", "-2"},
			want: "invalid --max-requests-per-client -2"},
		{name: "zero streams", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--max-concurrent-streams", "0"},
			want: "--max-concurrent-streams must be positive"},
		{name: "zero header timeout", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--read-header-timeout", "0s"},
			want: "--read-header-timeout and --idle-timeout must be positive"},
		{name: "bad settings file", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "-s", "/nonexistent/s.yaml"},
			want: "read settings: open /nonexistent/s.yaml"},
		{name: "port taken", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--listen", "256.0.0.1:1"},
			want: "listen for webhook: "},
		{name: "sync without an API server", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--sync-before-ready", "v1/Pod"},
			want: "--sync-before-ready needs an API server"},
		{name: "sync of an undeclared kind", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
			"--context-dir", replayDir, "--sync-before-ready", "v1/Secret"},
			want: "invalid --sync-before-ready v1/Secret: the module does not declare it"},
		{name: "sync of no kind", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
			"--context-dir", replayDir, "--sync-before-ready", "Pod"},
			want: `invalid --sync-before-ready "Pod": want apiVersion/Kind`},
		{name: "bad cache declaration", args: []string{"serve", "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
			"--context-dir", replayDir, "--cache", `[{"apiVersion":"v1","kind":"Pod","watch":"everywhere"}]`},
			want: `invalid --cache: cache declaration[0].watch: "everywhere"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, "", tc.args...)
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
}

// TestServe_environment: flags can come from YUNIKORN_USERINFO_* variables,
// and the command line wins.
func TestServe_environment(t *testing.T) {
	tlsf := newTLSFiles(t)
	t.Setenv("YUNIKORN_USERINFO_CERT_FILE", tlsf.certFile)
	t.Setenv("YUNIKORN_USERINFO_KEY_FILE", tlsf.keyFile)
	t.Setenv("YUNIKORN_USERINFO_INSTANCES", "3")
	t.Setenv("YUNIKORN_USERINFO_LISTEN", "256.0.0.1:1") // overridden by startServe's --listen
	s := startServe(t, nil, true)
	assert.Contains(t, scrape(t, s.metrics), "yunikorn_userinfo_instances_max 3")

	t.Setenv("YUNIKORN_USERINFO_INSTANCES", "many")
	r := runCLI(t, "", "serve")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `invalid YUNIKORN_USERINFO_INSTANCES: invalid argument "many"`)
}

// envRunMain makes the test binary run main() instead of the tests, so a
// test can start the real program as a child process and signal it.
const envRunMain = "YUNIKORN_USERINFO_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestServe_sigterm runs the real program, sends it SIGTERM while a request
// is being evaluated, and checks that the request still gets its answer,
// that readiness dropped and new connections are refused, and that the
// process exits 0 within its shutdown bound.
func TestServe_sigterm(t *testing.T) {
	t.Parallel()
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	addrs := testnet.FreeAddrs(t, 2)
	port, metricsPort := addrs[0], addrs[1]
	cmd := exec.Command(os.Args[0], "serve", hostileGuest,
		"--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"--listen", port, "--metrics-listen", metricsPort,
		"--timeout", "2s", "--shutdown-delay", "200ms", "--shutdown-timeout", "10s")
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	metrics := "http://" + metricsPort
	require.Eventually(t, func() bool {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, metrics+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return readyLine.Match(body)
	}, 30*time.Second, 20*time.Millisecond, "ready; stderr: %s", stderr.String())

	// "loop..." makes the hostile guest spin until the 2 s deadline.
	answer := make(chan string, 1)
	go func() {
		body := wrapReview([]byte(`{"uid":"loop-inflight","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","userInfo":{"username":"u"},"object":{}}`))
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://"+port+"/mutate", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			answer <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		answer <- string(out)
	}()
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, metrics), "yunikorn_userinfo_in_flight_requests 1")
	}, 10*time.Second, 5*time.Millisecond, "the request is in flight")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case got := <-answer:
		assert.Contains(t, got, `"uid":"loop-inflight","allowed":false`)
		assert.Contains(t, got, "guest timed out", "the in-flight request ran to its own deadline")
	case <-time.After(20 * time.Second):
		t.Fatal("the in-flight request got no answer")
	}
	select {
	case <-exited:
		require.NoError(t, waitErr, "exit code 0; stderr: %s", stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("the process did not exit within its shutdown bound")
	}
	log := stderr.String()
	assert.Contains(t, log, `"msg":"shutting down: not ready, still serving"`)
	assert.Contains(t, log, `"msg":"shut down cleanly"`)
	_, err := net.DialTimeout("tcp", port, time.Second)
	assert.Error(t, err, "nothing listens any more")
}

// TestServe_skippedQueueCheckIsLoggedAndCounted: a queue check the policy
// must skip (here, a configuration YuniKorn would not load) admits the pod
// with a warning, and serve logs the policy's warning line and counts it.
func TestServe_skippedQueueCheckIsLoggedAndCounted(t *testing.T) {
	t.Parallel()
	cases, err := fixtures.Load()
	require.NoError(t, err)
	i := slices.IndexFunc(cases, func(c fixtures.Case) bool { return c.Name == "pod/queue/enforce/broken-configuration" })
	require.GreaterOrEqual(t, i, 0)
	c := cases[i]
	tlsf := newTLSFiles(t)
	s := startServe(t, nil, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"--settings-json", string(c.Settings), "--context-dir", fixtures.ClusterDir())
	status, body := postReview(t, tlsf.client(t, nil), s.url, wrapReview(c.Request))
	require.Equal(t, http.StatusOK, status, "body: %s", body)
	assert.Contains(t, string(body), `"allowed":true`)
	assert.Contains(t, string(body), "queue check skipped: ")
	assert.Contains(t, scrape(t, s.metrics), `yunikorn_userinfo_policy_log_lines_total{level="warn"} 1`)
	assert.Contains(t, s.stderr.String(), `"msg":"queue check skipped"`)
}

// shippedServe reads the container args and the settings of the shipped
// standalone manifests (deploy/webhook, which the chart renders with its
// defaults), with the paths and addresses replaced by this test's.
func shippedServe(t *testing.T, tlsf *tlsFiles) []string {
	t.Helper()
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct{ Args []string } `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	raw, err := os.ReadFile("../../deploy/webhook/deployment.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &dep))
	require.Len(t, dep.Spec.Template.Spec.Containers, 1)
	var cm struct{ Data map[string]string }
	raw, err = os.ReadFile("../../deploy/webhook/configmap.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &cm))
	settingsFile := filepath.Join(t.TempDir(), "settings.yaml")
	require.NoError(t, os.WriteFile(settingsFile, []byte(cm.Data["settings.yaml"]), 0o600))

	var args []string
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "serve", "--listen", "--metrics-listen":
		case "--cert-file":
			args = append(args, name+"="+tlsf.certFile)
		case "--key-file":
			args = append(args, name+"="+tlsf.keyFile)
		case "--settings-path":
			args = append(args, name+"="+settingsFile)
		default:
			args = append(args, a)
		}
	}
	require.Contains(t, args, `--validate-overlay={"validateOnly":true}`, "the twin is part of the defaults")
	return args
}

// TestServe_defaultsStartWithoutWarnings: serve as the shipped manifests
// (and the chart's defaults) run it logs no warning from start to ready, so
// that a warning at start is news; settings the policy remarks on are
// still warned about, once, not once per webhook.
func TestServe_defaultsStartWithoutWarnings(t *testing.T) {
	t.Parallel()
	tlsf := newTLSFiles(t)
	cache := compilationCache(t)
	s := startServe(t, cache, true, shippedServe(t, tlsf)...)
	log := s.stderr.String()
	assert.Contains(t, log, `"msg":"webhook ready"`)
	assert.NotContains(t, log, `"level":"WARN"`)
	assert.NotContains(t, log, `"level":"ERROR"`)

	// A prefix pattern means what it says: no remark.
	prefix := startServe(t, cache, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"--settings-json", `{"systemUsers":["^system:serviceaccount:kube-system:"]}`, `--validate-overlay={"validateOnly":true}`)
	log = prefix.stderr.String()
	assert.NotContains(t, log, `"level":"WARN"`)

	unanchored := startServe(t, cache, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"--settings-json", `{"systemUsers":["system:serviceaccount:kube-system:"]}`, `--validate-overlay={"validateOnly":true}`)
	log = unanchored.stderr.String()
	assert.Equal(t, 1, strings.Count(log, `"level":"WARN"`), "one remark: %s", log)
	assert.Contains(t, log, `is not anchored with ^ or $`)

	// trustPodTokens' explanation is a note: once, at info level.
	noted := startServe(t, cache, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"--settings-json", `{"trustPodTokens":true}`, "--context-dir", t.TempDir(), `--validate-overlay={"validateOnly":true}`)
	log = noted.stderr.String()
	assert.NotContains(t, log, `"level":"WARN"`)
	assert.Equal(t, 1, strings.Count(log, `may act as the driver`), "the note once: %s", log)
}

// TestServe_watchRegistration: with --watch-registration, serve reads its
// webhook configurations from the API server and exports their
// failurePolicy; a registration left at Ignore shows as such.
func TestServe_watchRegistration(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	mutatingPolicy := "Ignore"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/ui":
			fmt.Fprintf(w, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration","metadata":{"name":"ui"},`+
				`"webhooks":[{"name":"user-info.example","failurePolicy":%q}]}`, mutatingPolicy)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	t.Cleanup(api.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+api.URL+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	tlsf := newTLSFiles(t)
	s := startServe(t, nil, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--kubeconfig", kubeconfig,
		"--watch-registration", "mutating/ui,validating/ui", "--registration-interval", "50ms")
	ignore := `yunikorn_userinfo_registration_failure_policy{configuration="ui",kind="mutating",policy="Ignore",webhook="user-info.example"} 1`
	require.Eventually(t, func() bool { return strings.Contains(scrape(t, s.metrics), ignore) }, 10*time.Second, 20*time.Millisecond)
	mu.Lock()
	mutatingPolicy = "Fail"
	mu.Unlock()
	require.Eventually(t, func() bool {
		m := scrape(t, s.metrics)
		return strings.Contains(m, `policy="Fail",webhook="user-info.example"} 1`) && !strings.Contains(m, ignore)
	}, 10*time.Second, 20*time.Millisecond)
	assert.NotContains(t, scrape(t, s.metrics), `kind="validating"`, "no such configuration: no series")
	assert.Regexp(t, `yunikorn_userinfo_registration_reads_total\{outcome="not_found"\} [1-9]`, scrape(t, s.metrics))

	r := startServe(t, nil, false, "--self-signed", "--self-signed-dir", t.TempDir(), "--watch-registration", "mutating/ui")
	assert.Equal(t, 1, r.wait(t))
	assert.Contains(t, r.stderr.String(), "--watch-registration needs an API server")
}
