package audit

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// listedIn answers Pod lists with pods in the given order, page by page
// (the continue token is the index of the next Pod).
func listedIn(pods []*corev1.Pod) *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o := a.(k8stesting.ListActionImpl).ListOptions
		from := 0
		if o.Continue != "" {
			from, _ = strconv.Atoi(o.Continue)
		}
		to := min(len(pods), from+int(o.Limit))
		l := &corev1.PodList{}
		for _, p := range pods[from:to] {
			l.Items = append(l.Items, *p)
		}
		if to < len(pods) {
			l.Continue = strconv.Itoa(to)
		}
		return true, l, nil
	})
	return cs
}

// The same Pods, listed in different orders and pages, with creation
// times that tie, give the same report: the same owner of every shared
// application, the same findings, users, namespaces and reports.
func TestRun_deterministic(t *testing.T) {
	var pods []*corev1.Pod
	app := func(id string) map[string]string { return map[string]string{"applicationId": id} }
	// "tie": ten users, each with Pods in six namespaces, all created in
	// the same second: the owner is the user of the Pod first by
	// namespace, name and UID.
	for u := range 10 {
		for n := range 6 {
			pods = append(pods, pod(fmt.Sprintf("ns%d", n), fmt.Sprintf("p-%d", u), ui(fmt.Sprintf("user%d", 9-u)), app("tie"), 0))
		}
	}
	// "one": two users in one namespace, same second, same name prefix.
	pods = append(pods, pod("solo", "b", ui("zed"), app("one"), 3), pod("solo", "a", ui("amy"), app("one"), 3))
	// Objects with several findings each, and ones with none.
	pods = append(pods, pod("solo", "bad", map[string]string{AnnotationKey: "{"}, nil, 3), pod("solo", "none", nil, nil, 3),
		pod("solo", "ok", ui("amy"), nil, 3))
	// Same name and namespace, another UID (a Pod recreated between pages).
	twin := pod("solo", "a", ui("bob"), app("one"), 3)
	twin.UID = "solo-a-2"
	pods = append(pods, twin)

	report := func(order []*corev1.Pod, pageSize int64) string {
		t.Helper()
		r, err := Run(t.Context(), listedIn(order), Options{PageSize: pageSize})
		require.NoError(t, err)
		out := map[string]any{"report": r}
		for _, api := range []ReportAPI{OpenReports, WGPolicy} {
			out[api.Name] = r.PolicyReports(api, t0)
			out[api.Name+"-cluster"] = r.ClusterPolicyReport(api, t0)
		}
		b, err := json.MarshalIndent(out, "", " ")
		require.NoError(t, err)
		return string(b)
	}
	want := report(pods, 500)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 8 {
		order := append([]*corev1.Pod(nil), pods...)
		if i == 0 {
			for l, r := 0, len(order)-1; l < r; l, r = l+1, r-1 {
				order[l], order[r] = order[r], order[l]
			}
		} else {
			rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
		require.Equal(t, want, report(order, int64(1+i*7)), "order %d", i)
	}

	r, err := Run(t.Context(), listedIn(pods), Options{})
	require.NoError(t, err)
	require.Len(t, r.ClusterFindings, 1)
	f := r.ClusterFindings[0]
	assert.Equal(t, "user9", f.Users[0].User, "owner: the user of ns0/p-0")
	assert.Equal(t, Resource{APIVersion: "v1", Kind: "Pod", Namespace: "ns0", Name: "p-0", UID: "ns0-p-0"}, f.Users[0].Oldest)
	assert.Equal(t, []string{"ns0", "ns1", "ns2", "ns3"}, f.Users[0].Namespaces)
	assert.True(t, f.Users[0].MoreNamespaces)
	assert.Len(t, f.Users, maxUsersPerApp)
	assert.Equal(t, 2, f.MoreUsers)
	shared := map[string]string{}
	for _, x := range r.Findings {
		if x.Rule == RuleSharedAppID {
			shared[x.AppID+" "+x.User] = x.Resource.Namespace + "/" + x.Resource.Name + "/" + string(x.Resource.UID)
		}
	}
	assert.Len(t, shared, 9+2, "every user but the owner of tie (all ten kept) and of one")
	// In "one", amy (solo/a, uid solo-a) is first; bob's twin (solo/a,
	// uid solo-a-2) ties on time, namespace and name and comes next.
	assert.Equal(t, "solo/a/solo-a-2", shared["one bob"])
	assert.Equal(t, "solo/b/solo-b", shared["one zed"])
}
