package yunikorn

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apache/yunikorn-core/pkg/webservice/dao"
	sicommon "github.com/apache/yunikorn-scheduler-interface/lib/go/common"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/audit"
)

// ykREST serves what yunikorn-core v1.9.0's webservice answers on the two
// routes audit --yunikorn reads, encoded from core's own dao types: the
// partitions, and each partition's active applications.
func ykREST(t *testing.T, apps map[string][]*dao.ApplicationDAOInfo) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws/v1/partitions", func(w http.ResponseWriter, _ *http.Request) {
		var parts []*dao.PartitionInfo
		for name := range apps {
			parts = append(parts, &dao.PartitionInfo{ClusterID: "mycluster", Name: name, State: "Active"})
		}
		require.NoError(t, json.NewEncoder(w).Encode(parts))
	})
	mux.HandleFunc("GET /ws/v1/partition/{partition}/applications/{state}", func(w http.ResponseWriter, r *http.Request) {
		list, ok := apps[r.PathValue("partition")]
		if !ok || r.PathValue("state") != "active" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(dao.YAPIError{StatusCode: http.StatusNotFound, Message: "Partition not found", Description: "Partition not found"})
			return
		}
		require.NoError(t, json.NewEncoder(w).Encode(list))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// tags are the allocation tags the shim gives a Pod's ask and allocation.
func tags(ns, pod string) map[string]string {
	meta := sicommon.DomainK8s + sicommon.GroupMeta
	return map[string]string{meta + sicommon.KeyNamespace: ns, meta + sicommon.KeyPodName: pod, sicommon.CreationTime: "1700000000"}
}

func running(ns string, pods ...string) []*dao.AllocationDAOInfo {
	var out []*dao.AllocationDAOInfo
	for _, p := range pods {
		out = append(out, &dao.AllocationDAOInfo{AllocationKey: "uid-" + p, AllocationTags: tags(ns, p), NodeID: "node-1", ResourcePerAlloc: map[string]int64{"pods": 1}})
	}
	return out
}

func pending(ns string, pods ...string) []*dao.AllocationAskDAOInfo {
	var out []*dao.AllocationAskDAOInfo
	for _, p := range pods {
		out = append(out, &dao.AllocationAskDAOInfo{AllocationKey: "uid-" + p, AllocationTags: tags(ns, p), ResourcePerAlloc: map[string]int64{"pods": 1}})
	}
	return out
}

func pod(ns, name, userInfo string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if userInfo != "" {
		p.Annotations = map[string]string{audit.AnnotationKey: userInfo}
	}
	return p
}

// TestChargedMatchesCoreREST: audit --yunikorn reads the JSON that
// yunikorn-core's dao types encode, and reports each application whose
// charged user differs from its Pods' user.info, once, with what to do.
func TestChargedMatchesCoreREST(t *testing.T) {
	const aliceInfo = `{"user":"alice","groups":["dev"]}`
	srv := ykREST(t, map[string][]*dao.ApplicationDAOInfo{
		"default": {
			// Namespace team's generated application, created by an old
			// Pod without user.info: charged to nobody; alice's Pod
			// joined it (running) and so did a pending one.
			{ApplicationID: "yunikorn-team-autogen", Partition: "default", QueueName: "root.default", User: "nobody",
				State: "Running", Allocations: running("team", "old", "alice-joined"), Requests: pending("team", "alice-pending")},
			// alice's own application: fine.
			{ApplicationID: "team-1f2e", Partition: "default", QueueName: "root.alice", User: "alice", Groups: []string{"dev"},
				State: "Running", Allocations: running("team", "alice-own")},
			// bob's Pod in alice's application.
			{ApplicationID: "shared-app", Partition: "default", QueueName: "root.alice", User: "alice",
				State: "Running", Allocations: running("other", "alice-first", "bob-joined")},
			// A Pod YuniKorn still lists but the API server no longer has.
			{ApplicationID: "gone-app", Partition: "default", QueueName: "root.bob", User: "bob",
				State: "Completing", Allocations: running("other", "deleted")},
		},
		"gpu": {
			{ApplicationID: "gpu-app", Partition: "gpu", QueueName: "root.gpu", User: "carol",
				State: "Running", Allocations: running("ml", "carol-train")},
		},
	})
	cs := fake.NewClientset(
		pod("team", "old", ""),
		pod("team", "alice-joined", aliceInfo),
		pod("team", "alice-pending", aliceInfo),
		pod("team", "alice-own", aliceInfo),
		pod("other", "alice-first", aliceInfo),
		pod("other", "bob-joined", `{"user":"bob"}`),
		pod("ml", "carol-train", `{"user":"carol"}`),
	)

	rep, err := audit.Charged(t.Context(), cs, audit.ChargedOptions{URL: srv.URL + "/"})
	require.NoError(t, err)
	assert.Equal(t, 5, rep.Applications)
	assert.Equal(t, 7, rep.Pods)
	assert.Equal(t, 1, rep.PodsGone)
	require.Len(t, rep.Findings, 2, "%+v", rep.Findings)

	f := rep.Findings[0]
	assert.Equal(t, audit.RuleChargedUser, f.Rule)
	assert.Equal(t, audit.Resource{APIVersion: "v1", Kind: "Pod", Namespace: "other", Name: "bob-joined"}, f.Resource)
	assert.Equal(t, "bob", f.User)
	assert.Equal(t, "shared-app", f.AppID)
	assert.Equal(t, "alice", f.ChargedUser)
	assert.Contains(t, f.Message, `to "alice", but 1 of its 2 Pods record "bob" (1) (other/bob-joined)`)
	assert.Contains(t, f.Message, "applicationOwnership")

	f = rep.Findings[1]
	assert.Equal(t, audit.Resource{APIVersion: "v1", Kind: "Pod", Namespace: "team", Name: "alice-joined"}, f.Resource)
	assert.Equal(t, "alice", f.User)
	assert.Equal(t, "yunikorn-team-autogen", f.AppID)
	assert.Equal(t, "nobody", f.ChargedUser)
	assert.Contains(t, f.Message, `(partition default, queue root.default) to "nobody", but 3 of its 3 Pods record no user (1), "alice" (2) `+
		`(team/alice-joined, team/alice-pending, team/old)`)
	assert.Contains(t, f.Message, "namespace team's generated application")
	assert.Contains(t, f.Message, `generateUniqueAppIds: true`)
	assert.Contains(t, f.Message, `admissionController.filtering.generateUniqueAppId "true"`)

	// -n: only the applications with a Pod in the namespace.
	rep, err = audit.Charged(t.Context(), cs, audit.ChargedOptions{URL: srv.URL, Namespace: "team"})
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Applications)
	require.Len(t, rep.Findings, 1)
	assert.Equal(t, "yunikorn-team-autogen", rep.Findings[0].AppID)
}

// TestChargedErrors: a bad URL, a server that is not YuniKorn, and an
// error answer each give an error naming the step and the problem.
func TestChargedErrors(t *testing.T) {
	cs := fake.NewClientset()
	for _, tc := range []struct{ url, want string }{
		{"", "no URL"},
		{"yunikorn-service:9080", "want http:// or https:// and a host"},
		{"http://yk:9080/?x=1", "want no query or fragment"},
	} {
		_, err := audit.Charged(t.Context(), cs, audit.ChargedOptions{URL: tc.url})
		require.Error(t, err, tc.url)
		assert.Contains(t, err.Error(), tc.want)
	}

	notYK := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) }))
	t.Cleanup(notYK.Close)
	_, err := audit.Charged(t.Context(), cs, audit.ChargedOptions{URL: notYK.URL})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "read YuniKorn's partitions: GET "+notYK.URL+"/ws/v1/partitions: not YuniKorn's JSON"), err.Error())

	// A partition whose applications YuniKorn does not give: its status
	// and message.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws/v1/partitions", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode([]*dao.PartitionInfo{{Name: "default"}})
	})
	mux.HandleFunc("GET /ws/v1/partition/default/applications/active", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(dao.YAPIError{StatusCode: http.StatusNotFound, Message: "Partition not found"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, err = audit.ChargedApps(t.Context(), audit.ChargedOptions{URL: srv.URL})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read the applications of partition default: GET "+srv.URL+"/ws/v1/partition/default/applications/active: 404 Not Found")
	assert.Contains(t, err.Error(), "Partition not found")
}
