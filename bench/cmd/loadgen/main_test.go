package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/bench/internal/loadgen"
)

// webhook is a fake that echoes the uid, allowing everything, with suffix
// appended to the uid to make it wrong.
func webhook(t *testing.T, suffix string, clientCAs *x509.CertPool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"` +
			review.Request.UID + suffix + `","allowed":true}}`))
	}))
	if clientCAs != nil {
		srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// writePEM writes blocks to a new file and returns its path.
func writePEM(t *testing.T, name string, blocks ...*pem.Block) string {
	t.Helper()
	var b bytes.Buffer
	for _, block := range blocks {
		require.NoError(t, pem.Encode(&b, block))
	}
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
	return path
}

// caFile writes the server's certificate as a CA file.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	return writePEM(t, "ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// clientCert makes a self-signed client certificate; it returns the
// certificate and key files and a pool that trusts the certificate.
func clientCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "loadgen"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return writePEM(t, "client.pem", &pem.Block{Type: "CERTIFICATE", Bytes: der}),
		writePEM(t, "client-key.pem", &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		pool
}

// short are flags for a light, short run: 100/s for 100ms, 10 requests.
var short = []string{"--connections", "2", "--rate", "100", "--duration", "100ms", "--warmup", "0s",
	"--fixtures", "^pod/create/absent/inject$"}

func TestRun(t *testing.T) {
	t.Parallel()
	good := webhook(t, "", nil)
	bad := webhook(t, "-other", nil)
	certFile, keyFile, pool := clientCert(t)
	mtls := webhook(t, "", pool)
	review := filepath.Join(t.TempDir(), "review.json")
	require.NoError(t, os.WriteFile(review,
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{}}}`), 0o600))

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    string // in stdout
		wantStderr string // stderr, exactly
	}{
		{
			name:     "text",
			args:     append([]string{"--url", good.URL + "/mutate", "--ca-file", caFile(t, good)}, short...),
			wantCode: exitOK,
			wantOut:  "requests         scheduled 10, sent 10, completed 10, failed 0\n",
		},
		{
			name:     "insecure",
			args:     append([]string{"--url", good.URL + "/mutate", "--insecure-skip-verify"}, short...),
			wantCode: exitOK,
			wantOut:  "completed 10, failed 0",
		},
		{
			name: "one request file",
			args: []string{"--url", good.URL + "/mutate", "--ca-file", caFile(t, good), "--request", review,
				"--rate", "100", "--duration", "100ms", "--warmup", "0s"},
			wantCode: exitOK,
			wantOut:  "payloads         1 (0 with a verdict check)\n",
		},
		{
			name:       "untrusted server",
			args:       append([]string{"--url", good.URL + "/mutate"}, short...),
			wantCode:   exitFailed,
			wantOut:    "transport 10,",
			wantStderr: "Error: requests failed: 10 of 10\n",
		},
		{
			name:       "wrong uid",
			args:       append([]string{"--url", bad.URL + "/mutate", "--ca-file", caFile(t, bad)}, short...),
			wantCode:   exitFailed,
			wantOut:    "uid mismatch 10,",
			wantStderr: "Error: requests failed: 10 of 10\n",
		},
		{
			name:     "wrong uid tolerated",
			args:     append([]string{"--url", bad.URL + "/mutate", "--ca-file", caFile(t, bad), "--tolerate-errors"}, short...),
			wantCode: exitOK,
			wantOut:  "uid mismatch 10,",
		},
		{
			name: "mTLS",
			args: append([]string{"--url", mtls.URL + "/mutate", "--ca-file", caFile(t, mtls),
				"--client-cert", certFile, "--client-key", keyFile}, short...),
			wantCode: exitOK,
			wantOut:  "completed 10, failed 0",
		},
		{
			name:       "mTLS without a client certificate",
			args:       append([]string{"--url", mtls.URL + "/mutate", "--ca-file", caFile(t, mtls)}, short...),
			wantCode:   exitFailed,
			wantOut:    "transport 10,",
			wantStderr: "Error: requests failed: 10 of 10\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tc.args, &stdout, &stderr)
			assert.Equal(t, tc.wantCode, code, "stderr: %s", &stderr)
			assert.Contains(t, stdout.String(), tc.wantOut)
			assert.Equal(t, tc.wantStderr, stderr.String())
		})
	}
}

func TestRun_json(t *testing.T) {
	t.Parallel()
	srv := webhook(t, "", nil)
	var stdout, stderr bytes.Buffer
	args := append([]string{"--url", srv.URL + "/mutate", "--ca-file", caFile(t, srv), "--json"}, short...)
	require.Equal(t, exitOK, run(t.Context(), args, &stdout, &stderr), "stderr: %s", &stderr)

	var r loadgen.Result
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &r), stdout.String())
	assert.Equal(t, loadgen.ModeRate, r.Mode)
	assert.Equal(t, loadgen.Counts{Sent: 10, Completed: 10}, r.Counts)
	assert.Equal(t, int64(10), r.Latency.Samples)
	assert.Equal(t, 2, r.Connections)
	assert.Equal(t, 100*time.Millisecond, r.Duration)
}

// Flags are checked before anything is sent; the URL points nowhere.
func TestRun_badFlags(t *testing.T) {
	t.Parallel()
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{name: "connections", args: []string{"--connections", "0"}, wantStderr: "Error: invalid --connections 0: want 1 to 10000\n"},
		{name: "rate", args: []string{"--rate", "-1"}, wantStderr: "Error: invalid --rate -1: must not be negative\n"},
		{name: "duration", args: []string{"--duration", "0s"}, wantStderr: "Error: invalid --duration, --timeout or --warmup: must be positive (--warmup may be 0)\n"},
		{name: "request and fixtures", args: []string{"--request", "x", "--fixtures", "y"}, wantStderr: "Error: --request and --fixtures exclude each other\n"},
		{name: "ca and insecure", args: []string{"--ca-file", notPEM, "--insecure-skip-verify"}, wantStderr: "Error: --ca-file and --insecure-skip-verify exclude each other\n"},
		{name: "ca not PEM", args: []string{"--ca-file", notPEM}, wantStderr: "Error: read --ca-file " + notPEM + ": no PEM certificate\n"},
		{name: "cert without key", args: []string{"--client-cert", notPEM}, wantStderr: "Error: --client-cert and --client-key go together\n"},
		{name: "bad regexp", args: []string{"--fixtures", "("}, wantStderr: "Error: parse --fixtures: error parsing regexp: missing closing ): `(`\n"},
		{name: "no match", args: []string{"--fixtures", "^nothing$"}, wantStderr: "Error: load fixtures: no case name matches \"^nothing$\"\n"},
		{name: "missing request", args: []string{"--request", "/nonexistent.json"}, wantStderr: "Error: read request: open /nonexistent.json: no such file or directory\n"},
		{name: "argument", args: []string{"extra"}, wantStderr: "Error: unknown command \"extra\" for \"loadgen\"\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			args := append([]string{"--url", "https://127.0.0.1:1/mutate"}, tc.args...)
			assert.Equal(t, exitError, run(t.Context(), args, &stdout, &stderr))
			assert.Equal(t, tc.wantStderr, stderr.String())
			assert.Empty(t, stdout.String())
		})
	}
}
