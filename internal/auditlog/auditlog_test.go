package auditlog

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readFixture(t *testing.T, opts Options) *Result {
	t.Helper()
	f, err := os.Open("testdata/audit.log")
	require.NoError(t, err)
	defer f.Close()
	res, err := Read(t.Context(), f, opts)
	require.NoError(t, err)
	return res
}

// TestRead: the fixture is events as kube-apiserver writes them with
// --audit-log-format=json (stages, authorization, mutation and Pod
// Security annotations beside the webhook's): the would-be refusals are
// found, one per request, oldest first, with the policy's rule and claim.
func TestRead(t *testing.T) {
	t.Parallel()
	res := readFixture(t, Options{})
	assert.Equal(t, 6, res.Lines)
	assert.Equal(t, 5, res.Events, "the first line, and the lines that mention the annotation's value")
	require.Len(t, res.Admissions, 3)

	conflict, forged, job := res.Admissions[0], res.Admissions[1], res.Admissions[2]
	assert.Equal(t, Admission{
		Source: SourceMonitor, AuditID: "3a4b5c6d-0000-4000-8000-000000000004", Time: time.Date(2026, 11, 27, 9, 5, 0, 0, time.UTC),
		Verb: "patch", Resource: "pods", Namespace: "team-b", Name: "web-1", User: "mallory",
		Groups: []string{"system:authenticated"}, UserAgent: "kubectl/v1.37.1",
		Webhook: "workloads.user-info.yunikorn.apache.org", Rule: "update: user.info changed", Code: 409,
	}, conflict)
	assert.False(t, conflict.Persisted(), "the update failed later")

	assert.Equal(t, "0b0e4a2c-5a43-4a39-9d52-0c0a4b8e1f01", forged.AuditID)
	assert.Equal(t, "alice-as-carol", forged.Name, "the name of the last stage, with the answer")
	assert.Equal(t, "create: present, submitter not allowed", forged.Rule)
	assert.Equal(t, `{"user":"carol","groups":["analysts"]}`, forged.Claimed)
	assert.Equal(t, 201, forged.Code)
	assert.True(t, forged.Persisted())

	assert.Equal(t, "jobs.batch", job.Resource)
	assert.Empty(t, job.Name, "generateName: no name yet")
	assert.Equal(t, "etl-", job.GenerateName, "from the request object")
	assert.Equal(t, "system:serviceaccount:spark:livy", job.User)
	assert.Equal(t, "bob", job.ImpersonatedUser)
	assert.Equal(t, "workloads.validate.user-info.yunikorn.apache.org", job.Webhook)
	assert.True(t, job.DryRun)
	assert.False(t, job.Persisted())
}

func TestRead_filters(t *testing.T) {
	t.Parallel()
	res := readFixture(t, Options{Namespace: "team-a"})
	require.Len(t, res.Admissions, 1)
	assert.Equal(t, "alice-as-carol", res.Admissions[0].Name)

	res = readFixture(t, Options{Webhook: "workloads.validate.user-info.yunikorn.apache.org"})
	require.Len(t, res.Admissions, 1)
	assert.Equal(t, "jobs.batch", res.Admissions[0].Resource)

	res = readFixture(t, Options{Webhook: "other-webhook.example.com"})
	assert.Empty(t, res.Admissions, "its monitor annotation is not a would-be refusal")
}

func TestWriteTable(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	require.NoError(t, readFixture(t, Options{}).WriteTable(&b))
	assert.Equal(t, `TIME                  VERB              RESOURCE    NAMESPACE  NAME            USER                                     CODE  RULE
2026-11-27T09:05:00Z  patch             pods        team-b     web-1           mallory                                  409   update: user.info changed
2026-11-27T09:14:02Z  create            pods        team-a     alice-as-carol  alice                                    201   create: present, submitter not allowed
2026-11-27T09:20:00Z  create (dry run)  jobs.batch  team-b     etl-*           system:serviceaccount:spark:livy as bob  201   create: present, submitter not allowed
`, b.String())
}

// Bad input names the line and what is wrong with it.
func TestRead_badInput(t *testing.T) {
	t.Parallel()
	good := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a","stage":"ResponseComplete"}`
	for _, tc := range []struct{ name, log, want string }{
		{"not JSON", "level=info msg=started\n", "line 1: not an audit event (audit.k8s.io/v1 Event JSON, --audit-log-format=json)"},
		{"legacy format", good + "\n" + `2026-11-27T09:14:02Z AUDIT: id="x" ip="10.0.0.7" method="create" would be refused` + "\n", "line 2: not an audit event"},
		{"another kind", `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}` + "\n", `line 1: kind "EventList", apiVersion "audit.k8s.io/v1": want an audit.k8s.io/v1 Event`},
		{"v1beta1", `{"kind":"Event","apiVersion":"audit.k8s.io/v1beta1"}`, `line 1: kind "Event", apiVersion "audit.k8s.io/v1beta1"`},
		{"wrong type", good + "\n\n" + `{"kind":"Event","apiVersion":"audit.k8s.io/v1","user":"alice","annotations":{"w/monitor":"would be refused"}}`, "line 3: not an audit event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(t.Context(), strings.NewReader(tc.log), Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	res, err := Read(t.Context(), strings.NewReader(""), Options{})
	require.NoError(t, err)
	assert.Zero(t, res.Lines, "an empty log is no error: nothing was recorded")
}

// A line without the newline at the end (a log being written) is read.
func TestRead_lastLineUnterminated(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/audit.log")
	require.NoError(t, err)
	res, err := Read(t.Context(), bytes.NewReader(bytes.TrimRight(data, "\n")), Options{})
	require.NoError(t, err)
	assert.Len(t, res.Admissions, 3)
}

// monitorEvent is one monitor-mode audit event as the API server writes
// it, for the stage, the time it received the request, the request URI
// and the object's name.
func monitorEvent(id, stage, received, uri, name string, code int) string {
	return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":%q,"stage":%q,`+
		`"requestURI":%q,"verb":"create","user":{"username":"bob","groups":["ops"]},`+
		`"objectRef":{"resource":"pods","namespace":"team-a","name":%q,"apiVersion":"v1"},"responseStatus":{"code":%d},`+
		`"requestReceivedTimestamp":%q,"annotations":{"w/monitor":"would be refused","w/rule":"create: present, submitter not allowed"}}`,
		id, stage, uri, name, code, received)
}

// A client chooses the audit ID (the Audit-ID header): a persisted
// forgery followed by a dry run sent with the same ID is still listed.
// Only the stages of one request, which share the time the API server
// received it, fold into one row.
func TestRead_clientChosenAuditID(t *testing.T) {
	t.Parallel()
	log := strings.Join([]string{
		monitorEvent("same", "ResponseStarted", "2026-11-27T09:00:00.000001Z", "/api/v1/namespaces/team-a/pods", "forged", 0),
		monitorEvent("same", "ResponseComplete", "2026-11-27T09:00:00.000001Z", "/api/v1/namespaces/team-a/pods", "forged", 201),
		monitorEvent("same", "ResponseComplete", "2026-11-27T09:00:05.000001Z", "/api/v1/namespaces/team-a/pods?dryRun=All", "decoy", 201),
		monitorEvent("same", "ResponseComplete", "2026-11-27T09:00:05.000001Z", "/api/v1/namespaces/team-a/pods?dryRun=All", "decoy-2", 201),
	}, "\n")
	res, err := Read(t.Context(), strings.NewReader(log), Options{})
	require.NoError(t, err)
	require.Len(t, res.Admissions, 3, "%+v", res.Admissions)
	assert.Equal(t, "forged", res.Admissions[0].Name)
	assert.True(t, res.Admissions[0].Persisted(), "the answer of its final stage")
	assert.Equal(t, "decoy", res.Admissions[1].Name, "a final stage is never replaced, even at the same time")
	assert.Equal(t, "decoy-2", res.Admissions[2].Name)
}

// Names come from clients: the table escapes every control and format
// character, so a name cannot move the cursor or erase the rows above.
func TestWriteTable_escapesControlCharacters(t *testing.T) {
	t.Parallel()
	res := &Result{Admissions: []Admission{{
		Time: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC), Verb: "create", Resource: "pods", Namespace: "team-a",
		Name: "x\x1b[1A\x1b[2K\r\tok\u202e\\", User: "bob\n", Code: 403, Rule: "r\x00\xff",
	}}}
	var b bytes.Buffer
	require.NoError(t, res.WriteTable(&b))
	out := b.String()
	assert.Contains(t, out, `x\x1b[1A\x1b[2K\r\tok\u202e\\`)
	assert.Contains(t, out, `bob\n`)
	assert.Contains(t, out, `r\x00\xff`)
	for _, r := range out {
		if r != '\n' && r != ' ' {
			assert.False(t, unicode.IsControl(r) || unicode.Is(unicode.Cf, r), "raw %U in %q", r, out)
		}
	}
	assert.Equal(t, 2, strings.Count(out, "\n"), "one header and one row")
}
