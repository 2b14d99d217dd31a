package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

// The audit policy is one the API server's own types read strictly, and
// records the audited users' requests only.
func TestAuditFlags(t *testing.T) {
	t.Parallel()
	c := &Cluster{Dir: t.TempDir(), opts: Options{AuditUsers: []string{"watcher"}}}
	flags, err := c.auditFlags()
	require.NoError(t, err)
	require.Equal(t, "--audit-policy-file", flags[0])
	assert.Contains(t, strings.Join(flags, " "), "--audit-log-path "+filepath.Join(c.Dir, auditLogFile))
	data, err := os.ReadFile(flags[1])
	require.NoError(t, err)
	var p auditv1.Policy
	require.NoError(t, yaml.UnmarshalStrict(data, &p))
	assert.Equal(t, "audit.k8s.io/v1", p.APIVersion)
	assert.Equal(t, []auditv1.Stage{auditv1.StageRequestReceived}, p.OmitStages)
	require.Len(t, p.Rules, 2)
	assert.Equal(t, auditv1.LevelMetadata, p.Rules[0].Level)
	assert.Equal(t, []string{"watcher"}, p.Rules[0].Users)
	assert.Equal(t, auditv1.LevelNone, p.Rules[1].Level)

	none := &Cluster{Dir: t.TempDir()}
	flags, err = none.auditFlags()
	require.NoError(t, err)
	assert.Empty(t, flags, "no audited user, no audit log")
}

// AuditEvents reads the API server's JSON lines (audit.k8s.io/v1 Events)
// and keeps one user's.
func TestAuditEvents(t *testing.T) {
	t.Parallel()
	c := &Cluster{Dir: t.TempDir(), opts: Options{AuditUsers: []string{"watcher", "other"}}}
	var lines []string
	for _, e := range []auditv1.Event{
		{Stage: auditv1.StageResponseComplete, Verb: "watch", RequestURI: "/api/v1/configmaps?sendInitialEvents=true&watch=true",
			ResponseStatus: &metav1.Status{Code: 422, Message: "sendInitialEvents is forbidden"}},
		{Stage: auditv1.StageResponseComplete, Verb: "list", RequestURI: "/api/v1/configmaps?limit=500",
			ResponseStatus: &metav1.Status{Code: 200}},
	} {
		e.User.Username = "watcher"
		b, err := json.Marshal(e)
		require.NoError(t, err)
		lines = append(lines, string(b))
	}
	other, err := json.Marshal(auditv1.Event{Verb: "get"})
	require.NoError(t, err)
	lines = append(lines, strings.Replace(string(other), `"user":{}`, `"user":{"username":"other"}`, 1))
	require.NoError(t, os.WriteFile(filepath.Join(c.Dir, auditLogFile), []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	events, err := c.AuditEvents("watcher")
	require.NoError(t, err)
	require.Len(t, events, 2)
	assert.Equal(t, "watch", events[0].Verb)
	assert.Equal(t, 422, events[0].Code())
	assert.Equal(t, "/api/v1/configmaps?limit=500", events[1].RequestURI)
	assert.Equal(t, 200, events[1].Code())
	events, err = c.AuditEvents("other")
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.Equal(t, 0, events[0].Code(), "no response status")

	_, err = c.AuditEvents("admin")
	assert.ErrorContains(t, err, "audit events of admin: not an audited user")
	require.NoError(t, os.WriteFile(filepath.Join(c.Dir, auditLogFile), []byte("{not json\n"), 0o600))
	_, err = c.AuditEvents("watcher")
	assert.ErrorContains(t, err, "read the audit log: line 1")
}
