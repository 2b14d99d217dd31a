package certwatch

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewErrors(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "test CA")
	good := serverPair(t, ca)
	other := serverPair(t, ca)
	corrupt := []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")

	tests := []struct {
		name string
		// files are written to a fresh directory; nil means absent.
		cert, key, clientCA []byte
		withClientCA        bool
		// wantErr are substrings of the error; "{cert}", "{key}" and
		// "{ca}" stand for the file paths.
		wantErr []string
	}{
		{name: "missing certificate", key: good.key, wantErr: []string{"read certificate", "{cert}"}},
		{name: "missing key", cert: good.cert, wantErr: []string{"read key", "{key}"}},
		{name: "empty certificate", cert: []byte{}, key: good.key, wantErr: []string{"parse certificate {cert}: no PEM CERTIFICATE block"}},
		{name: "garbage certificate", cert: []byte("not a certificate"), key: good.key, wantErr: []string{"parse certificate {cert}: no PEM CERTIFICATE block"}},
		{name: "key in certificate file", cert: good.key, key: good.key, wantErr: []string{"parse certificate {cert}: no PEM CERTIFICATE block"}},
		{name: "corrupt certificate", cert: corrupt, key: good.key, wantErr: []string{"parse certificate {cert}: certificate 1:"}},
		{name: "garbage key", cert: good.cert, key: []byte("not a key"), wantErr: []string{"parse key {key}: no PEM private key block"}},
		{name: "certificate in key file", cert: good.cert, key: good.cert, wantErr: []string{"parse key {key}: no PEM private key block"}},
		{name: "key of another certificate", cert: good.cert, key: other.key, wantErr: []string{"match key {key} with certificate {cert}", "does not match"}},
		{name: "missing client CA", cert: good.cert, key: good.key, withClientCA: true, wantErr: []string{"read client CA", "{ca}"}},
		{name: "garbage client CA", cert: good.cert, key: good.key, clientCA: []byte("junk"), withClientCA: true, wantErr: []string{"parse client CA {ca}: no PEM CERTIFICATE block"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := Options{
				CertFile: filepath.Join(dir, certName),
				KeyFile:  filepath.Join(dir, keyName),
			}
			for path, data := range map[string][]byte{opts.CertFile: tc.cert, opts.KeyFile: tc.key} {
				if data != nil {
					require.NoError(t, os.WriteFile(path, data, 0o600))
				}
			}
			if tc.withClientCA {
				opts.ClientCAFile = filepath.Join(dir, caName)
				if tc.clientCA != nil {
					require.NoError(t, os.WriteFile(opts.ClientCAFile, tc.clientCA, 0o600))
				}
			}

			w, err := New(opts)

			require.Error(t, err)
			assert.Nil(t, w)
			for _, want := range tc.wantErr {
				want = replacePaths(want, opts)
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func replacePaths(s string, opts Options) string {
	return strings.NewReplacer("{cert}", opts.CertFile, "{key}", opts.KeyFile, "{ca}", opts.ClientCAFile).Replace(s)
}

func TestNewRequiresFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
	}{
		{name: "no certificate file", opts: Options{KeyFile: "tls.key"}},
		{name: "no key file", opts: Options{CertFile: "tls.crt"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "certificate file and key file are required")
		})
	}
}

func TestNewWarnsOnValidity(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "test CA")
	tests := []struct {
		name    string
		issue   IssueOptions
		wantLog string
	}{
		{
			name:    "expired",
			issue:   IssueOptions{IPAddresses: localhost, NotBefore: time.Now().Add(-2 * time.Hour), Validity: time.Hour},
			wantLog: "serving certificate has expired",
		},
		{
			name:    "not yet valid",
			issue:   IssueOptions{IPAddresses: localhost, NotBefore: time.Now().Add(time.Hour), Validity: time.Hour},
			wantLog: "serving certificate is not valid yet",
		},
		{
			name:  "valid",
			issue: IssueOptions{IPAddresses: localhost},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := issue(t, ca, tc.issue)
			dir := newPlainDir(t)
			dir.write(t, pairFiles(p))
			var logs logBuffer

			w, err := New(Options{CertFile: dir.path(certName), KeyFile: dir.path(keyName), Logger: logs.logger()})

			require.NoError(t, err)
			assert.Equal(t, p.serial(t), w.Certificate().SerialNumber)
			if tc.wantLog == "" {
				assert.Empty(t, logs.String())
				return
			}
			assert.Contains(t, logs.String(), "level=WARN")
			assert.Contains(t, logs.String(), tc.wantLog)
		})
	}
}

// layouts are the two ways files get replaced in practice.
var layouts = []struct {
	name      string
	newLayout func(t *testing.T) layout
}{
	{name: "rename per file", newLayout: newPlainDir},
	{name: "secret volume symlink swap", newLayout: newSecretDir},
}

func TestReloadRotatesCertificate(t *testing.T) {
	t.Parallel()
	for _, tc := range layouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ca := newTestCA(t, "test CA")
			a, b := serverPair(t, ca), serverPair(t, ca)
			dir := tc.newLayout(t)
			dir.write(t, pairFiles(a))
			w, hooks, logs := newRecordedWatcher(t, dir)
			addr := serve(t, w)
			c := client{roots: pool(t, ca)}
			require.Equal(t, a.serial(t), servedSerial(t, c, addr))

			// Unchanged files: nothing to report.
			require.NoError(t, w.Reload())
			require.Empty(t, hooks.take())

			dir.write(t, pairFiles(b))
			require.NoError(t, w.Reload())

			assert.Equal(t, b.serial(t), servedSerial(t, c, addr))
			assert.Equal(t, b.serial(t), w.Certificate().SerialNumber)
			assert.Equal(t, []hookCall{{what: ReloadCertificate}}, hooks.take())
			assert.Contains(t, logs.String(), "certificate reloaded")
			assert.Contains(t, logs.String(), "serial="+b.serial(t).String())
			assert.Contains(t, logs.String(), "not_after=")
		})
	}
}

func TestReloadKeepsPreviousOnBrokenUpdate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// breakFiles leaves the files in a bad state, given the pair
		// about to be installed.
		breakFiles func(t *testing.T, dir layout, next pair)
		wantErr    string
	}{
		{
			name: "new certificate with old key",
			breakFiles: func(t *testing.T, dir layout, next pair) {
				writeAtomic(t, dir.path(certName), next.cert)
			},
			wantErr: "match key",
		},
		{
			name: "new key with old certificate",
			breakFiles: func(t *testing.T, dir layout, next pair) {
				writeAtomic(t, dir.path(keyName), next.key)
			},
			wantErr: "match key",
		},
		{
			name: "half-written certificate",
			breakFiles: func(t *testing.T, dir layout, next pair) {
				require.NoError(t, os.WriteFile(dir.path(certName), next.cert[:len(next.cert)/2], 0o600))
			},
			wantErr: "parse certificate",
		},
		{
			name: "garbage key",
			breakFiles: func(t *testing.T, dir layout, next pair) {
				require.NoError(t, os.WriteFile(dir.path(keyName), []byte("garbage"), 0o600))
			},
			wantErr: "parse key",
		},
		{
			name: "empty certificate",
			breakFiles: func(t *testing.T, dir layout, next pair) {
				require.NoError(t, os.WriteFile(dir.path(certName), nil, 0o600))
			},
			wantErr: "no PEM CERTIFICATE block",
		},
		{
			name: "key file removed",
			breakFiles: func(t *testing.T, dir layout, next pair) {
				require.NoError(t, os.Remove(dir.path(keyName)))
			},
			wantErr: "read key",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ca := newTestCA(t, "test CA")
			a, b := serverPair(t, ca), serverPair(t, ca)
			dir := newPlainDir(t)
			dir.write(t, pairFiles(a))
			w, hooks, logs := newRecordedWatcher(t, dir)
			addr := serve(t, w)
			c := client{roots: pool(t, ca)}

			tc.breakFiles(t, dir, b)
			err := w.Reload()
			require.ErrorContains(t, err, tc.wantErr)
			assert.Equal(t, a.serial(t), servedSerial(t, c, addr), "previous certificate stays in force")
			assertHookCall(t, hooks.take(), ReloadCertificate, err)

			// The same bad contents again: same error, not reported twice.
			err2 := w.Reload()
			assert.Equal(t, err, err2)
			assert.Empty(t, hooks.take())
			assert.Equal(t, 1, logs.count("certificate reload failed"))
			assert.Equal(t, 1, logs.count("level=WARN"))

			// A later good update is picked up.
			dir.write(t, pairFiles(b))
			require.NoError(t, w.Reload())
			assert.Equal(t, b.serial(t), servedSerial(t, c, addr))
			assert.Equal(t, []hookCall{{what: ReloadCertificate}}, hooks.take())
		})
	}
}

func TestTLSVersions(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "test CA")
	server := serverPair(t, ca)
	clientPair := issue(t, ca, IssueOptions{CommonName: "kube-apiserver", Usage: UsageClient})
	dir := newPlainDir(t)
	dir.write(t, map[string][]byte{certName: server.cert, keyName: server.key, caName: ca.CertPEM()})

	modes := []struct {
		name         string
		clientCAFile string
	}{
		{name: "server auth only"},
		{name: "with client CA", clientCAFile: dir.path(caName)},
	}
	versions := []struct {
		name     string
		min, max uint16
		wantErr  bool
	}{
		{name: "TLS 1.0", min: tls.VersionTLS10, max: tls.VersionTLS10, wantErr: true},
		{name: "TLS 1.1", min: tls.VersionTLS10, max: tls.VersionTLS11, wantErr: true},
		{name: "TLS 1.2", min: tls.VersionTLS12, max: tls.VersionTLS12},
		{name: "TLS 1.3", min: tls.VersionTLS13, max: tls.VersionTLS13},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			w, err := New(Options{CertFile: dir.path(certName), KeyFile: dir.path(keyName), ClientCAFile: mode.clientCAFile})
			require.NoError(t, err)
			cfg := w.TLSConfig()
			assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
			if cfg.GetConfigForClient != nil {
				perClient, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
				require.NoError(t, err)
				assert.Equal(t, uint16(tls.VersionTLS12), perClient.MinVersion)
			}
			addr := serve(t, w)

			for _, tc := range versions {
				t.Run(tc.name, func(t *testing.T) {
					c := client{roots: pool(t, ca), cert: clientPair.tlsCertificate(t), minVersion: tc.min, maxVersion: tc.max}
					_, err := c.get(t.Context(), addr)
					if tc.wantErr {
						assert.ErrorContains(t, err, "protocol version")
						return
					}
					assert.NoError(t, err)
				})
			}
		})
	}
}

func TestClientCA(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "webhook CA")
	otherCA := newTestCA(t, "other CA")
	server := serverPair(t, ca)
	dir := newPlainDir(t)
	dir.write(t, map[string][]byte{certName: server.cert, keyName: server.key, caName: ca.CertPEM()})
	w, err := New(Options{CertFile: dir.path(certName), KeyFile: dir.path(keyName), ClientCAFile: dir.path(caName)})
	require.NoError(t, err)
	addr := serve(t, w)

	tests := []struct {
		name     string
		cert     pair // zero: no client certificate
		wantErr  bool
		wantBody string
	}{
		{name: "no client certificate", wantErr: true},
		{name: "certificate from another CA", cert: issue(t, otherCA, IssueOptions{CommonName: "intruder", Usage: UsageClient}), wantErr: true},
		{name: "server-only certificate from the CA", cert: issue(t, ca, IssueOptions{IPAddresses: localhost, Usage: UsageServer}), wantErr: true},
		{
			name:    "expired certificate from the CA",
			cert:    issue(t, ca, IssueOptions{CommonName: "old", Usage: UsageClient, NotBefore: time.Now().Add(-2 * time.Hour), Validity: time.Hour}),
			wantErr: true,
		},
		{name: "client certificate from the CA", cert: issue(t, ca, IssueOptions{CommonName: "kube-apiserver", Usage: UsageClient}), wantBody: "kube-apiserver"},
	}
	versions := []struct {
		name    string
		version uint16
	}{
		{name: "TLS 1.2", version: tls.VersionTLS12},
		{name: "TLS 1.3", version: tls.VersionTLS13},
	}
	for _, tc := range tests {
		for _, v := range versions {
			t.Run(tc.name+"/"+v.name, func(t *testing.T) {
				t.Parallel()
				c := client{roots: pool(t, ca), minVersion: v.version, maxVersion: v.version}
				if tc.cert.cert != nil {
					c.cert = tc.cert.tlsCertificate(t)
				}

				res, err := c.get(t.Context(), addr)

				if tc.wantErr {
					assert.Error(t, err)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tc.wantBody, res.body)
			})
		}
	}
}

func TestReloadRotatesClientCA(t *testing.T) {
	t.Parallel()
	for _, tc := range layouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			serverCA := newTestCA(t, "server CA")
			oldCA, newCA := newTestCA(t, "old client CA"), newTestCA(t, "new client CA")
			server := serverPair(t, serverCA)
			dir := tc.newLayout(t)
			dir.write(t, map[string][]byte{certName: server.cert, keyName: server.key, caName: oldCA.CertPEM()})
			var hooks hookRecorder
			w, err := New(Options{
				CertFile:     dir.path(certName),
				KeyFile:      dir.path(keyName),
				ClientCAFile: dir.path(caName),
				OnReload:     hooks.record,
			})
			require.NoError(t, err)
			addr := serve(t, w)

			// oldClient keeps a session cache: a resumed TLS 1.3 session
			// must not outlive the CA that verified it.
			oldClient := client{
				roots:    pool(t, serverCA),
				cert:     issue(t, oldCA, IssueOptions{CommonName: "old", Usage: UsageClient}).tlsCertificate(t),
				sessions: tls.NewLRUClientSessionCache(4),
			}
			newClient := client{
				roots: pool(t, serverCA),
				cert:  issue(t, newCA, IssueOptions{CommonName: "new", Usage: UsageClient}).tlsCertificate(t),
			}
			accepted := func(c client) bool {
				_, err := c.get(t.Context(), addr)
				return err == nil
			}
			require.True(t, accepted(oldClient))
			require.True(t, accepted(oldClient))
			require.False(t, accepted(newClient))

			steps := []struct {
				name      string
				bundle    []byte
				wantErr   bool
				wantOld   bool
				wantNew   bool
				wantHooks []string
			}{
				{name: "overlap: both CAs", bundle: append(oldCA.CertPEM(), newCA.CertPEM()...), wantOld: true, wantNew: true},
				{name: "broken update keeps both", bundle: []byte("-----BEGIN CERT"), wantErr: true, wantOld: true, wantNew: true},
				{name: "new CA only", bundle: newCA.CertPEM(), wantNew: true},
			}
			for _, step := range steps {
				dir.write(t, map[string][]byte{caName: step.bundle})
				err := w.Reload()
				if step.wantErr {
					require.ErrorContains(t, err, "parse client CA", step.name)
				} else {
					require.NoError(t, err, step.name)
				}
				assertHookCall(t, hooks.take(), ReloadClientCA, err)
				assert.Equal(t, step.wantOld, accepted(oldClient), "%s: client of the old CA", step.name)
				assert.Equal(t, step.wantNew, accepted(newClient), "%s: client of the new CA", step.name)
			}
			assert.Equal(t, server.serial(t), w.Certificate().SerialNumber, "certificate untouched")
		})
	}
}

func TestRunPollsUntilCancelled(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "test CA")
	a, b := serverPair(t, ca), serverPair(t, ca)
	dir := newSecretDir(t)
	dir.write(t, pairFiles(a))
	var hooks hookRecorder
	w, err := New(Options{
		CertFile: dir.path(certName),
		KeyFile:  dir.path(keyName),
		Interval: 10 * time.Millisecond,
		OnReload: hooks.record,
	})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		w.Run(ctx)
		close(done)
	}()

	want := b.serial(t)
	dir.write(t, pairFiles(b))
	require.Eventually(t, func() bool {
		return w.Certificate().SerialNumber.Cmp(want) == 0
	}, 10*time.Second, 10*time.Millisecond, "Run picks up the new certificate")

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	assert.Equal(t, []hookCall{{what: ReloadCertificate}}, hooks.take())
}

// assertHookCall checks that OnReload was called once, for what, with the
// error Reload returned (Reload joins the certificate and client CA errors).
func assertHookCall(t *testing.T, calls []hookCall, what string, reloadErr error) {
	t.Helper()
	require.Len(t, calls, 1)
	assert.Equal(t, what, calls[0].what)
	if reloadErr == nil {
		assert.NoError(t, calls[0].err)
		return
	}
	require.Error(t, calls[0].err)
	assert.ErrorIs(t, reloadErr, calls[0].err)
}
