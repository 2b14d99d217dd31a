package conformance

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

// hostilePayload is a ValidationRequest for a Pod CREATE by user with the
// given annotation value (none if empty) and spec.
func hostilePayload(t *testing.T, settings, user, annotation, spec string) []byte {
	t.Helper()
	annotations := ""
	if annotation != "" {
		v, err := json.Marshal(annotation)
		require.NoError(t, err)
		annotations = `,"annotations":{"yunikorn.apache.org/user.info":` + string(v) + `}`
	}
	return []byte(`{"settings":` + settings + `,"request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},` +
		`"operation":"CREATE","userInfo":{"username":"` + user + `"},` +
		`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"` + annotations + `},"spec":` + spec + `}}}`)
}

// TestOurHost_guestNeverTraps: input nested far deeper than any real
// object, in the payload or inside the annotation value, is answered with
// 400 naming where, never with a trap. Under Kubewarden nothing checks the
// depth in front of the module, so the module must.
func TestOurHost_guestNeverTraps(t *testing.T) {
	wasm := policyWasm(t)
	e, err := engine.New(t.Context(), wasm, engine.Options{CompilationCache: moduleCache, MaxInstances: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(context.Background()) })

	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	trusted := `{"externalUsers":["^livy$"]}`
	tests := []struct {
		name    string
		payload []byte
		code    int
		message string
	}{
		{"annotation value nested 1300 deep", hostilePayload(t, trusted, "livy", nest(1300), "{}"),
			400, "annotation yunikorn.apache.org/user.info is invalid: value nests deeper than 16 levels"},
		{"annotation value nested 100,000 deep", hostilePayload(t, trusted, "livy", nest(100_000), "{}"),
			400, "value nests deeper than 16 levels"},
		{"object nested 600 deep", hostilePayload(t, trusted, "alice", "", `{"x":`+nest(600)+`}`),
			400, "request.object.spec.x...: JSON nests deeper than 512 levels"},
		{"object nested 100,000 deep", hostilePayload(t, trusted, "alice", "", nest(100_000)),
			400, "request.object.spec[]...: JSON nests deeper than 512 levels"},
		{"unbalanced, nested 100,000 deep", []byte(`{"request":` + strings.Repeat(`{"a":`, 100_000)),
			400, "request.a.a.a...: JSON nests deeper than 512 levels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.Validate(t.Context(), tc.payload)
			require.NoError(t, err, "the guest answers")
			var resp struct {
				Accepted bool   `json:"accepted"`
				Code     int    `json:"code"`
				Message  string `json:"message"`
			}
			require.NoError(t, json.Unmarshal(out, &resp), "%s", out)
			assert.False(t, resp.Accepted)
			assert.Equal(t, tc.code, resp.Code)
			assert.Contains(t, resp.Message, tc.message)
		})
	}

	// At the limit, a payload is evaluated normally: the guest's stack holds
	// gjson's recursive validation that deep.
	out, err := e.Validate(t.Context(), hostilePayload(t, trusted, "alice", "", `{"x":`+nest(505)+`}`))
	require.NoError(t, err)
	assert.Contains(t, string(out), `"accepted":true`)

	sv, err := e.ValidateSettings(t.Context(), json.RawMessage(`{"externalUsers":`+nest(5000)+`}`))
	require.NoError(t, err)
	assert.False(t, sv.Valid)
	assert.Equal(t, "settings.externalUsers[][][]...: JSON nests deeper than 512 levels", sv.Message)
}

// TestOurHost_recyclesGrownInstances: an instance whose memory grew past
// RecycleMemoryPages serving a huge request is retired, so its garbage
// cannot make later requests trap or crawl; ordinary requests keep theirs.
func TestOurHost_recyclesGrownInstances(t *testing.T) {
	wasm := policyWasm(t)
	e, err := engine.New(t.Context(), wasm, engine.Options{CompilationCache: moduleCache, MaxInstances: 1, RecycleMemoryPages: 64,
		// The test is about recycling, not time: a 2.6 MB request under the
		// race detector on a loaded 2-core machine took past the 2 s default.
		Timeout: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(context.Background()) })

	small := hostilePayload(t, `{}`, "alice", "", "{}")
	for range 3 {
		_, err := e.Validate(t.Context(), small)
		require.NoError(t, err)
	}
	assert.Zero(t, e.Stats().Recycled, "an instance serving small requests stays under 4 MiB")

	// 2.6 MB of groups: the payload and the answer alone take the
	// instance past 4 MiB.
	groups := make([]string, 200_000)
	for i := range groups {
		groups[i] = "group-" + strings.Repeat("x", i%7)
	}
	g, err := json.Marshal(groups)
	require.NoError(t, err)
	huge := []byte(strings.Replace(string(small), `"username":"alice"`, `"username":"alice","groups":`+string(g), 1))
	for range 3 {
		out, err := e.Validate(t.Context(), huge)
		require.NoError(t, err)
		assert.Contains(t, string(out), `"accepted":true`)
	}
	assert.Equal(t, uint64(3), e.Stats().Recycled)
	assert.Zero(t, e.Stats().Replacements, "retired, not broken")
}
