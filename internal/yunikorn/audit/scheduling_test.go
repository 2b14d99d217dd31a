package audit

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func TestParseScheduling(t *testing.T) {
	for _, raw := range []string{`{}`, `{"scheduling":null}`} {
		sc, err := ParseScheduling([]byte(raw))
		require.NoError(t, err, raw)
		assert.Nil(t, sc, raw)
	}
	sc, err := ParseScheduling([]byte(`{"scheduling":{}}`))
	require.NoError(t, err)
	assert.Equal(t, "yunikorn", sc.SchedulerName)
	assert.True(t, sc.NamespaceAnnotations)
	require.Len(t, sc.Bypass, 1)
	assert.Equal(t, "^kube-system$", sc.Bypass[0].String(), "YuniKorn's default bypass list")
	assert.Empty(t, sc.Process)

	sc, err = ParseScheduling([]byte(`{"scheduling":{"schedulerName":"yk","processNamespaces":"^a{1,2}$, ^b$","bypassNamespaces":[],"namespaceAnnotations":false}}`))
	require.NoError(t, err)
	assert.Equal(t, "yk", sc.SchedulerName)
	assert.False(t, sc.NamespaceAnnotations)
	assert.Empty(t, sc.Bypass, "an empty list bypasses nothing")
	var got []string
	for _, re := range sc.Process {
		got = append(got, re.String())
	}
	assert.Equal(t, []string{"^a{1,2}$", "^b$"}, got, "split as the policy splits, not inside {1,2}")

	for raw, want := range map[string]string{
		`{"scheduling":{"processNamespaces":["(x"]}}`:   `settings.scheduling.processNamespaces[0]: invalid regular expression "(x"`,
		`{"scheduling":{"bypassNamespaces":"[a,b"}}`:    "settings.scheduling.bypassNamespaces: cannot split",
		`{"scheduling":{"namespaceAnnotations":"yes"}}`: "settings.scheduling.namespaceAnnotations: must be true or false",
		`{"scheduling":[]}`:                             "settings.scheduling: must be an object",
	} {
		_, err := ParseScheduling([]byte(raw))
		require.Error(t, err, raw)
		assert.Contains(t, err.Error(), want, raw)
	}
}

// With the scheduling setting, Pods and templates of another scheduler (or
// none) in a namespace it processes are audited: the policy sends such
// Pods to YuniKorn. The namespace lists decide unless the namespace's
// enableYuniKorn annotation does; the scheduler's own Pods are left alone.
func TestRun_scheduling(t *testing.T) {
	ns := func(name string, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	}
	withScheduler := func(p *corev1.Pod, name string) *corev1.Pod {
		p.Spec.SchedulerName = name
		return p
	}
	objs := []runtime.Object{
		ns("team", nil), ns("kube-system", nil), ns("elsewhere", nil),
		ns("opt-in", map[string]string{"yunikorn.apache.org/namespace.enableYuniKorn": "true"}),
		ns("opt-out", map[string]string{"yunikorn.apache.org/namespace.enableYuniKorn": "false"}),
		withScheduler(pod("team", "default", nil, nil, 1), "default-scheduler"),
		withScheduler(pod("team", "unset", nil, nil, 1), ""),
		withScheduler(pod("team", "own", nil, map[string]string{"app": "yunikorn"}, 1), "default-scheduler"),
		withScheduler(pod("team", "valid", ui("ann"), nil, 1), "default-scheduler"),
		withScheduler(pod("kube-system", "dns", nil, nil, 1), "default-scheduler"),
		withScheduler(pod("elsewhere", "p", nil, nil, 1), "default-scheduler"),
		withScheduler(pod("opt-in", "p", nil, nil, 1), "default-scheduler"),
		withScheduler(pod("opt-out", "p", nil, nil, 1), "default-scheduler"),
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "d"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: "default-scheduler"}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "web", UID: "e"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: "default-scheduler"}}}},
	}
	missing := func(r *Report) []string {
		var out []string
		for _, f := range r.Findings {
			if f.Rule == RuleMissing {
				out = append(out, f.Resource.Kind+" "+f.Resource.Namespace+"/"+f.Resource.Name)
			}
		}
		sort.Strings(out)
		return out
	}

	// Off: only Pods that name YuniKorn, and there are none.
	r, err := Run(t.Context(), fake.NewClientset(objs...), Options{})
	require.NoError(t, err)
	assert.Empty(t, r.Findings)
	assert.Equal(t, 0, r.Audited["Pod"])

	sc, err := ParseScheduling([]byte(`{"scheduling":{"processNamespaces":"^team$,^opt-out$,^kube-system$"}}`))
	require.NoError(t, err)
	r, err = Run(t.Context(), fake.NewClientset(objs...), Options{Scheduling: sc})
	require.NoError(t, err)
	assert.Equal(t, []string{"Deployment team/web", "Pod opt-in/p", "Pod team/default", "Pod team/unset"}, missing(r),
		"kube-system bypassed, elsewhere not listed, opt-out annotated false, opt-in annotated true, the scheduler's own Pod left alone")
	assert.Equal(t, 4, r.Audited["Pod"], "team/valid is audited too, and passes")
	assert.Equal(t, 1, r.Passed["team"])

	// Without the annotations, the lists alone decide.
	sc.NamespaceAnnotations = false
	r, err = Run(t.Context(), fake.NewClientset(objs...), Options{Scheduling: sc})
	require.NoError(t, err)
	assert.Equal(t, []string{"Deployment team/web", "Pod opt-out/p", "Pod team/default", "Pod team/unset"}, missing(r))
}
