package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

// TestRun_monitorScheduling: in monitor mode the scheduling jobs are done
// on every Pod the policy admits (the answer is the one without monitor
// mode, patch included), and not on one it would refuse, which is admitted
// as it was sent: no patch at all, the refusal in a warning
// (docs/BEHAVIOUR.md §3.9).
func TestRun_monitorScheduling(t *testing.T) {
	cases, err := fixtures.Load()
	require.NoError(t, err)
	golden := readGolden(t)
	cache := compilationCache(t)
	checked := map[string]bool{}
	for _, name := range []string{"pod/scheduling/default-namespace", "pod/scheduling/refused-gets-nothing", "pod/scheduling/queue-check-sees-scheduler"} {
		i := slices.IndexFunc(cases, func(c fixtures.Case) bool { return c.Name == name })
		require.GreaterOrEqual(t, i, 0, name)
		c := cases[i]
		t.Run(name, func(t *testing.T) {
			res := runCLIWith(t, cache, string(c.Request), "run", "--monitor", "--settings-json", string(c.Settings),
				"--context-dir", fixtures.ClusterDir(), "-r", "-")
			require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
			var got, enforced fixturecheck.AdmissionResponse
			require.NoError(t, json.Unmarshal([]byte(res.stdout), &got), "%s", res.stdout)
			require.NoError(t, json.Unmarshal([]byte(golden[c.Name]), &enforced), "golden line of %s", c.Name)
			if c.Expect.Allowed {
				assert.Equal(t, enforced, got, "an admitted Pod is answered as without monitor mode")
				require.NotNil(t, got.Patch)
				fixturecheck.CheckAdmissionResponse(t, c, []byte(strings.TrimSpace(res.stdout)))
			} else {
				assert.True(t, got.Allowed)
				assert.Nil(t, got.Patch, "a Pod the policy would refuse gets no scheduling patch")
				assert.Equal(t, []string{"monitor mode: would be refused: " + c.Expect.Message + " (code 403)"}, got.Warnings)
			}
			checked[c.Name] = c.Expect.Allowed
		})
	}
	assert.Len(t, checked, 3)
}
