package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// finished marks p Succeeded, its container having finished at.
func finished(p *corev1.Pod, at time.Time) *corev1.Pod {
	p.Status.Phase = corev1.PodSucceeded
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(at)}}}}
	return p
}

func bound(p *corev1.Pod) *corev1.Pod {
	p.Spec.NodeName = "node-1"
	p.Status.Phase = corev1.PodRunning
	return p
}

// The cases of application ownership the policy refuses at admission,
// as audit finds them among the Pods that already exist: a bound Pod
// relabelled (label or annotation) into another user's application, a
// per-Pod ID (<prefix>-<uid>, or with unique IDs <ns>-<uid>) and a
// generated ID cut at 63 bytes written by another user, a Pod joining an
// application whose Pods finished within completingTimeout; and what is
// no finding: a gated squatter, an application whose Pods finished
// longer ago.
func TestRun_appOwnershipCases(t *testing.T) {
	now := t0.Add(time.Hour)
	long := strings.Repeat("l", 58) + "-long" // 63 characters
	cutID := ("yunikorn-" + long + "-autogen")[:63]
	cases := []struct {
		name   string
		unique bool
		pods   []*corev1.Pod
		want   map[string]string // findings: object -> rules
		app    string            // the shared application
	}{
		{name: "bound relabel, label", pods: []*corev1.Pod{
			bound(pod("team-a", "a1", ui("alice"), map[string]string{"applicationId": "etl"}, 1)),
			bound(pod("team-b", "b1", ui("bob"), map[string]string{"applicationId": "etl"}, 2)),
		}, want: map[string]string{"Pod team-b/b1": RuleSharedAppID + ";"}, app: "etl"},
		{name: "bound relabel, annotation", pods: []*corev1.Pod{
			bound(pod("team-a", "a1", ui("alice"), map[string]string{"applicationId": "etl"}, 1)),
			bound(pod("team-b", "b1", map[string]string{AnnotationKey: `{"user":"bob"}`, "yunikorn.apache.org/app-id": "etl"},
				map[string]string{"applicationId": "bobs"}, 2)),
		}, want: map[string]string{"Pod team-b/b1": RuleSharedAppID + ";"}, app: "etl"},
		{name: "per-Pod ID of a -uniqueautogen Pod", pods: []*corev1.Pod{
			pod("team-a", "a1", ui("alice"), map[string]string{"applicationId": "job-uniqueautogen"}, 1),
			pod("team-b", "b1", ui("bob"), map[string]string{"applicationId": "job-team-a-a1"}, 2),
		}, want: map[string]string{"Pod team-b/b1": RuleSharedAppID + ";"}, app: "job-team-a-a1"},
		{name: "per-Pod generated ID", unique: true, pods: []*corev1.Pod{
			pod("team-a", "a1", ui("alice"), nil, 1),
			pod("team-b", "b1", ui("bob"), map[string]string{"applicationId": "team-a-team-a-a1"}, 2),
			pod("team-a", "a2", ui("carol"), nil, 3), // an application of its own
		}, want: map[string]string{"Pod team-b/b1": RuleSharedAppID + ";"}, app: "team-a-team-a-a1"},
		{name: "cut generated ID", pods: []*corev1.Pod{
			pod(long, "a1", ui("alice"), nil, 1),
			pod("team-b", "b1", ui("bob"), map[string]string{"applicationId": cutID}, 2),
		}, want: map[string]string{"Pod team-b/b1": RuleSharedAppID + ";"}, app: cutID},
		{name: "gated squatter owns nothing", pods: []*corev1.Pod{
			gated(pod("team-b", "b1", ui("mallory"), map[string]string{"applicationId": "yunikorn-team-a-autogen"}, 1)),
			pod("team-a", "a1", ui("alice"), nil, 2),
		}, want: map[string]string{}},
		{name: "finished within completingTimeout", pods: []*corev1.Pod{
			finished(pod("team-a", "a1", ui("alice"), map[string]string{"applicationId": "etl"}, 1), now.Add(-10*time.Second)),
			pod("team-b", "b1", ui("bob"), map[string]string{"applicationId": "etl"}, 2),
		}, want: map[string]string{"Pod team-b/b1": RuleSharedAppID + ";"}, app: "etl"},
		{name: "finished without a finish time", pods: []*corev1.Pod{
			func() *corev1.Pod {
				p := pod("team-a", "a1", ui("alice"), map[string]string{"applicationId": "etl"}, 1)
				p.Status.Phase = corev1.PodFailed
				return p
			}(),
			pod("team-b", "b1", ui("bob"), map[string]string{"applicationId": "etl"}, 2),
		}, want: map[string]string{"Pod team-b/b1": RuleSharedAppID + ";"}, app: "etl"},
		{name: "finished longer ago", pods: []*corev1.Pod{
			finished(pod("team-a", "a1", ui("alice"), map[string]string{"applicationId": "etl"}, 1), now.Add(-31*time.Second)),
			pod("team-b", "b1", ui("bob"), map[string]string{"applicationId": "etl"}, 2),
		}, want: map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := fake.NewClientset()
			for _, p := range c.pods {
				_, err := cs.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			r, err := Run(t.Context(), cs, Options{UniqueAppIDs: c.unique, Now: func() time.Time { return now }})
			require.NoError(t, err)
			assert.Equal(t, c.want, rule(r))
			for _, f := range r.Findings {
				assert.Equal(t, c.app, f.AppID)
			}
		})
	}
}

// CompletingTimeout: the window is the setting's, and a negative one
// counts no finished Pod.
func TestRun_completingTimeout(t *testing.T) {
	now := t0.Add(time.Hour)
	pods := func() *fake.Clientset {
		return fake.NewClientset(
			finished(pod("team-a", "a1", ui("alice"), map[string]string{"applicationId": "etl"}, 1), now.Add(-40*time.Second)),
			pod("team-b", "b1", ui("bob"), map[string]string{"applicationId": "etl"}, 2))
	}
	for _, c := range []struct {
		timeout time.Duration
		shared  bool
	}{{0, false}, {time.Minute, true}, {-1, false}, {40 * time.Second, false}, {41 * time.Second, true}} {
		r, err := Run(t.Context(), pods(), Options{CompletingTimeout: c.timeout, Now: func() time.Time { return now }})
		require.NoError(t, err)
		assert.Equal(t, c.shared, len(r.Findings) == 1, "completingTimeout %s: %v", c.timeout, rule(r))
	}
}
