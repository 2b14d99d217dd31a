package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/kubecap"
	"github.com/yunikorn-userinfo/userinfo/host/metadata"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/policy/appid"
)

// contextGuest is the test guest annotated with metadata that declares
// v1/Pod as its context-aware resource.
func contextGuest(t *testing.T) string {
	t.Helper()
	md, err := metadata.Parse([]byte(`rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["pods"]
    operations: ["CREATE"]
mutating: false
contextAwareResources:
  - apiVersion: v1
    kind: Pod
executionMode: kubewarden-wapc
`))
	require.NoError(t, err)
	md.ProtocolVersion = metadata.ProtocolV1
	return annotateGuest(t, md)
}

const replayDir = "../../host/kubecap/testdata/cluster"

// TestRun_contextDir: `run --context-dir` answers the policy's Kubernetes
// host capabilities from a directory of objects, limited to the kinds the
// module's metadata declares; without the flag they are refused.
func TestRun_contextDir(t *testing.T) {
	t.Parallel()
	module := contextGuest(t)
	settings := func(op, payload string) string {
		return `{"mode":"host-call","operation":"` + op + `","payload":` + payload + `}`
	}
	type response struct {
		Allowed bool `json:"allowed"`
		Status  struct {
			Message string `json:"message"`
		} `json:"status"`
	}
	runIt := func(t *testing.T, settings string, extra ...string) response {
		t.Helper()
		args := append([]string{"run", module, "-r", requestPath, "--settings-json", settings}, extra...)
		res := runCLI(t, "", args...)
		require.Equal(t, 0, res.code, res.stderr)
		var r response
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &r), res.stdout)
		return r
	}

	r := runIt(t, settings("get_resource", `{"api_version":"v1","kind":"Pod","name":"driver","namespace":"spark"}`), "--context-dir", replayDir)
	require.True(t, r.Allowed, r.Status.Message)
	var pod struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Status.Message), &pod))
	assert.Equal(t, `{"user":"alice","groups":["dev"]}`, pod.Metadata.Annotations["yunikorn.apache.org/user.info"])

	r = runIt(t, settings("list_resources_by_namespace", `{"api_version":"v1","kind":"Pod","namespace":"spark","label_selector":"spark-role=executor","field_masks":["status"]}`),
		"--context-dir", replayDir)
	assert.JSONEq(t, `{"apiVersion":"v1","kind":"PodList","metadata":{},"items":[{"apiVersion":"v1","kind":"Pod",`+
		`"metadata":{"name":"executor-1","namespace":"spark","labels":{"spark-role":"executor"}},"status":{"phase":"Pending"}}]}`, r.Status.Message)

	r = runIt(t, settings("get_resource", `{"api_version":"v1","kind":"ConfigMap","name":"yunikorn-configs","namespace":"yunikorn"}`), "--context-dir", replayDir)
	assert.False(t, r.Allowed)
	assert.Equal(t, "host error: Host error: Policy has not been granted access to Kubernetes v1/ConfigMap resources. The violation has been reported.", r.Status.Message)

	r = runIt(t, settings("get_resource", `{"api_version":"v1","kind":"Pod","name":"driver","namespace":"spark"}`))
	assert.False(t, r.Allowed)
	assert.Contains(t, r.Status.Message, `host error: Host error: host capability "kubewarden/kubernetes/get_resource" is not available in this host`)
}

func TestRun_contextFlagErrors(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "", "run", guestPath, "-r", requestPath, "--context-dir", "/nonexistent/replay")
	assert.Equal(t, 1, res.code)
	assert.Contains(t, res.stderr, "load replay directory /nonexistent/replay")
	res = runCLI(t, "", "run", guestPath, "-r", requestPath, "--context-dir", replayDir, "--kubeconfig", "x")
	assert.NotEqual(t, 0, res.code)
	assert.Contains(t, res.stderr, "none of the others can be")
	res = runCLI(t, "", "run", guestPath, "-r", requestPath, "--kubeconfig", "/nonexistent/kubeconfig")
	assert.Equal(t, 1, res.code)
	assert.Contains(t, res.stderr, "read --kubeconfig /nonexistent/kubeconfig")
}

// TestEmbeddedCacheDeclaration: the embedded module declares how every
// kind it reads may be cached, keeping each field the policy reads of it:
// of a Pod, what application ownership and the pod-token proof read
// (labels, annotations, uid, the controller ownerReference,
// spec.schedulerName and serviceAccountName, status.phase; the case table
// checks the rest, policy's TestValidate_fixturesThroughTheCache), and the labels that
// carry an application ID indexed; of an owner, its spec, where the
// workloads settings name the templates.
func TestEmbeddedCacheDeclaration(t *testing.T) {
	resources, specs, err := contextResources(embeddedPolicy)
	require.NoError(t, err)
	require.NotEmpty(t, resources)
	byKind := map[kubecap.Resource]kubecap.CacheSpec{}
	for _, s := range specs {
		byKind[kubecap.Resource{APIVersion: s.APIVersion, Kind: s.Kind}] = s
	}
	for _, r := range resources {
		s, ok := byKind[r]
		require.True(t, ok, "%s has a cache declaration", r)
		assert.Subset(t, s.Fields, []string{"metadata.name", "metadata.uid"}, r.String())
		if r.Kind != "ConfigMap" {
			assert.Equal(t, kubecap.WatchCluster, s.Watch, "%s: one watch", r)
		}
		switch {
		case r.Kind == "PriorityClass":
			// The scheduling setting reads only its allow-preemption annotation.
			assert.Subset(t, s.Fields, []string{"metadata.annotations"}, r.String())
		case r.APIVersion != "v1":
			// A workload kind: its owner record and pod templates.
			assert.Subset(t, s.Fields, []string{"metadata.annotations", "spec"}, r.String())
		}
	}
	assert.Contains(t, resources, kubecap.Resource{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"})
	pod := byKind[kubecap.Resource{APIVersion: "v1", Kind: "Pod"}]
	assert.Subset(t, pod.Fields, []string{"metadata.labels", "metadata.annotations", "metadata.ownerReferences.uid",
		"metadata.ownerReferences.controller", "spec.schedulerName", "spec.serviceAccountName", "status.phase"})
	assert.ElementsMatch(t, []string{"yunikorn.apache.org/app-id", "applicationId", "spark-app-selector"}, pod.LabelIndex)
	cm := byKind[kubecap.Resource{APIVersion: "v1", Kind: "ConfigMap"}]
	assert.Equal(t, kubecap.WatchNamespace, cm.Watch, "the chart grants ConfigMaps in YuniKorn's namespace only")
	assert.Subset(t, cm.Fields, []string{"data", "binaryData"})
}

// The Pod labels the cache keeps include the settings' userLabelKey.
func TestKeepUserLabel(t *testing.T) {
	specs := []kubecap.CacheSpec{{APIVersion: "v1", Kind: "Pod", Keys: map[string][]string{"metadata.labels": {"applicationId"}}},
		{APIVersion: "v1", Kind: "Namespace"}}
	got := keepUserLabel(specs, []byte(`{"userLabelKey":"example.com/user"}`))
	assert.Equal(t, []string{"applicationId", "example.com/user"}, got[0].Keys["metadata.labels"])
	assert.Equal(t, []string{"applicationId"}, specs[0].Keys["metadata.labels"], "the declaration is not changed")
	assert.Nil(t, got[1].Keys)
	got = keepUserLabel(specs, []byte(`{}`))
	assert.Equal(t, []string{"applicationId", "yunikorn.apache.org/username"}, got[0].Keys["metadata.labels"])
}

// A never-scheduled Pod with a 255 KiB yunikorn.apache.org/app-id
// annotation keeps a few hundred bytes in serve's Pod cache, as the
// module declares it and serve adds its bounds, where the declaration
// alone keeps it whole; every source of an ID is bounded, and a kind
// with no declaration gets one.
func TestBoundAppIDs(t *testing.T) {
	resources, specs, err := contextResources(embeddedPolicy)
	require.NoError(t, err)
	huge := strings.Repeat("a", 255<<10)
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "ns", "uid": "u-1",
			"annotations": map[string]any{appid.Annotation: huge, "other": huge}},
		"spec":   map[string]any{"schedulerName": "yunikorn"},
		"status": map[string]any{"phase": "Pending"}}
	data, err := json.Marshal(pod)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pod.json"), data, 0o600))
	replay, err := kubecap.LoadReplay(dir)
	require.NoError(t, err)
	kept := func(specs []kubecap.CacheSpec) int {
		raw, err := kubecap.CachedView(replay, specs).Get(t.Context(), podResource, "ns", "p", false)
		require.NoError(t, err)
		return len(raw)
	}
	unbounded := kept(keepUserLabel(specs, nil))
	bounded := kept(boundAppIDs(keepUserLabel(specs, nil), resources))
	t.Logf("bytes kept of the Pod: %d without the bound, %d with it", unbounded, bounded)
	assert.Greater(t, unbounded, 255<<10)
	assert.Less(t, bounded, 2<<10, "bytes kept of a Pod with a 255 KiB application ID")

	got := boundAppIDs(specs, resources)
	for _, s := range got {
		if s.Kind == "Pod" {
			assert.Equal(t, map[string]map[string]int{
				"metadata.labels":      {appid.LabelCanonical: appid.MaxIDBytes, appid.Label: appid.MaxIDBytes, appid.LabelSpark: appid.MaxIDBytes},
				"metadata.annotations": {appid.Annotation: appid.MaxIDBytes},
			}, s.MaxValueBytes)
		}
	}
	for i := range specs {
		assert.Nil(t, specs[i].MaxValueBytes, "the declaration is not changed")
	}
	got = boundAppIDs(nil, []kubecap.Resource{podResource})
	require.Len(t, got, 1, "a Pod cache without a declaration is bounded too")
	assert.Equal(t, appid.MaxIDBytes, got[0].MaxValueBytes["metadata.annotations"][appid.Annotation])
	assert.Empty(t, boundAppIDs(nil, nil))
}

// hostCalls is the count of yunikorn_userinfo_host_calls_total for
// operation and outcome in a scrape (0 when the series is absent).
func hostCalls(metrics, operation, outcome string) int {
	prefix := `yunikorn_userinfo_host_calls_total{operation="` + operation + `",outcome="` + outcome + `"} `
	for line := range strings.Lines(metrics) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, _ := strconv.Atoi(rest)
			return n
		}
	}
	return 0
}

// TestServe_ownerIndexForEverySetting starts serve with each setting that
// feeds the index of application owners (applicationOwnership's own key,
// scheduling.generateUniqueAppIds, the defaults, and followYuniKornConfig
// with a ConfigMap that sets generateUniqueAppId, which the model does not
// follow): every ownership check is answered by the index, and no Pod is
// listed. A host that keeps the index for other settings (changed by a
// reload) is missed: the answer says so, and the metric counts it.
func TestServe_ownerIndexForEverySetting(t *testing.T) {
	cases, err := fixtures.Load()
	require.NoError(t, err)
	i := slices.IndexFunc(cases, func(c fixtures.Case) bool { return c.Name == "pod/app-ownership/global/another-namespaces-application" })
	require.GreaterOrEqual(t, i, 0)
	joins := wrapReview(cases[i].Request) // bob's Pod labelled with alice's application
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	cache := compilationCache(t)
	refused := func(t *testing.T, s *server) (warnings []string) {
		t.Helper()
		status, body := postReview(t, client, s.url, joins)
		require.Equal(t, http.StatusOK, status)
		var r struct {
			Response struct {
				Allowed  bool     `json:"allowed"`
				Warnings []string `json:"warnings"`
				Status   struct {
					Message string `json:"message"`
				} `json:"status"`
			} `json:"response"`
		}
		require.NoError(t, json.Unmarshal(body, &r), "%s", body)
		assert.False(t, r.Response.Allowed, "%s", body)
		assert.Contains(t, r.Response.Status.Message, "application etl-alice is owned by another user")
		return r.Response.Warnings
	}
	for _, tc := range []struct{ name, settings, warning string }{
		{"own key", `{"applicationOwnership":{"mode":"enforce","generateUniqueAppIds":true}}`, ""},
		{"scheduling's key", `{"applicationOwnership":"enforce","scheduling":{"generateUniqueAppIds":true}}`, ""},
		{"defaults", `{"applicationOwnership":"enforce"}`, ""},
		{"followed ConfigMap", `{"applicationOwnership":"enforce","followYuniKornConfig":{"namespace":"yunikorn-follow-unique"}}`,
			"admissionController.filtering.generateUniqueAppId in yunikorn-follow-unique/yunikorn-configs is true, while applicationOwnership checks with generateUniqueAppIds false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServe(t, cache, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--settings-json", tc.settings,
				"--context-dir", fixtures.ClusterDir())
			for range 3 {
				warnings := refused(t, s)
				if tc.warning == "" {
					assert.Empty(t, warnings)
				} else {
					require.Len(t, warnings, 1)
					assert.Contains(t, warnings[0], tc.warning)
				}
			}
			metrics := scrape(t, s.metrics)
			assert.Equal(t, 3, hostCalls(metrics, "index_values", "ok"), "every check asked the index")
			assert.NotContains(t, metrics, `operation="list_resources_all"`, "no Pod was listed")
			assert.Zero(t, hostCalls(metrics, "index_values", "missed"))
		})
	}

	t.Run("missed", func(t *testing.T) {
		settingsFile := filepath.Join(t.TempDir(), "settings.json")
		writeAtomically(t, settingsFile, []byte(`{"applicationOwnership":"enforce"}`))
		s := startServe(t, cache, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "-s", settingsFile,
			"--settings-reload-interval", "20ms", "--context-dir", fixtures.ClusterDir())
		assert.Empty(t, refused(t, s))
		writeAtomically(t, settingsFile, []byte(`{"applicationOwnership":{"mode":"enforce","completingTimeout":"1m"}}`))
		require.Eventually(t, func() bool { return len(refused(t, s)) > 0 }, 10*time.Second, 20*time.Millisecond, "the new settings apply")
		before := scrape(t, s.metrics)
		for range 2 {
			warnings := refused(t, s)
			require.Len(t, warnings, 1, "the index kept for the settings at start is not this one")
			assert.Contains(t, warnings[0], "application ownership: this host keeps no index of application owners for these settings")
		}
		after := scrape(t, s.metrics)
		assert.Equal(t, 2, hostCalls(after, "index_values", "missed")-hostCalls(before, "index_values", "missed"), "every miss counted")
		assert.Equal(t, 2, hostCalls(after, "list_resources_all", "ok")-hostCalls(before, "list_resources_all", "ok"), "listed instead")
	})
}
