package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
	"github.com/yunikorn-userinfo/userinfo/internal/syncbuf"
)

// TestRun assembles the whole server from options, as `serve` does: it
// listens, turns ready once the module is loaded, answers reviews and
// serves metrics, and returns nil after a clean shutdown.
func TestRun(t *testing.T) {
	t.Parallel()
	certFile, keyFile, client := certFiles(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	listening := make(chan [2]net.Addr, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{
			Module:   hostileWasm,
			Engine:   engine.Options{MaxInstances: 1},
			CertFile: certFile, KeyFile: keyFile,
			Server:   ServerOptions{Listener: ln, MetricsListener: mln},
			Version:  "test",
			OnListen: func(a, m net.Addr) { listening <- [2]net.Addr{a, m} },
		})
	}()
	addrs := <-listening
	base := "https://" + addrs[0].String()
	waitFor(t, "ready", func() bool {
		resp, err := client.Get(base + PathReadyz)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	resp, err := client.Post(base+PathMutate, "application/json", strings.NewReader(reviewBody("a1")))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r := decodeReview(t, body)
	assert.Equal(t, "a1", r.Response.UID)
	assert.True(t, r.Response.Allowed)

	mresp, err := http.Get("http://" + addrs[1].String() + "/metrics")
	require.NoError(t, err)
	page, err := io.ReadAll(mresp.Body)
	_ = mresp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(page), `yunikorn_userinfo_build_info{version="test"} 1`)
	assert.Contains(t, string(page), `yunikorn_userinfo_admissions_total{kind="Pod",operation="CREATE",outcome="allowed",stage="mutate"} 1`)
	assert.Contains(t, string(page), `yunikorn_userinfo_instances_max 1`)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

func TestRun_errorsNameTheStep(t *testing.T) {
	t.Parallel()
	certFile, keyFile, _ := certFiles(t)
	listener := func() ServerOptions {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		return ServerOptions{Listener: ln}
	}
	err := Run(t.Context(), RunOptions{CertFile: certFile, KeyFile: keyFile, Server: listener()})
	assert.ErrorContains(t, err, "run webhook: a module is required")

	err = Run(t.Context(), RunOptions{Module: hostileWasm, CertFile: certFile, KeyFile: filepath.Join(t.TempDir(), "missing.key"),
		Server: listener()})
	assert.ErrorContains(t, err, "load TLS files")

	err = Run(t.Context(), RunOptions{Module: []byte("\x00asm\x01\x00\x00\x00garbage"), ModuleName: "broken.wasm",
		CertFile: certFile, KeyFile: keyFile, Server: listener()})
	assert.ErrorContains(t, err, "load policy broken.wasm")
}

// TestRun_settingsInForce: the settings in force are logged with their
// SHA-256 at start and on every applied reload, and
// yunikorn_userinfo_settings_info reports that hash, one series at a time.
func TestRun_settingsInForce(t *testing.T) {
	t.Parallel()
	certFile, keyFile, _ := certFiles(t)
	path := filepath.Join(t.TempDir(), "settings.yaml")
	require.NoError(t, os.WriteFile(path, []byte("externalUsers: [\"^livy$\"]\n"), 0o600))
	first, err := settings.ReadFile(path)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var logs syncbuf.Buffer
	listening := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{
			Module: hostileWasm, Engine: engine.Options{MaxInstances: 1},
			Settings: first, SettingsPath: path, SettingsInterval: 20 * time.Millisecond,
			CertFile: certFile, KeyFile: keyFile,
			Server:   ServerOptions{Listener: ln, MetricsListener: mln},
			Logger:   slog.New(slog.NewJSONHandler(&logs, nil)),
			OnListen: func(_, m net.Addr) { listening <- m },
		})
	}()
	metricsURL := "http://" + (<-listening).String() + "/metrics"
	infoLines := func() []string {
		resp, err := http.Get(metricsURL)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		page, _ := io.ReadAll(resp.Body)
		var out []string
		for _, l := range strings.Split(string(page), "\n") {
			if strings.HasPrefix(l, "yunikorn_userinfo_settings_info{") {
				out = append(out, l)
			}
		}
		return out
	}
	firstLine := `yunikorn_userinfo_settings_info{sha256="` + SettingsHash(first) + `"} 1`
	waitFor(t, "the first settings' hash", func() bool { return slices.Equal(infoLines(), []string{firstLine}) })

	require.NoError(t, os.WriteFile(path, []byte("externalUsers: [\"^airflow$\"]\n"), 0o600))
	second, err := settings.ReadFile(path)
	require.NoError(t, err)
	require.NotEqual(t, SettingsHash(first), SettingsHash(second))
	secondLine := `yunikorn_userinfo_settings_info{sha256="` + SettingsHash(second) + `"} 1`
	waitFor(t, "the reloaded settings' hash, alone", func() bool { return slices.Equal(infoLines(), []string{secondLine}) })

	cancel()
	require.NoError(t, <-done)
	loaded := logLines(t, logs.String(), "settings in force")
	require.Len(t, loaded, 2)
	assert.Equal(t, "start", loaded[0]["loaded"])
	assert.Equal(t, SettingsHash(first), loaded[0]["sha256"])
	assert.Equal(t, string(first), loaded[0]["settings"])
	assert.Equal(t, "reload", loaded[1]["loaded"])
	assert.Equal(t, SettingsHash(second), loaded[1]["sha256"])
	assert.Equal(t, string(second), loaded[1]["settings"])
	sum := sha256.Sum256(second)
	assert.Equal(t, hex.EncodeToString(sum[:]), loaded[1]["sha256"])
}

// TestRun_beforeReady: /readyz stays 503 while BeforeReady (the policy's
// caches syncing) has not returned, and turns 200 once it has; a shutdown
// while waiting is a clean one.
func TestRun_beforeReady(t *testing.T) {
	t.Parallel()
	certFile, keyFile, client := certFiles(t)
	start := func(ctx context.Context, before func(context.Context) error) (string, chan error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		listening := make(chan net.Addr, 1)
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, RunOptions{Module: hostileWasm, Engine: engine.Options{MaxInstances: 1},
				CertFile: certFile, KeyFile: keyFile, Server: ServerOptions{Listener: ln},
				BeforeReady: before, OnListen: func(a, _ net.Addr) { listening <- a }})
		}()
		return "https://" + (<-listening).String(), done
	}
	readyz := func(base string) int {
		resp, err := client.Get(base + PathReadyz)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	synced := make(chan struct{})
	asked := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base, done := start(ctx, func(ctx context.Context) error {
		close(asked)
		select {
		case <-synced:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	<-asked
	for range 5 {
		assert.Equal(t, http.StatusServiceUnavailable, readyz(base), "not ready before the caches synced")
	}
	close(synced)
	waitFor(t, "ready", func() bool { return readyz(base) == http.StatusOK })
	cancel()
	require.NoError(t, <-done)

	ctx2, cancel2 := context.WithCancel(t.Context())
	waiting := make(chan struct{})
	_, done = start(ctx2, func(ctx context.Context) error { close(waiting); <-ctx.Done(); return ctx.Err() })
	<-waiting
	cancel2()
	assert.NoError(t, <-done, "a shutdown while waiting for the caches is clean")
}
