package peer

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/webhook"
)

// userInfo is the annotation value both write for alice.
const userInfo = `{\"user\":\"alice\",\"groups\":[\"dev\",\"system:authenticated\"]}`

// appID is the application id YuniKorn generates for unlabelled Pods in
// namespace team-a (generateUniqueAppId false).
const appID = "yunikorn-team-a-autogen"

// TestAnswers records what each implementation answers to each fixture,
// exactly: the comparison is only fair where they do the same work, and
// this is where they do not.
func TestAnswers(t *testing.T) {
	fixtures := map[string]fixture{}
	for _, fx := range loadFixtures(t) {
		fixtures[fx.name] = fx
	}
	ours := newOurs(t, quiet)
	yunikorn := newYuniKorn(t, quiet)
	denied := "user alice with groups [dev,system:authenticated] is not allowed to set user annotation"

	tests := []struct {
		name    string
		impl    impl
		fixture string
		// wantPatch is the decoded JSONPatch, "" for none.
		wantPatch string
		// wantMessage is the status message, "" for none.
		wantMessage string
	}{
		{name: "ours pod-small inject", impl: ours, fixture: "pod-small-create-inject",
			wantPatch: `[{"op":"add","path":"/metadata/annotations","value":{"yunikorn.apache.org/user.info":"` + userInfo + `"}}]`},
		{name: "ours pod-large inject", impl: ours, fixture: "pod-large-create-inject",
			wantPatch: `[{"op":"add","path":"/metadata/annotations/yunikorn.apache.org~1user.info","value":"` + userInfo + `"}]`},
		{name: "ours deployment inject", impl: ours, fixture: "deployment-create-inject",
			wantPatch: `[{"op":"add","path":"/spec/template/metadata/annotations","value":{"yunikorn.apache.org/user.info":"` + userInfo + `"}}]`},
		{name: "ours pod-small present", impl: ours, fixture: "pod-small-create-present"},
		{name: "ours pod-large present", impl: ours, fixture: "pod-large-create-present"},
		{name: "ours deployment present", impl: ours, fixture: "deployment-create-present"},
		{name: "ours pod-small unchanged", impl: ours, fixture: "pod-small-update-unchanged"},
		{name: "ours pod-large unchanged", impl: ours, fixture: "pod-large-update-unchanged"},
		{name: "ours deployment unchanged", impl: ours, fixture: "deployment-update-unchanged"},

		// YuniKorn also sends new Pods to its scheduler (schedulerName),
		// labels them with a generated application id, and marks them
		// preemptible; the whole annotation and label maps are replaced.
		{name: "yunikorn pod-small inject", impl: yunikorn, fixture: "pod-small-create-inject",
			wantPatch: `[` +
				`{"op":"add","path":"/metadata/annotations","value":{"yunikorn.apache.org/allow-preemption":"true","yunikorn.apache.org/user.info":"` + userInfo + `"}},` +
				`{"op":"add","path":"/spec/schedulerName","value":"yunikorn"},` +
				`{"op":"add","path":"/metadata/labels","value":{"app":"web","applicationId":"` + appID + `","tier":"frontend","yunikorn.apache.org/app-id":"` + appID + `"}}]`},
		{name: "yunikorn deployment inject", impl: yunikorn, fixture: "deployment-create-inject",
			wantPatch: `[{"op":"add","path":"/spec/template/metadata/annotations","value":{"yunikorn.apache.org/user.info":"` + userInfo + `"}}]`},
		// alice is not a trusted submitter, and YuniKorn does not accept her
		// own value either.
		{name: "yunikorn pod-small present", impl: yunikorn, fixture: "pod-small-create-present", wantMessage: denied},
		{name: "yunikorn pod-large present", impl: yunikorn, fixture: "pod-large-create-present", wantMessage: denied},
		{name: "yunikorn deployment present", impl: yunikorn, fixture: "deployment-create-present", wantMessage: denied},
		// Pod UPDATE: both objects decoded, the annotation compared.
		{name: "yunikorn pod-small unchanged", impl: yunikorn, fixture: "pod-small-update-unchanged"},
		{name: "yunikorn pod-large unchanged", impl: yunikorn, fixture: "pod-large-update-unchanged"},
		// Workload UPDATE: allowed without looking at the objects
		// (CVE-2026-92393 in YuniKorn < 1.10).
		{name: "yunikorn deployment unchanged", impl: yunikorn, fixture: "deployment-update-unchanged"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fx, ok := fixtures[tc.fixture]
			require.True(t, ok, "fixture %s", tc.fixture)
			got := checkAnswer(t, tc.impl, fx)
			if tc.wantPatch == "" {
				assert.Empty(t, got.Patch)
			} else {
				assert.JSONEq(t, tc.wantPatch, string(got.Patch))
			}
			if tc.wantMessage == "" {
				if got.Status != nil {
					assert.Empty(t, got.Status.Message)
				}
			} else {
				require.NotNil(t, got.Status)
				assert.Equal(t, tc.wantMessage, got.Status.Message)
			}
		})
	}
}

// TestYuniKornLargePodPatch checks YuniKorn's patch for the large Pod: the
// same three operations, the annotation operation carrying all 19 existing
// annotations plus its two.
func TestYuniKornLargePodPatch(t *testing.T) {
	var fx fixture
	for _, f := range loadFixtures(t) {
		if f.name == "pod-large-create-inject" {
			fx = f
		}
	}
	got := checkAnswer(t, newYuniKorn(t, quiet), fx)
	patch := string(got.Patch)
	for _, want := range []string{
		`"path":"/metadata/annotations"`,
		`"yunikorn.apache.org/allow-preemption":"true"`,
		`"yunikorn.apache.org/user.info":"` + userInfo + `"`,
		`"example.com/runbook":"https://runbooks.example.com/analytics/pipeline"`,
		`{"op":"add","path":"/spec/schedulerName","value":"yunikorn"}`,
		`"yunikorn.apache.org/app-id":"` + appID + `"`,
	} {
		assert.Contains(t, patch, want)
	}
	assert.Equal(t, 3, strings.Count(patch, `"op":"add"`), "three operations: %s", patch)
}

// TestHostSide_noopAnswersLikeThePolicy: the no-op guest of
// BenchmarkHostSide makes the webhook answer every fixture byte for byte as
// the policy does, so the benchmark measures the host on the same work.
func TestHostSide_noopAnswersLikeThePolicy(t *testing.T) {
	ours := newOurs(t, quiet)
	for _, fx := range loadFixtures(t) {
		noop := newOursWith(t, quiet, func(p webhook.Policy) webhook.Policy { return &replay{policy: p} })
		want := admit(ours.handler, fx.body).Body.String()
		for range 2 { // the recording call, then a replayed one
			assert.Equal(t, want, admit(noop.handler, fx.body).Body.String(), fx.name)
		}
	}
}
