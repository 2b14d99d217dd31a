package perfkit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/certwatch"
)

// fakeServeEnv makes the test binary act as `yunikorn-userinfo serve`, in
// the mode its value names (see fakeServe).
const fakeServeEnv = "PERFKIT_FAKE_SERVE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeServeEnv); mode != "" {
		if err := fakeServe(mode, os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "fake serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeServe imitates serve --self-signed: it writes a CA and a certificate
// into --self-signed-dir and answers /readyz on --listen. Modes:
//
//	ready     503 to the first probes, then 200; exits on SIGTERM
//	stubborn  like ready, but ignores SIGTERM
//	never     503 forever
//	exit      fails at once
func fakeServe(mode string, args []string) error {
	if mode == "exit" {
		return errors.New("invalid settings: boom")
	}
	if len(args) == 0 || args[0] != "serve" {
		return fmt.Errorf("want serve, got %q", args)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Bool("self-signed", false, "")
	dir := fs.String("self-signed-dir", "", "")
	listen := fs.String("listen", "", "")
	fs.String("metrics-listen", "", "")
	cacheDir := fs.String("cache-dir", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *cacheDir != "" {
		if err := os.WriteFile(filepath.Join(*cacheDir, "compiled"), []byte("x"), 0o600); err != nil {
			return err
		}
	}
	ca, err := certwatch.NewCA("fake", time.Hour)
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := ca.Issue(certwatch.IssueOptions{CommonName: "localhost",
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: time.Hour})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	certFile, keyFile := filepath.Join(*dir, "tls.crt"), filepath.Join(*dir, "tls.key")
	for path, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, filepath.Join(*dir, "ca.crt"): ca.CertPEM()} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	var probes atomic.Int32
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mode == "never" || probes.Add(1) <= 3 {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})}
	sig := make(chan os.Signal, 1)
	if mode == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sig, syscall.SIGTERM)
	}
	go func() {
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if err := srv.ListenAndServeTLS(certFile, keyFile); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func TestColdStart(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	tests := []struct {
		name     string
		mode     string
		cacheDir string
		runs     int
		err      string
	}{
		{name: "ready after a few probes", mode: "ready", runs: 3},
		{name: "with cache: filled first", mode: "ready", cacheDir: cache, runs: 2},
		{name: "stubborn server is killed", mode: "stubborn", runs: 1},
		{name: "server exits", mode: "exit", runs: 1, err: "server exited before it was ready"},
		{name: "never ready", mode: "never", runs: 1, err: "not ready within 2s: readyz answered 503"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := ColdStart(t.Context(), ColdStartOptions{
				Binary: os.Args[0], Runs: tc.runs, CacheDir: tc.cacheDir,
				Env:          []string{fakeServeEnv + "=" + tc.mode},
				ReadyTimeout: 2 * time.Second, StopTimeout: 200 * time.Millisecond,
			})
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				if tc.mode == "exit" {
					assert.Contains(t, err.Error(), "boom", "the server's output is in the error")
				}
				return
			}
			require.NoError(t, err)
			assert.Len(t, res.Samples, tc.runs)
			assert.Positive(t, res.Min)
			assert.LessOrEqual(t, res.Min, res.P50)
			assert.LessOrEqual(t, res.P50, res.Max)
			assert.Equal(t, tc.cacheDir != "", res.Cache)
			if tc.cacheDir != "" {
				assert.Positive(t, res.Filling)
				assert.True(t, res.CacheWasEmpty)
				assert.FileExists(t, filepath.Join(tc.cacheDir, "compiled"), "--cache-dir reached the server")
			} else {
				assert.Zero(t, res.Filling)
			}
		})
	}
}

func TestColdStart_options(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts ColdStartOptions
		err  string
	}{
		{name: "no binary", opts: ColdStartOptions{}, err: "no binary"},
		{name: "missing binary", opts: ColdStartOptions{Binary: filepath.Join(t.TempDir(), "nope")}, err: "find binary"},
		{name: "negative runs", opts: ColdStartOptions{Binary: os.Args[0], Runs: -1}, err: "runs -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ColdStart(t.Context(), tc.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

// TestColdStart_realBinary starts the real server once, when it is built
// (make build).
func TestColdStart_realBinary(t *testing.T) {
	t.Parallel()
	binary, err := filepath.Abs("../../build/yunikorn-userinfo")
	require.NoError(t, err)
	if _, err := os.Stat(binary); err != nil {
		t.Skip("build/yunikorn-userinfo not built: run make build")
	}
	res, err := ColdStart(t.Context(), ColdStartOptions{Binary: binary, Runs: 1, CacheDir: t.TempDir()})
	require.NoError(t, err)
	assert.Len(t, res.Samples, 1)
	assert.True(t, res.CacheWasEmpty)
	entries, err := os.ReadDir(res.CacheDir)
	require.NoError(t, err)
	assert.NotEmpty(t, entries, "serve filled the compilation cache")
	var b strings.Builder
	require.NoError(t, WriteColdStartText(&b, res))
	assert.Contains(t, b.String(), "filling the cache: ")
}
