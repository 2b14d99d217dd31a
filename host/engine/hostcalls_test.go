package engine_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

// TestKubewardenHostCalls drives the default host calls from a guest, the
// way a policy uses them.
func TestKubewardenHostCalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		operation   string
		payload     string
		want        string
		wantRecords []record
	}{
		{
			name:      "policy log line",
			operation: "log",
			payload:   `{"level":"warn","message":"user not allowed","user":"alice","count":2}`,
			want:      "ok:",
			wantRecords: []record{{
				Level:   slog.LevelWarn,
				Message: "user not allowed",
				Attrs:   map[string]any{"source": "policy", "user": "alice", "count": float64(2)},
			}},
		},
		{
			name:      "trace maps to debug",
			operation: "log",
			payload:   `{"level":"trace","message":"details"}`,
			want:      "ok:",
			wantRecords: []record{{
				Level: slog.LevelDebug, Message: "details", Attrs: map[string]any{"source": "policy"},
			}},
		},
		{
			name:      "error level",
			operation: "log",
			payload:   `{"level":"error","message":"broken"}`,
			want:      "ok:",
			wantRecords: []record{{
				Level: slog.LevelError, Message: "broken", Attrs: map[string]any{"source": "policy"},
			}},
		},
		{
			name:      "not JSON is logged raw",
			operation: "log",
			payload:   "plain text\n",
			want:      "ok:",
			wantRecords: []record{{
				Level: slog.LevelInfo, Message: "plain text", Attrs: map[string]any{"source": "policy"},
			}},
		},
		{
			name:      "capability the host does not offer",
			operation: "dns",
			payload:   `"example.com"`,
			want:      `error:host capability "kubewarden/net/v1/dns_lookup_host" is not available in this host`,
		},
		{
			name:      "__console_log",
			operation: "console",
			payload:   "hello from the guest",
			want:      "",
			wantRecords: []record{{
				Level:   slog.LevelDebug,
				Message: "guest console log",
				Attrs:   map[string]any{"source": "policy", "text": "hello from the guest"},
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			e := newEngine(t, "host_call", engine.Options{Logger: slog.New(rec)})

			got, err := e.Invoke(t.Context(), tc.operation, []byte(tc.payload))
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
			assert.Equal(t, tc.wantRecords, rec.Records())
		})
	}
}

func TestKubewardenHostCalls_nilLogger(t *testing.T) {
	t.Parallel()
	handler := engine.KubewardenHostCalls(nil)

	out, err := handler(t.Context(), "kubewarden", "tracing", "log", []byte(`{"message":"dropped"}`))
	require.NoError(t, err)
	assert.Empty(t, out)
	_, err = handler(t.Context(), "kubewarden", "oci", "v1/verify", nil)
	assert.EqualError(t, err, `host capability "kubewarden/oci/v1/verify" is not available in this host`)
}

// TestOptions_HostCalls checks that a custom handler replaces the default
// and sees the guest's request.
func TestOptions_HostCalls(t *testing.T) {
	t.Parallel()
	type call struct{ binding, namespace, operation, payload string }
	calls := make(chan call, 1)
	e := newEngine(t, "host_call", engine.Options{
		HostCalls: func(_ context.Context, binding, namespace, operation string, payload []byte) ([]byte, error) {
			calls <- call{binding, namespace, operation, string(payload)}
			return []byte("10.0.0.1"), nil
		},
	})

	got, err := e.Invoke(t.Context(), "dns", []byte("example.com"))
	require.NoError(t, err)
	assert.Equal(t, "ok:10.0.0.1", string(got))
	assert.Equal(t, call{"kubewarden", "net", "v1/dns_lookup_host", "example.com"}, <-calls)
}
