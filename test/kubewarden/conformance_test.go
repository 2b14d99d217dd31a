package kubewarden

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

// policyWasm reads the module under test (fixtures.PolicyWasmPath). A
// missing module fails: this module's tests exist only to run it.
func policyWasm(t testing.TB) []byte {
	t.Helper()
	wasm, err := os.ReadFile(fixtures.PolicyWasmPath())
	require.NoError(t, err, "policy module (run `make policy`)")
	return wasm
}

// TestPolicyServer_fixtures runs the whole fixture table through the
// policy-server double. Each case must give its expected answer, or the
// Kubewarden-specific outcome the case records with its reason.
func TestPolicyServer_fixtures(t *testing.T) {
	ps, err := New(policyWasm(t))
	require.NoError(t, err)
	cluster := fixturecheck.ClusterHostCalls(t, nil)
	ps.Kubernetes = func(operation string, payload []byte) ([]byte, error) {
		return cluster(t.Context(), "kubewarden", "kubernetes", operation, payload)
	}
	cases, err := fixtures.Load()
	require.NoError(t, err)

	settingsValid := map[string]bool{}
	evaluated, differing := 0, 0
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			kw := c.Kubewarden
			valid, ok := settingsValid[string(c.Settings)]
			if !ok {
				v, _, err := ps.ValidateSettings(c.Settings)
				require.NoError(t, err)
				valid, settingsValid[string(c.Settings)] = v, v
			}
			if !valid {
				require.NotNil(t, kw, "policy-server refuses these settings at boot; the case must say so")
				assert.Equal(t, "settings", kw.Refused)
				differing++
				return
			}
			out, err := ps.Validate(c.Request, c.Settings)
			if errors.Is(err, errUnparseable) {
				require.NotNil(t, kw, "policy-server refuses this body (%v); the case must say so", err)
				assert.Equal(t, "body", kw.Refused, "%v", err)
				differing++
				return
			}
			require.NoError(t, err)
			evaluated++
			if kw != nil {
				require.Empty(t, kw.Refused, "the case says policy-server refuses it, but it was evaluated")
				c.Expect = *kw.Expect
				differing++
			}
			fixturecheck.CheckAdmissionResponse(t, c, out)
		})
	}
	t.Logf("%d cases: %d evaluated, %d with a Kubewarden-specific outcome", len(cases), evaluated, differing)
	// One decision line per evaluation, through kubewarden/tracing/log.
	decisions := 0
	for _, l := range ps.Logs() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(l, &line))
		if line["message"] == "decision" {
			decisions++
		}
	}
	assert.Equal(t, evaluated, decisions)
}

// TestPolicyServer_settings: validate_settings in a fresh instance gives the
// answers of the settings table.
func TestPolicyServer_settings(t *testing.T) {
	ps, err := New(policyWasm(t))
	require.NoError(t, err)
	cases, err := fixtures.LoadSettings()
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			valid, message, err := ps.ValidateSettings(tc.Document())
			want, wantMessage := tc.Valid, tc.Message
			if kw := tc.Kubewarden; kw != nil {
				if kw.Unparseable {
					assert.ErrorIs(t, err, errUnparseable)
					return
				}
				want, wantMessage = kw.Valid, kw.Message
			}
			require.NoError(t, err)
			assert.Equal(t, want, valid)
			assert.Equal(t, wantMessage, message)
		})
	}
}
