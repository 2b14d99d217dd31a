package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/syncbuf"
)

// monitorPolicy answers by the request's uid: refusals of several rules,
// a refusal that carries a mutation, an accepted mutation, a failure.
func monitorPolicy(_ context.Context, payload []byte) ([]byte, error) {
	const claimed = `,"claimed":"{\"user\":\"bob\"}"`
	mutated := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"a":"b"}}}`
	switch {
	case bytes.Contains(payload, []byte(`"uid":"forged"`)):
		return []byte(`{"accepted":false,"message":"user alice is not allowed","code":403,"warnings":["w1"],` +
			`"audit_annotations":{"rule":"create: present, submitter not allowed"` + claimed + `}}`), nil
	case bytes.Contains(payload, []byte(`"uid":"queue"`)):
		return []byte(`{"accepted":false,"message":"queue check: no","code":403,` +
			`"audit_annotations":{"rule":"create: absent, inject; queue root.x; queue check refused"}}`), nil
	case bytes.Contains(payload, []byte(`"uid":"refuse-mutate"`)):
		return []byte(`{"accepted":false,"message":"no","mutated_object":` + mutated +
			`,"audit_annotations":{"rule":"anything; the attacker's ` + strings.Repeat("x", 300) + `"}}`), nil
	case bytes.Contains(payload, []byte(`"uid":"no-rule"`)):
		return []byte(`{"accepted":false,"message":"no"}`), nil
	case bytes.Contains(payload, []byte(`"uid":"mutate"`)):
		return []byte(`{"accepted":true,"mutated_object":` + mutated + `,"audit_annotations":{"rule":"create: absent, inject","user":"x"}}`), nil
	case bytes.Contains(payload, []byte(`"uid":"fail"`)):
		return nil, errors.New("guest trapped")
	}
	return []byte(`{"accepted":true,"audit_annotations":{"rule":"pass-through: kind"}}`), nil
}

func TestHandler_monitor(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg, nil, 1, "test")
	require.NoError(t, err)
	var logs syncbuf.Buffer
	h := NewHandler(Options{Metrics: metrics, Monitor: true, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	h.Start(policyFunc(monitorPolicy), emptySettings)
	srv := newTestServer(t, h)

	answer := func(path, uid string) review {
		status, _, body := post(t, srv.URL+path, "application/json", reviewBody(uid))
		require.Equal(t, 200, status)
		r := decodeReview(t, body)
		require.Equal(t, uid, r.Response.UID)
		return r
	}

	r := answer(PathMutate, "forged")
	assert.True(t, r.Response.Allowed, "the refusal is admitted")
	assert.Nil(t, r.Response.Status)
	assert.Empty(t, r.Response.Patch)
	assert.Equal(t, []string{"w1", "monitor mode: would be refused: user alice is not allowed (code 403)"}, r.Response.Warnings)
	assert.Equal(t, map[string]string{"rule": "create: present, submitter not allowed", "claimed": `{"user":"bob"}`,
		"monitor": "would be refused"}, r.Response.AuditAnnotations)

	r = answer(PathMutate, "refuse-mutate")
	assert.True(t, r.Response.Allowed)
	assert.Empty(t, r.Response.Patch, "a refused request's mutation is not applied")
	assert.Nil(t, r.Response.PatchType)

	r = answer(PathMutate, "mutate")
	assert.True(t, r.Response.Allowed)
	require.NotNil(t, r.Response.Patch)
	patch, err := base64.StdEncoding.DecodeString(*r.Response.Patch)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"op":"add","path":"/metadata/annotations","value":{"a":"b"}}]`, string(patch), "an accepted mutation is applied")
	assert.Empty(t, r.Response.Warnings)
	assert.Equal(t, map[string]string{"rule": "create: absent, inject", "user": "x"}, r.Response.AuditAnnotations)

	answer(PathMutate, "queue")
	answer(PathMutate, "no-rule")
	r = answer(PathMutate, "fail")
	assert.True(t, r.Response.Allowed, "a failed evaluation is admitted too")
	assert.Equal(t, []string{"monitor mode: would be refused: guest trapped (code 500)"}, r.Response.Warnings)
	// At the validating stage, a change the policy would make is refused
	// by the host: admitted in monitor mode, without the change.
	r = answer(PathValidate, "mutate")
	assert.True(t, r.Response.Allowed)
	assert.Empty(t, r.Response.Patch)
	assert.Equal(t, "validating stage: change refused; create: absent, inject", r.Response.AuditAnnotations["rule"])
	answer(PathMutate, "pass")

	for _, c := range []struct {
		stage, rule string
		want        float64
	}{
		{"mutate", "create: present, submitter not allowed", 1},
		{"mutate", "queue check refused", 1},
		{"mutate", "other", 1},
		{"mutate", "unknown", 1},
		{"mutate", RuleEvaluationFailed, 1},
		{"validate", RuleValidatingStage, 1},
	} {
		assert.Equal(t, c.want, testutil.ToFloat64(metrics.wouldRefuse.WithLabelValues(c.stage, c.rule)), "%s %s", c.stage, c.rule)
	}
	assert.Equal(t, 6, testutil.CollectAndCount(metrics.wouldRefuse), "accepted requests are not counted; labels stay bounded")
	assert.Equal(t, 4.0, testutil.ToFloat64(metrics.admissions.WithLabelValues("Pod", "CREATE", OutcomeDenied, stageMutate)),
		"admissions_total keeps the policy's verdict")
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.admissions.WithLabelValues("Pod", "CREATE", OutcomeDenied, stageValidate)),
		"the twin's refusal, under its own stage")

	lines := logLines(t, logs.String(), "monitor mode: would be refused")
	require.Len(t, lines, 6)
	assert.Equal(t, "WARN", lines[0]["level"])
	assert.Equal(t, "forged", lines[0]["uid"])
	assert.Equal(t, "alice", lines[0]["user"], "the submitter")
	assert.Equal(t, `{"user":"bob"}`, lines[0]["claimed"])
	assert.Equal(t, "create: present, submitter not allowed", lines[0]["rule"])
	assert.Equal(t, "user alice is not allowed", lines[0]["message"])
	assert.Equal(t, RuleEvaluationFailed, lines[4]["rule"])
}

// Without monitor mode, the answers are the policy's, audit annotations
// included, on every decision.
func TestHandler_auditAnnotationsForwarded(t *testing.T) {
	t.Parallel()
	h := NewHandler(Options{})
	h.Start(policyFunc(monitorPolicy), emptySettings)
	srv := newTestServer(t, h)
	for uid, want := range map[string]map[string]string{
		"forged": {"rule": "create: present, submitter not allowed", "claimed": `{"user":"bob"}`},
		"mutate": {"rule": "create: absent, inject", "user": "x"},
		"pass":   {"rule": "pass-through: kind"},
	} {
		_, _, body := post(t, srv.URL+PathMutate, "application/json", reviewBody(uid))
		r := decodeReview(t, body)
		assert.Equal(t, want, r.Response.AuditAnnotations, uid)
		assert.Equal(t, uid != "forged", r.Response.Allowed, uid)
		assert.NotContains(t, strings.Join(r.Response.Warnings, ";"), "monitor mode")
	}
}

func TestRuleLabel(t *testing.T) {
	t.Parallel()
	for rule, want := range map[string]string{
		"":                                       "unknown",
		"update: changed":                        "update: changed",
		"update: added, not an adopter":          "update: added, not an adopter",
		"update: changed, re-adoption":           "update: changed, re-adoption",
		"create: present, provenance not proven": "create: present, provenance not proven",
		"create: present, allowed submitter; queue root.a.b; queue check refused": "queue check refused",
		"create: absent, inject; queue root.x; application ownership refused":     "application ownership refused",
		"validate-only: create: absent, inject; queue root.evil-" + "x":           "validate-only",
		"validating stage: change refused; create: absent, inject":                RuleValidatingStage,
		"create: absent, inject; queue root.x; queue check warned":                "other",
		"create: absent, inject; queue update: changed refused":                   "other",
		"update: changed; queue check refused; " + strings.Repeat("y", 100):       "other",
		"malformed": "malformed",
		"Malformed": "other",
		"an attacker's rule " + strings.Repeat("z", 1000): "other",
	} {
		assert.Equal(t, want, RuleLabel(rule), rule)
	}
}

// logLines decodes the JSON log lines in text whose message is msg.
func logLines(t *testing.T, text, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}
