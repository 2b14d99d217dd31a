package main

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// auditAnnotations evaluates payload and returns the response's
// audit_annotations.
func auditAnnotations(t *testing.T, payload string) (map[string]string, gjson.Result) {
	t.Helper()
	out, err := validate([]byte(payload))
	require.NoError(t, err)
	var got struct {
		Audit map[string]string `json:"audit_annotations"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	return got.Audit, gjson.ParseBytes(out)
}

// Every answer, whatever the case, names its rule; what it records is the
// annotation the object ends up with; every value is bounded.
func TestAuditAnnotations_fixtures(t *testing.T) {
	answerFromFixtureCluster(t)
	cases, err := fixtures.Load()
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			audit, _ := auditAnnotations(t, string(c.Payload()))
			assert.NotEmpty(t, audit[auditRule], "every decision names its rule")
			for k, v := range audit {
				assert.Contains(t, []string{auditRule, auditUser, auditClaimed}, k)
				assert.LessOrEqual(t, len(v), maxAuditValue+32, "%s is bounded", k)
			}
			if c.Expect.Annotation != nil && len(*c.Expect.Annotation) <= maxAuditValue {
				assert.Equal(t, *c.Expect.Annotation, audit[auditUser], "the recorded identity is the value written")
			}
			if !c.Expect.Allowed {
				assert.Empty(t, audit[auditUser], "a refusal records nothing")
			}
			switch rule := audit[auditRule]; {
			case strings.HasPrefix(rule, "create: present"), strings.HasPrefix(rule, "update: changed"),
				strings.HasPrefix(rule, "update: new template, other value"):
				assert.Contains(t, audit, auditClaimed, "a judged value is reported as claimed")
			case strings.HasPrefix(rule, "create: absent"), strings.HasPrefix(rule, "pass-through"):
				assert.NotContains(t, audit, auditClaimed, "nothing was claimed")
			}
		})
	}
}

func podPayload(settings, op, userInfo, annotation, oldAnnotation string) string {
	pod := func(a string) string {
		if a == "" {
			return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}}`
		}
		v, _ := json.Marshal(a)
		return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"` + AnnotationKey + `":` + string(v) + `}},"spec":{}}`
	}
	req := `{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"` + op + `","namespace":"ns","userInfo":` + userInfo +
		`,"object":` + pod(annotation)
	if op == "UPDATE" {
		req += `,"oldObject":` + pod(oldAnnotation)
	}
	return `{"settings":` + settings + `,"request":` + req + `}}`
}

func TestAuditAnnotations_claimed(t *testing.T) {
	alice := `{"username":"alice","groups":["dev"]}`
	forged := `{"user":"bob"}`

	audit, resp := auditAnnotations(t, podPayload(`{}`, "CREATE", alice, forged, ""))
	assert.False(t, resp.Get("accepted").Bool())
	assert.Equal(t, map[string]string{auditRule: "create: present, submitter not allowed", auditClaimed: forged}, audit)

	audit, _ = auditAnnotations(t, podPayload(`{"externalUsers":["^alice$"]}`, "CREATE", alice, forged, ""))
	assert.Equal(t, map[string]string{auditRule: "create: present, allowed submitter", auditUser: forged, auditClaimed: forged}, audit)

	audit, _ = auditAnnotations(t, podPayload(`{}`, "CREATE", alice, "", ""))
	assert.Equal(t, map[string]string{auditRule: "create: absent, inject", auditUser: `{"user":"alice","groups":["dev"]}`}, audit)

	audit, _ = auditAnnotations(t, podPayload(`{}`, "UPDATE", alice, forged, `{"user":"alice"}`))
	assert.Equal(t, map[string]string{auditRule: "update: changed", auditClaimed: forged}, audit)

	audit, _ = auditAnnotations(t, podPayload(`{}`, "UPDATE", alice, "", `{"user":"alice"}`))
	assert.Equal(t, map[string]string{auditRule: "update: removed, restore", auditUser: `{"user":"alice"}`}, audit)

	audit, _ = auditAnnotations(t, podPayload(`{"validateOnly":true}`, "CREATE", alice, "", ""))
	assert.Equal(t, map[string]string{auditRule: "validate-only: create: absent, inject"}, audit)
}

// A claim of any size yields a bounded annotation, cut on a character
// boundary and saying how long the value was.
func TestAuditAnnotations_bounded(t *testing.T) {
	huge := `{"user":"` + strings.Repeat("é", 4000) + `"}`
	audit, _ := auditAnnotations(t, podPayload(`{}`, "CREATE", `{"username":"alice"}`, huge, ""))
	got := audit[auditClaimed]
	assert.LessOrEqual(t, len(got), maxAuditValue+32)
	assert.True(t, strings.HasSuffix(got, "... (8011 bytes)"), got)
	assert.True(t, strings.HasPrefix(huge, strings.TrimSuffix(got, "... (8011 bytes)")))
	assert.True(t, utf8.ValidString(got), "cut on a character boundary")
}
