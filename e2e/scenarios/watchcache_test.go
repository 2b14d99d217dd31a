package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// listPathsUser is the identity of TestWatchCacheListPaths's serve, the one
// user whose requests the API server's audit log records
// (cluster.Options.AuditUsers).
const listPathsUser = "userinfo-listpaths"

// streamingListsMinor is the first Kubernetes minor version whose API
// server serves streaming lists (a watch with sendInitialEvents: the
// WatchList feature gate) by default: on by default in 1.32, off again in
// 1.33, on from 1.34 (k8s.io/apiserver pkg/features).
const streamingListsMinor = 34

// TestWatchCacheListPaths: serve's watch cache fills by the path the API
// server offers, then follows its watch. Its client-go asks for a
// streaming list first (WatchListClient, on by default from client-go
// 0.35); an API server that refuses one (1.33) leaves the cache to fall
// back to paged lists. The API server's audit log shows which path the
// first sync took, and the scenario requires the one the server's version
// implies. Either way the cache answers with every object, more than one
// page of them, and follows an add and a delete made after the sync.
func TestWatchCacheListPaths(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, "")
	const n = 501 // one more than a page of the fallback's paged list (500)
	selector := map[string]string{"e2e-list": "paths"}
	createConfigMaps(t, ns, "cm", n, selector)
	grantConfigMapReader(t, listPathsUser)

	kubeconfig, err := e2e.cluster.WriteKubeconfig(listPathsUser)
	require.NoError(t, err)
	settings := filepath.Join(t.TempDir(), "settings.json")
	require.NoError(t, os.WriteFile(settings, []byte(`{"mode":"host-call","operation":"list_resources_by_namespace","payload":`+
		`{"api_version":"v1","kind":"ConfigMap","namespace":"`+ns+`","label_selector":"e2e-list=paths"}}`), 0o600))
	// /readyz answers only once the cluster-wide ConfigMap cache has
	// synced (--sync-before-ready): StartWebhook returns after the first
	// sync.
	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-listpaths", Binary: e2e.serveBinary, SettingsFile: settings,
		ExtraArgs: []string{annotatedTestGuest(t, "ConfigMap"), "--kubeconfig", kubeconfig, "--sync-before-ready", "v1/ConfigMap"},
	})
	require.NoError(t, err, "start serve with the ConfigMap cache")
	t.Cleanup(func() { assert.NoError(t, wh.Stop(), "stop serve-listpaths") })

	names := func(t *testing.T) []string {
		t.Helper()
		msg := hostCallAt(t, wh)
		var list corev1.ConfigMapList
		require.NoError(t, json.Unmarshal([]byte(msg), &list), "the cache's answer")
		var out []string
		for _, cm := range list.Items {
			out = append(out, cm.Name)
		}
		return out
	}
	got := names(t)
	require.Len(t, got, n, "every ConfigMap, from the first sync")
	assert.Contains(t, got, "cm-000")

	events, err := e2e.cluster.AuditEvents(listPathsUser)
	require.NoError(t, err)
	streamed, refused, pages := firstSyncRequests(events)
	t.Logf("Kubernetes %s: streaming-list watches served %v, refused %v; paged lists %d", e2e.kubeVersion, streamed, refused, len(pages))
	if e2e.kubeMinor >= streamingListsMinor {
		require.NotEmpty(t, streamed, "the cache asked for a streaming list")
		assert.Empty(t, refused, "the API server serves streaming lists from 1.%d", streamingListsMinor)
		assert.Empty(t, pages, "no paged list: the first sync was streamed")
	} else {
		require.NotEmpty(t, refused, "the cache asked for a streaming list, which 1.%d refuses", e2e.kubeMinor)
		assert.Empty(t, streamed, "1.%d does not stream lists by default", e2e.kubeMinor)
		require.NotEmpty(t, pages, "the fallback: paged lists")
		assert.True(t, slices.ContainsFunc(pages, func(uri string) bool { return strings.Contains(uri, "continue=") }),
			"more than one page: %v", pages)
	}

	// The watch: an add and a delete after the sync reach the cache.
	createConfigMaps(t, ns, "late", 1, selector)
	require.NoError(t, client(admin).CoreV1().ConfigMaps(ns).Delete(ctx, "cm-000", metav1.DeleteOptions{}))
	var last []string
	err = cluster.Poll(ctx, controllerTimeout, pollInterval, func(context.Context) (bool, error) {
		last = names(t)
		return slices.Contains(last, "late-000") && !slices.Contains(last, "cm-000"), nil
	})
	require.NoErrorf(t, err, "the cache followed the watch (%d names, late-000 %v, cm-000 %v)",
		len(last), slices.Contains(last, "late-000"), slices.Contains(last, "cm-000"))
	assert.Len(t, last, n)
}

// firstSyncRequests sorts the audited ConfigMap requests: watches that
// asked for a streaming list (sendInitialEvents=true) and were served, or
// refused; and the request URIs of the lists.
func firstSyncRequests(events []cluster.AuditEvent) (streamed, refused []int, pages []string) {
	for _, e := range events {
		if !strings.Contains(e.RequestURI, "/configmaps") {
			continue
		}
		switch {
		case e.Verb == "watch" && strings.Contains(e.RequestURI, "sendInitialEvents=true"):
			if e.Code() == http.StatusOK {
				// A served watch has two events (ResponseStarted and, when
				// it ends, ResponseComplete): count it once.
				if e.Stage == "ResponseStarted" {
					streamed = append(streamed, e.Code())
				}
			} else if e.Code() != 0 {
				refused = append(refused, e.Code())
			}
		case e.Verb == "list" && e.Stage == "ResponseComplete" && e.Code() == http.StatusOK:
			pages = append(pages, e.RequestURI)
		}
	}
	return streamed, refused, pages
}

// createConfigMaps creates n ConfigMaps prefix-000... with labels in ns, a
// few at a time.
func createConfigMaps(t *testing.T, ns, prefix string, n int, labels map[string]string) {
	t.Helper()
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				_, err := client(admin).CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", prefix, i), Labels: labels},
					Data:       map[string]string{"i": fmt.Sprint(i)},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "create ConfigMap")
	}
}

// grantConfigMapReader lets user get, list and watch ConfigMaps in every
// namespace.
func grantConfigMapReader(t *testing.T, user string) {
	t.Helper()
	ctx := t.Context()
	name := "e2e-" + nameFor(t.Name()) + "-configmaps"
	_, err := client(admin).RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client(admin).RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		assert.NoError(t, client(admin).RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}))
		assert.NoError(t, client(admin).RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}))
	})
}

// hostCallAt sends the CLI's fixture request to wh's /mutate, where the
// test guest in host-call mode answers with the host capability's answer
// as its message, and returns that message.
func hostCallAt(t *testing.T, wh *cluster.Webhook) string {
	t.Helper()
	req, err := os.ReadFile(filepath.Join(e2e.repo, "cmd", "yunikorn-userinfo", "testdata", "request.json"))
	require.NoError(t, err)
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + string(req) + `}`
	hc, err := e2e.cluster.HTTPClient()
	require.NoError(t, err)
	r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, wh.BaseURL+"/mutate", bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	r.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(r)
	require.NoError(t, err, "POST /mutate")
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var review struct {
		Response struct {
			Allowed bool `json:"allowed"`
			Status  struct {
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	require.NoError(t, json.Unmarshal(b, &review), "%s", b)
	require.True(t, review.Response.Allowed, "the host call failed: %s", review.Response.Status.Message)
	return review.Response.Status.Message
}
