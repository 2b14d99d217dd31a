package webhook

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/syncbuf"
)

// stagePolicy annotates every Pod (a patch) and refuses the uid "refuse".
func stagePolicy(_ context.Context, payload []byte) ([]byte, error) {
	if bytes.Contains(payload, []byte(`"uid":"refuse"`)) {
		return []byte(`{"accepted":false,"message":"no","code":403,"audit_annotations":{"rule":"create: present, submitter not allowed"}}`), nil
	}
	return []byte(`{"accepted":true,"mutated_object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"a":"b"}}}}`), nil
}

// TestMetrics_admissionsByStage: the same review answered by the mutating
// webhook and by its validating twin is counted once under each stage, so
// the two are never added up without saying which.
func TestMetrics_admissionsByStage(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg, nil, 1, "test")
	require.NoError(t, err)
	h := NewHandler(Options{Metrics: metrics})
	h.Start(policyFunc(stagePolicy), emptySettings)
	url := newTestServer(t, h).URL

	for _, path := range []string{PathMutate, PathValidate} {
		status, _, _ := post(t, url+path, "application/json", reviewBody("p1"))
		require.Equal(t, 200, status)
	}
	status, _, _ := post(t, url+PathMutate, "application/json", reviewBody("refuse"))
	require.Equal(t, 200, status)

	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.admissions.WithLabelValues("Pod", "CREATE", OutcomeMutated, stageMutate)))
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.admissions.WithLabelValues("Pod", "CREATE", OutcomeDenied, stageValidate)),
		"the twin refuses a change")
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.admissions.WithLabelValues("Pod", "CREATE", OutcomeDenied, stageMutate)))
	assert.Equal(t, 3, testutil.CollectAndCount(metrics.admissions), "one series per stage and outcome, nothing else")

	// A request refused before evaluation is not an admission at any stage.
	status, _, _ = post(t, url+PathValidate, "text/plain", "x")
	require.Equal(t, 415, status)
	assert.Equal(t, 3, testutil.CollectAndCount(metrics.admissions))
}

// TestLog_refusalsAreWarnings: with the log at warn, a refusal (by the
// policy or by the twin), a failed evaluation and a refused request are
// logged and an admitted request is not; in monitor mode the refusal's
// warning is its "would be refused" line, not a second one.
func TestLog_refusalsAreWarnings(t *testing.T) {
	t.Parallel()
	for _, monitor := range []bool{false, true} {
		var logs syncbuf.Buffer
		h := NewHandler(Options{Monitor: monitor,
			Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		h.Start(policyFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
			if bytes.Contains(payload, []byte(`"uid":"fail"`)) {
				return nil, context.DeadlineExceeded
			}
			return stagePolicy(ctx, payload)
		}), emptySettings)
		url := newTestServer(t, h).URL
		for _, c := range []struct{ path, uid string }{
			{PathMutate, "p1"}, {PathMutate, "refuse"}, {PathValidate, "p2"}, {PathMutate, "fail"},
		} {
			status, _, _ := post(t, url+c.path, "application/json", reviewBody(c.uid))
			require.Equal(t, 200, status)
		}
		status, _, _ := post(t, url+PathMutate, "text/plain", "x")
		require.Equal(t, 415, status)

		admissions := logLines(t, logs.String(), "admission")
		would := logLines(t, logs.String(), "monitor mode: would be refused")
		var uids []any
		for _, l := range admissions {
			assert.Equal(t, "WARN", l["level"])
			uids = append(uids, l["uid"])
		}
		if monitor {
			assert.Equal(t, []any{"fail"}, uids, "monitor: only the failure is a warning admission line")
			require.Len(t, would, 3, "refuse, p2 (twin) and fail would be refused")
			assert.Equal(t, "WARN", would[0]["level"])
		} else {
			assert.Equal(t, []any{"refuse", "p2", "fail"}, uids, "refusals and failures, not the admitted p1")
			assert.Equal(t, "validate", admissions[1]["stage"])
			assert.Equal(t, "denied", admissions[0]["decision"])
			assert.Empty(t, would)
		}
		assert.Len(t, logLines(t, logs.String(), "admission request refused"), 1, "the unreadable request")
	}
}
