package certwatch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/syncbuf"
)

// requestTimeout bounds every test request, so a broken server fails the
// test instead of hanging it.
const requestTimeout = 10 * time.Second

var localhost = []net.IP{net.ParseIP("127.0.0.1")}

func newTestCA(t *testing.T, name string) *CA {
	t.Helper()
	ca, err := NewCA(name, time.Hour)
	require.NoError(t, err)
	return ca
}

// pair is an issued certificate and key, PEM-encoded.
type pair struct {
	cert, key []byte
}

func issue(t *testing.T, ca *CA, opts IssueOptions) pair {
	t.Helper()
	c, k, err := ca.Issue(opts)
	require.NoError(t, err)
	return pair{cert: c, key: k}
}

func serverPair(t *testing.T, ca *CA) pair {
	t.Helper()
	return issue(t, ca, IssueOptions{IPAddresses: localhost})
}

func (p pair) serial(t *testing.T) *big.Int {
	t.Helper()
	return p.leaf(t).SerialNumber
}

func (p pair) leaf(t *testing.T) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(p.cert)
	require.NotNil(t, block)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

func (p pair) tlsCertificate(t *testing.T) *tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.cert, p.key)
	require.NoError(t, err)
	return &c
}

func pool(t *testing.T, cas ...*CA) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, ca := range cas {
		require.True(t, p.AppendCertsFromPEM(ca.CertPEM()))
	}
	return p
}

// writeAtomic replaces path the way most tools do: write a temporary file
// in the same directory, then rename it over the old one.
func writeAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	require.NoError(t, err)
	_, err = tmp.Write(data)
	require.NoError(t, err)
	require.NoError(t, tmp.Close())
	require.NoError(t, os.Rename(tmp.Name(), path))
}

// layout is a directory of named files that a test updates.
type layout interface {
	// path is where the watcher reads the file called name.
	path(name string) string
	// write replaces the given files.
	write(t *testing.T, files map[string][]byte)
}

// plainDir holds regular files, each replaced by its own rename, so a
// pair is updated non-atomically: the certificate first, then the key.
type plainDir struct{ dir string }

func newPlainDir(t *testing.T) layout { return plainDir{dir: t.TempDir()} }

func (d plainDir) path(name string) string { return filepath.Join(d.dir, name) }

func (d plainDir) write(t *testing.T, files map[string][]byte) {
	t.Helper()
	// Sorted, so tls.crt is replaced before tls.key.
	for _, name := range slices.Sorted(maps.Keys(files)) {
		writeAtomic(t, d.path(name), files[name])
	}
}

// secretDir mimics a Kubernetes Secret volume (kubelet's AtomicWriter):
// name -> ..data/name, ..data -> ..<generation>. An update writes a new
// generation directory and renames a new ..data symlink over the old one,
// so every file changes at once and the paths the watcher reads are never
// written to.
type secretDir struct {
	dir string
	gen *int
}

func newSecretDir(t *testing.T) layout { return secretDir{dir: t.TempDir(), gen: new(int)} }

func (d secretDir) path(name string) string { return filepath.Join(d.dir, name) }

func (d secretDir) write(t *testing.T, files map[string][]byte) {
	t.Helper()
	old, _ := os.Readlink(filepath.Join(d.dir, "..data"))
	*d.gen++
	gen := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", *d.gen, *d.gen)
	require.NoError(t, os.Mkdir(filepath.Join(d.dir, gen), 0o755))
	// A Secret update carries the whole Secret: keep files not named.
	if old != "" {
		entries, err := os.ReadDir(filepath.Join(d.dir, old))
		require.NoError(t, err)
		for _, e := range entries {
			if _, ok := files[e.Name()]; !ok {
				data, err := os.ReadFile(filepath.Join(d.dir, old, e.Name()))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(d.dir, gen, e.Name()), data, 0o600))
			}
		}
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(d.dir, gen, name), data, 0o600))
	}
	tmpLink := filepath.Join(d.dir, "..data_tmp")
	require.NoError(t, os.Symlink(gen, tmpLink))
	require.NoError(t, os.Rename(tmpLink, filepath.Join(d.dir, "..data")))
	for name := range files {
		link := filepath.Join(d.dir, name)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			require.NoError(t, os.Symlink(filepath.Join("..data", name), link))
		}
	}
	if old != "" {
		require.NoError(t, os.RemoveAll(filepath.Join(d.dir, old)))
	}
}

const (
	certName = "tls.crt"
	keyName  = "tls.key"
	caName   = "ca.crt"
)

func pairFiles(p pair) map[string][]byte {
	return map[string][]byte{certName: p.cert, keyName: p.key}
}

// hookRecorder records OnReload calls.
type hookRecorder struct {
	mu    sync.Mutex
	calls []hookCall
}

type hookCall struct {
	what string
	err  error
}

func (h *hookRecorder) record(what string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, hookCall{what: what, err: err})
}

// take returns the calls so far and forgets them.
func (h *hookRecorder) take() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	calls := h.calls
	h.calls = nil
	return calls
}

// logBuffer is a slog text sink safe for the Run goroutine.
type logBuffer struct{ syncbuf.Buffer }

func (b *logBuffer) count(s string) int { return strings.Count(b.String(), s) }

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// serve starts an HTTPS server on 127.0.0.1 with the watcher's TLS
// configuration. The handler answers with the common name of the client
// certificate, if any, so tests see what the server verified.
func serve(t *testing.T, w *Watcher) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", w.TLSConfig())
	require.NoError(t, err)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if len(r.TLS.PeerCertificates) > 0 {
				_, _ = io.WriteString(rw, r.TLS.PeerCertificates[0].Subject.CommonName)
			}
		}),
		ReadHeaderTimeout: requestTimeout,
		// Handshake failures are what several tests expect; keep them out
		// of the test output.
		ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError),
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// client describes how a test connects.
type client struct {
	roots *x509.CertPool
	cert  *tls.Certificate
	// minVersion and maxVersion pin the TLS version; zero is Go's default.
	minVersion, maxVersion uint16
	// sessions, if set, lets the client resume TLS sessions.
	sessions tls.ClientSessionCache
}

// result is what one request saw.
type result struct {
	serverCert *x509.Certificate
	body       string
}

// get makes one request on a fresh connection, so every call performs a
// handshake against the current server configuration.
func (c client) get(ctx context.Context, addr string) (result, error) {
	cfg := &tls.Config{
		RootCAs:            c.roots,
		MinVersion:         c.minVersion,
		MaxVersion:         c.maxVersion,
		ClientSessionCache: c.sessions,
	}
	if c.cert != nil {
		cfg.Certificates = []tls.Certificate{*c.cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
	if err != nil {
		return result{}, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, err
	}
	return result{serverCert: resp.TLS.PeerCertificates[0], body: string(body)}, nil
}

// servedSerial returns the serial of the certificate the server presents.
func servedSerial(t *testing.T, c client, addr string) *big.Int {
	t.Helper()
	res, err := c.get(t.Context(), addr)
	require.NoError(t, err)
	return res.serverCert.SerialNumber
}

// newRecordedWatcher watches the pair in dir, recording reload hooks and
// logs.
func newRecordedWatcher(t *testing.T, dir layout) (*Watcher, *hookRecorder, *logBuffer) {
	t.Helper()
	hooks, logs := &hookRecorder{}, &logBuffer{}
	w, err := New(Options{
		CertFile: dir.path(certName),
		KeyFile:  dir.path(keyName),
		Logger:   logs.logger(),
		OnReload: hooks.record,
	})
	require.NoError(t, err)
	return w, hooks, logs
}
