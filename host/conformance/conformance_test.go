// Package conformance runs the shared fixture table against the built
// policy.wasm: through this project's host (host/engine), and through
// wapc-go, an independent waPC host, to show the module speaks the
// Kubewarden waPC ABI rather than only our host's dialect. It has tests only.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	wapc "github.com/wapc/wapc-go"
	wapcwazero "github.com/wapc/wapc-go/engines/wazero"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

// policyWasm reads the module under test: $POLICY_WASM (set by `make
// test`), else build/policy.wasm. Without one, the test is skipped locally
// but fails in CI, where a missing module must never pass silently.
// moduleCache holds the compiled code of the modules the tests run, so
// each is compiled once for the package, not once per engine.
var moduleCache = wazero.NewCompilationCache()

func policyWasm(t testing.TB) []byte {
	t.Helper()
	path := fixtures.PolicyWasmPath()
	wasm, err := os.ReadFile(path)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("policy module: %v (run `make policy`)", err)
		}
		t.Skipf("no policy module at %s: run `make policy` or `make test`", path)
	}
	return wasm
}

// captureLogs collects the policy's log lines that reach the host.
type captureLogs struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (c *captureLogs) Enabled(context.Context, slog.Level) bool { return true }
func (c *captureLogs) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message, "level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	c.mu.Lock()
	c.lines = append(c.lines, m)
	c.mu.Unlock()
	return nil
}
func (c *captureLogs) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *captureLogs) WithGroup(string) slog.Handler      { return c }

func TestOurHost_fixtures(t *testing.T) {
	wasm := policyWasm(t)
	logs := &captureLogs{}
	e, err := engine.New(t.Context(), wasm, engine.Options{CompilationCache: moduleCache, Logger: slog.New(logs), MaxInstances: 2,
		HostCalls: fixturecheck.ClusterHostCalls(t, slog.New(logs))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(context.Background()) })

	version, err := e.ProtocolVersion(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "v1", version)

	cases, err := fixtures.Load()
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			out, err := e.Validate(t.Context(), c.Payload())
			require.NoError(t, err)
			fixturecheck.CheckValidationResponse(t, c, out)
		})
	}
	t.Cleanup(func() {
		// Every evaluation left one decision line in the host's log.
		logs.mu.Lock()
		defer logs.mu.Unlock()
		decisions := 0
		for _, l := range logs.lines {
			if l["msg"] == "decision" && l["source"] == "policy" {
				decisions++
			}
		}
		assert.Equal(t, len(cases), decisions, "one decision trace line per evaluation")
		assert.Zero(t, e.Stats().Replacements, "no instance trapped or was replaced")
	})
}

func TestOurHost_settings(t *testing.T) {
	wasm := policyWasm(t)
	e, err := engine.New(t.Context(), wasm, engine.Options{CompilationCache: moduleCache, MaxInstances: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	cases, err := fixtures.LoadSettings()
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := e.ValidateSettings(t.Context(), tc.Document())
			require.NoError(t, err)
			assert.Equal(t, engine.SettingsValidation{Valid: tc.Valid, Message: tc.Message}, got)
		})
	}
}

// TestWapcGo_fixtures runs the module under wapc-go's wazero engine, which
// shares no code with host/engine.
func TestWapcGo_fixtures(t *testing.T) {
	wasm := policyWasm(t)
	ctx := t.Context()
	var logged [][]byte
	var mu sync.Mutex
	cluster := fixturecheck.ClusterHostCalls(t, nil)
	hostCalls := func(ctx context.Context, binding, namespace, operation string, payload []byte) ([]byte, error) {
		switch {
		case binding == "kubewarden" && namespace == "tracing" && operation == "log":
			mu.Lock()
			logged = append(logged, bytes.Clone(payload))
			mu.Unlock()
			return nil, nil
		case binding == "kubewarden" && namespace == "kubernetes":
			return cluster(ctx, binding, namespace, operation, payload)
		}
		return nil, assert.AnError
	}
	mod, err := wapcwazero.Engine().New(ctx, hostCalls, wasm, &wapc.ModuleConfig{Logger: func(string) {}, Stdout: io.Discard, Stderr: io.Discard})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mod.Close(context.Background()) })
	inst, err := mod.Instantiate(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close(context.Background()) })

	version, err := inst.Invoke(ctx, "protocol_version", nil)
	require.NoError(t, err)
	assert.Equal(t, `"v1"`, string(version))

	settings, err := fixtures.LoadSettings()
	require.NoError(t, err)
	for _, tc := range settings {
		out, err := inst.Invoke(ctx, "validate_settings", tc.Document())
		require.NoError(t, err, tc.Name)
		var got engine.SettingsValidation
		require.NoError(t, json.Unmarshal(out, &got), tc.Name)
		assert.Equal(t, engine.SettingsValidation{Valid: tc.Valid, Message: tc.Message}, got, tc.Name)
	}

	cases, err := fixtures.Load()
	require.NoError(t, err)
	// One instance, used sequentially: waPC instances are not reentrant.
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			out, err := inst.Invoke(ctx, "validate", c.Payload())
			require.NoError(t, err)
			fixturecheck.CheckValidationResponse(t, c, out)
		})
	}
	mu.Lock()
	defer mu.Unlock()
	decisions := 0
	for _, l := range logged {
		var line map[string]any
		require.NoError(t, json.Unmarshal(l, &line), "log lines are JSON: %s", l)
		if line["message"] == "decision" {
			decisions++
		}
	}
	assert.Equal(t, len(cases), decisions, "one decision trace line per evaluation")
}
