package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// TestSchedulerUsers_default: without the setting, the service account
// YuniKorn's chart runs the scheduler as, and nothing else.
func TestSchedulerUsers_default(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{`{}`, `null`} {
		s, err := parseSettings(gjson.Parse(doc))
		require.NoError(t, err)
		assert.True(t, matchAny(s.SchedulerUsers, "system:serviceaccount:yunikorn:yunikorn-admin"), doc)
		for _, other := range []string{"system:serviceaccount:yunikorn:yunikorn-admin2", "system:serviceaccount:other:yunikorn-admin", "yunikorn", "alice"} {
			assert.False(t, matchAny(s.SchedulerUsers, other), "%s: %s", doc, other)
		}
	}
}

// TestPlaceholder_originatorUnreadable: when the originator cannot be read
// at all (no access to Pods), the placeholder is an ordinary Pod of the
// scheduler, stamped with its identity as YuniKorn's own admission
// controller does, with a warning saying why; the checks then decide it.
func TestPlaceholder_originatorUnreadable(t *testing.T) {
	prev := hostCaller
	hostCaller = func(_, _, operation string, _ []byte) ([]byte, error) {
		return nil, hostCallError(`pods is forbidden: User "system:serviceaccount:yunikorn-userinfo:yunikorn-userinfo" cannot get resource "pods"`)
	}
	t.Cleanup(func() { hostCaller = prev })

	base, err := os.ReadFile(filepath.Join(fixtures.Dir(), "base", "pod.json"))
	require.NoError(t, err)
	req := string(base)
	for _, e := range []struct {
		path  string
		value any
	}{
		{"userInfo", map[string]any{"username": "system:serviceaccount:yunikorn:yunikorn-admin", "groups": []string{"system:authenticated"}}},
		{"object.metadata.name", "tg-app-workers-0"},
		{"object.metadata.annotations.internal\\.yunikorn\\.apache\\.org/placeholder", "true"},
		{"object.metadata.labels.yunikorn\\.apache\\.org/app-id", "app"},
		{"object.metadata.ownerReferences", []map[string]any{{"apiVersion": "v1", "kind": "Pod", "name": "originator", "uid": "u-1"}}},
	} {
		req, err = sjson.Set(req, e.path, e.value)
		require.NoError(t, err)
	}
	out, err := validate([]byte(`{"request":` + req + `,"settings":{}}`))
	require.NoError(t, err)
	resp := gjson.ParseBytes(out)
	require.True(t, resp.Get("accepted").Bool(), "%s", out)
	assert.Equal(t, []any{"placeholder tg-app-workers-0 not recognised: its originator could not be read (Pod e2e/originator could not be read: " +
		`pods is forbidden: User "system:serviceaccount:yunikorn-userinfo:yunikorn-userinfo" cannot get resource "pods"` +
		"): decided as any Pod of system:serviceaccount:yunikorn:yunikorn-admin"}, resp.Get("warnings").Value())
	mutated := gjson.Get(resp.Get("mutated_object").Raw, "metadata.annotations").Get(gjson.Escape(AnnotationKey)).String()
	assert.Equal(t, `{"user":"system:serviceaccount:yunikorn:yunikorn-admin","groups":["system:authenticated"]}`, mutated)
}
