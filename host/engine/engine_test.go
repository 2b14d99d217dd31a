package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// shortTimeout keeps tests of looping guests quick; assertions never depend
// on how long anything took.
const shortTimeout = 200 * time.Millisecond

func readGuest(t *testing.T, name string) []byte {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	require.NoError(t, err)
	return wasm
}

func newEngine(t *testing.T, guest string, opts engine.Options) *engine.Engine {
	t.Helper()
	e, err := engine.New(t.Context(), readGuest(t, guest), opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.Close(context.Background())) })
	return e
}

// record is one captured log record, attributes flattened to a map.
type record struct {
	Level   slog.Level
	Message string
	Attrs   map[string]any
}

// recorder is a slog.Handler that keeps every record, for assertions.
type recorder struct {
	mu      sync.Mutex
	records []record
}

var _ slog.Handler = (*recorder)(nil)

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	attrs := map[string]any{}
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.Any()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, record{Level: rec.Level, Message: rec.Message, Attrs: attrs})
	return nil
}

func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) Records() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]record(nil), r.records...)
}

func TestNew_moduleShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		guest string
	}{
		{name: "hand-written command", guest: "echo"},
		{name: "_start ending in proc_exit(0)", guest: "start_exit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, tc.guest, engine.Options{})

			version, err := e.ProtocolVersion(t.Context())
			require.NoError(t, err)
			assert.Equal(t, engine.ProtocolV1, version)
			assert.Equal(t, engine.Stats{Instances: 1, Idle: 1}, e.Stats())
		})
	}
}

// TestNew_reactorIsStartedAsKubewardenStartsIt: a reactor build that needs
// _initialize cannot start under Kubewarden's policy-server, which calls
// only _start and wapc_init; the engine starts it the same way, so it fails
// here too, after a warning that names the cause.
func TestNew_reactorIsStartedAsKubewardenStartsIt(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	_, err := engine.New(t.Context(), readGuest(t, "reactor"), engine.Options{Logger: slog.New(rec)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "call wapc_init")
	var warned bool
	for _, r := range rec.Records() {
		warned = warned || (r.Level == slog.LevelWarn && strings.Contains(r.Message, "never calls"))
	}
	assert.True(t, warned, "a warning says policy-server never calls _initialize: %+v", rec.Records())
}

func TestNew_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		wasm        []byte
		wantIs      error
		wantMessage string
	}{
		{
			name:        "not wasm",
			wasm:        []byte("not a module"),
			wantMessage: "compile module: ",
		},
		{
			name:        "no __guest_call",
			wasm:        readGuest(t, "no_guest_call"),
			wantMessage: "no __guest_call export: not a waPC module",
		},
		{
			name:        "import the host does not provide",
			wasm:        readGuest(t, "unknown_import"),
			wantMessage: "imports functions this host does not provide: env.abort",
		},
		{
			name:        "_start exits with code 3",
			wasm:        readGuest(t, "start_fail"),
			wantIs:      engine.ErrExited,
			wantMessage: "call _start: guest exited: module closed with exit_code(3)",
		},
		{
			name:        "protocol v2",
			wasm:        readGuest(t, "wrong_version"),
			wantMessage: `check protocol version: module speaks "v2", this host speaks "v1"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := engine.New(t.Context(), tc.wasm, engine.Options{})
			require.Error(t, err)
			assert.Nil(t, e)
			if tc.wantIs != nil {
				assert.ErrorIs(t, err, tc.wantIs)
			}
			assert.ErrorContains(t, err, tc.wantMessage)
		})
	}
}

func TestEngine_Invoke(t *testing.T) {
	t.Parallel()
	large := strings.Repeat("x", 300<<10) // makes the guest grow its memory
	tests := []struct {
		name      string
		guest     string
		operation string
		payload   string
		want      string
	}{
		{name: "echo", guest: "echo", operation: "echo", payload: "hello", want: "hello"},
		{name: "empty payload", guest: "echo", operation: "echo", payload: "", want: ""},
		{name: "large payload", guest: "echo", operation: "echo", payload: large, want: large},
		{name: "after _start exited with 0", guest: "start_exit", operation: "echo", payload: "still here", want: "still here"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, tc.guest, engine.Options{})

			got, err := e.Invoke(t.Context(), tc.operation, []byte(tc.payload))
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

// TestEngine_Invoke_failures checks each way an invocation can fail, that
// broken instances are replaced, and that the next invocation on the same
// Engine works.
func TestEngine_Invoke_failures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		guest        string
		opts         engine.Options
		ctxTimeout   time.Duration
		operation    string
		wantIs       error
		wantGuestErr *engine.GuestError
		wantMessage  string
		wantReplaced bool
	}{
		{
			name:         "trap",
			guest:        "trap",
			operation:    "validate",
			wantIs:       engine.ErrTrap,
			wantMessage:  "wasm error: unreachable",
			wantReplaced: true,
		},
		{
			name:         "endless loop hits Options.Timeout",
			guest:        "loop",
			opts:         engine.Options{Timeout: shortTimeout},
			operation:    "validate",
			wantIs:       engine.ErrTimeout,
			wantMessage:  "context deadline exceeded",
			wantReplaced: true,
		},
		{
			name:         "endless loop hits the caller's earlier deadline",
			guest:        "loop",
			opts:         engine.Options{Timeout: time.Minute},
			ctxTimeout:   shortTimeout,
			operation:    "validate",
			wantIs:       engine.ErrTimeout,
			wantReplaced: true,
		},
		{
			name:         "memory grows past the limit",
			guest:        "grow",
			opts:         engine.Options{MemoryLimitPages: 64},
			operation:    "validate",
			wantIs:       engine.ErrTrap,
			wantMessage:  "unreachable",
			wantReplaced: true,
		},
		{
			name:         "proc_exit(1) during the call",
			guest:        "exit",
			operation:    "validate",
			wantIs:       engine.ErrExited,
			wantMessage:  "exit_code(1)",
			wantReplaced: true,
		},
		{
			name:         "proc_exit(0) during the call",
			guest:        "exit",
			operation:    "exit0",
			wantIs:       engine.ErrExited,
			wantMessage:  "exit_code(0)",
			wantReplaced: true,
		},
		{
			name:         "response pointer outside memory",
			guest:        "bad_pointer",
			operation:    "validate",
			wantIs:       engine.ErrTrap,
			wantMessage:  "wapc.__guest_response: guest memory range [4294967280, +64) is out of bounds",
			wantReplaced: true,
		},
		{
			name:         "__guest_error",
			guest:        "guest_error",
			operation:    "fail",
			wantGuestErr: &engine.GuestError{Operation: "fail", Message: "policy says no"},
		},
		{
			name:         "failure without a message",
			guest:        "guest_error",
			operation:    "validate",
			wantGuestErr: &engine.GuestError{Operation: "validate", Message: `call to "validate" was unsuccessful`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.MaxInstances = 1
			e := newEngine(t, tc.guest, tc.opts)

			ctx := t.Context()
			if tc.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
				defer cancel()
			}
			out, err := e.Invoke(ctx, tc.operation, []byte(`{}`))
			require.Error(t, err)
			assert.Nil(t, out)
			if tc.wantGuestErr != nil {
				var guestErr *engine.GuestError
				require.ErrorAs(t, err, &guestErr)
				assert.Equal(t, tc.wantGuestErr, guestErr)
			} else {
				assert.ErrorIs(t, err, tc.wantIs)
				assert.ErrorContains(t, err, tc.wantMessage)
			}

			wantStats := engine.Stats{Instances: 1, Idle: 1}
			if tc.wantReplaced {
				wantStats = engine.Stats{Instances: 0, Idle: 0, Replacements: 1}
			}
			assert.Equal(t, wantStats, e.Stats())

			// The next invocation gets a working instance.
			version, err := e.ProtocolVersion(t.Context())
			require.NoError(t, err)
			assert.Equal(t, engine.ProtocolV1, version)
			wantStats.Instances, wantStats.Idle = 1, 1
			assert.Equal(t, wantStats, e.Stats())
		})
	}
}

func TestEngine_ValidateSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		guest       string
		settings    string
		want        engine.SettingsValidation
		wantMessage string
	}{
		{name: "valid", guest: "echo", settings: `{"a":1}`, want: engine.SettingsValidation{Valid: true}},
		{name: "empty settings", guest: "echo", settings: ``, want: engine.SettingsValidation{Valid: true}},
		{name: "answer is not JSON", guest: "bad_settings", settings: `{}`, wantMessage: `decode validate_settings response "{\"valid\":"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, tc.guest, engine.Options{})

			got, err := e.ValidateSettings(t.Context(), []byte(tc.settings))
			if tc.wantMessage != "" {
				assert.ErrorContains(t, err, tc.wantMessage)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestEngine_Validate(t *testing.T) {
	t.Parallel()
	e := newEngine(t, "echo", engine.Options{})
	payload := []byte(`{"request":{"uid":"1"},"settings":{}}`)

	got, err := e.Validate(t.Context(), payload)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
}

// TestEngine_Invoke_concurrent runs many more goroutines than instances;
// every caller must get its own answer. Meant to run under -race.
func TestEngine_Invoke_concurrent(t *testing.T) {
	t.Parallel()
	const goroutines, calls = 16, 20
	e := newEngine(t, "echo", engine.Options{MaxInstances: 2, Timeout: 30 * time.Second})

	var wg sync.WaitGroup
	errs := make(chan error, goroutines*calls)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				want := fmt.Sprintf("goroutine %d call %d", g, i)
				got, err := e.Invoke(t.Context(), "echo", []byte(want))
				if err == nil && string(got) != want {
					err = fmt.Errorf("got %q, want %q", got, want)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	stats := e.Stats()
	assert.LessOrEqual(t, stats.Instances, 2)
	assert.Equal(t, stats.Instances, stats.Idle)
	assert.Zero(t, stats.Replacements)
}

// TestEngine_Invoke_noFreeInstance occupies the only instance with a looping
// guest, then checks that a second invocation gives up waiting.
func TestEngine_Invoke_noFreeInstance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		deadline bool // else cancel the ctx while waiting
		wantIs   error
	}{
		{name: "canceled while waiting", wantIs: context.Canceled},
		{name: "deadline while waiting", deadline: true, wantIs: context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, "loop", engine.Options{MaxInstances: 1, Timeout: 10 * time.Second})

			busyCtx, stopBusy := context.WithCancel(t.Context())
			busy := make(chan error, 1)
			go func() {
				_, err := e.Invoke(busyCtx, "spin", nil)
				busy <- err
			}()
			require.Eventually(t, func() bool { return e.Stats().Idle == 0 }, 10*time.Second, time.Millisecond)

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.deadline {
				ctx, cancel = context.WithTimeout(ctx, shortTimeout)
				defer cancel()
			} else {
				go func() {
					// Cancel only once the invocation is waiting.
					for e.Stats().Waits == 0 && ctx.Err() == nil {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
			}
			_, err := e.Invoke(ctx, "validate", nil)
			assert.ErrorIs(t, err, engine.ErrInstanceUnavailable)
			assert.ErrorIs(t, err, tc.wantIs)
			assert.NotErrorIs(t, err, engine.ErrTimeout)
			assert.Equal(t, uint64(1), e.Stats().Waits)

			stopBusy()
			require.ErrorIs(t, <-busy, context.Canceled)
		})
	}
}

func TestEngine_Close(t *testing.T) {
	t.Parallel()
	e, err := engine.New(t.Context(), readGuest(t, "echo"), engine.Options{})
	require.NoError(t, err)

	require.NoError(t, e.Close(t.Context()))
	assert.NoError(t, e.Close(t.Context()), "second Close")
	_, err = e.Invoke(t.Context(), "echo", nil)
	assert.ErrorIs(t, err, engine.ErrClosed)
	assert.Equal(t, engine.Stats{}, e.Stats())
}

func TestPolicyWasm(t *testing.T) {
	t.Parallel()
	path := fixtures.PolicyWasmPath()
	wasm, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("no policy module at %s: build it first (make policy.wasm) or set POLICY_WASM", path)
	}
	require.NoError(t, err)
	e, err := engine.New(t.Context(), wasm, engine.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.Close(context.Background())) })

	version, err := e.ProtocolVersion(t.Context())
	require.NoError(t, err)
	assert.Equal(t, engine.ProtocolV1, version)

	got, err := e.ValidateSettings(t.Context(), []byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, engine.SettingsValidation{Valid: true}, got)
}

// TestEngine_budget covers how a guest is stopped: by the deadline or by
// its work budget when the module is metered, and by wazero's context
// checks when the module cannot be instrumented.
func TestEngine_budget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		guest       string
		opts        engine.Options
		wantMetered bool
		wantErr     string
	}{
		{name: "metered, deadline", guest: "loop", opts: engine.Options{Timeout: shortTimeout},
			wantMetered: true, wantErr: "context deadline exceeded"},
		{name: "metered, budget runs out first", guest: "loop", opts: engine.Options{Timeout: time.Minute, Budget: 1 << 20},
			wantMetered: true, wantErr: "work budget of 1048576 function calls and loop iterations used up"},
		{name: "not instrumentable, deadline", guest: "loop_simd", opts: engine.Options{Timeout: shortTimeout},
			wantMetered: false, wantErr: "deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, tc.guest, tc.opts)
			assert.Equal(t, tc.wantMetered, e.Metered())
			_, err := e.Invoke(t.Context(), "spin", nil)
			require.ErrorIs(t, err, engine.ErrTimeout)
			assert.Contains(t, err.Error(), tc.wantErr)
			// The instance was replaced and the next call is served.
			v, err := e.ProtocolVersion(t.Context())
			require.NoError(t, err)
			assert.Equal(t, engine.ProtocolV1, v)
			assert.Equal(t, uint64(1), e.Stats().Replacements)
		})
	}
}

// TestEngine_budget_allCPUsBusy fills every CPU the Go scheduler has with
// looping guests: each must still be stopped at its deadline, which needs
// the instrumented code to yield to the scheduler (Go cannot preempt it),
// and every stopped instance is replaced, none reused.
func TestEngine_budget_allCPUsBusy(t *testing.T) {
	t.Parallel()
	n := runtime.GOMAXPROCS(0) + 1
	e := newEngine(t, "loop", engine.Options{MaxInstances: n, Timeout: shortTimeout})
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := e.Invoke(t.Context(), "spin", nil)
			errs <- err
		}()
	}
	for range n {
		err := <-errs
		require.ErrorIs(t, err, engine.ErrTimeout)
		assert.Contains(t, err.Error(), "context deadline exceeded", "stopped by the deadline, not the budget")
	}
	assert.Equal(t, engine.Stats{Replacements: uint64(n)}, e.Stats())
}
