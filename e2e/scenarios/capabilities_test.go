package scenarios

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHostCapabilities: the Kubernetes host capabilities answered by the
// real API server (`run --kubeconfig`, informers and SubjectAccessReviews),
// for a policy module that declares v1/Pod: get_resource and
// list_resources_by_namespace see the objects the test created,
// list_resources_all of an undeclared kind is refused, and can_i follows
// RBAC. It reports each call's duration as the host logs it.
func TestHostCapabilities(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, "")
	_, err := client(admin).CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "driver", Labels: map[string]string{"spark-role": "driver"},
			Annotations: map[string]string{annotationKey: e2e.identity[alice].annotation()}},
		Spec: podSpec(corev1.RestartPolicyNever),
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	module := annotatedTestGuest(t, "Pod")
	kubeconfig, err := e2e.cluster.WriteKubeconfig(admin)
	require.NoError(t, err)
	request := filepath.Join(e2e.repo, "cmd", "yunikorn-userinfo", "testdata", "request.json")
	call := func(t *testing.T, op, payload string) (allowed bool, message string, durations []float64) {
		t.Helper()
		settings := `{"mode":"host-call","operation":"` + op + `","payload":` + payload + `}`
		cmdCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cmdCtx, e2e.serveBinary, "run", module, "-r", request, "--settings-json", settings,
			"--kubeconfig", kubeconfig, "-v", "--log-format", "json")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
		var r struct {
			Allowed bool `json:"allowed"`
			Status  struct {
				Message string `json:"message"`
			} `json:"status"`
		}
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &r), stdout.String())
		sc := bufio.NewScanner(&stderr)
		for sc.Scan() {
			var line struct {
				Msg      string  `json:"msg"`
				Duration float64 `json:"duration_ms"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "host capability" {
				durations = append(durations, line.Duration)
			}
		}
		return r.Allowed, r.Status.Message, durations
	}

	allowed, msg, d := call(t, "get_resource", `{"api_version":"v1","kind":"Pod","name":"driver","namespace":"`+ns+`"}`)
	require.True(t, allowed, msg)
	var pod corev1.Pod
	require.NoError(t, json.Unmarshal([]byte(msg), &pod))
	assert.Equal(t, e2e.identity[alice].annotation(), pod.Annotations[annotationKey])
	t.Logf("get_resource from the watch cache: %v ms", d)

	allowed, msg, d = call(t, "list_resources_by_namespace", `{"api_version":"v1","kind":"Pod","namespace":"`+ns+`","label_selector":"spark-role=driver","field_masks":["spec.restartPolicy"]}`)
	require.True(t, allowed, msg)
	var list corev1.PodList
	require.NoError(t, json.Unmarshal([]byte(msg), &list))
	require.Len(t, list.Items, 1)
	assert.Equal(t, "driver", list.Items[0].Name)
	assert.Equal(t, corev1.RestartPolicyNever, list.Items[0].Spec.RestartPolicy)
	assert.Empty(t, list.Items[0].Spec.Containers, "masked away")
	t.Logf("list_resources_by_namespace from the watch cache: %v ms", d)

	allowed, msg, _ = call(t, "get_resource", `{"api_version":"v1","kind":"Pod","name":"driver","namespace":"`+ns+`","disable_cache":true}`)
	assert.True(t, allowed, msg)

	allowed, msg, _ = call(t, "list_resources_all", `{"api_version":"v1","kind":"Secret"}`)
	assert.False(t, allowed)
	assert.Contains(t, msg, "Policy has not been granted access to Kubernetes v1/Secret resources")

	sar := func(verb, group, resource string) string {
		return `{"subject_access_review":{"user":"alice","groups":` + mustJSON(e2e.identity[alice].Groups) +
			`,"resource_attributes":{"namespace":"` + ns + `","verb":"` + verb + `","group":"` + group + `","resource":"` + resource + `"}},"disable_cache":true}`
	}
	allowed, msg, d = call(t, "can_i", sar("create", "", "pods"))
	require.True(t, allowed, msg)
	assert.Contains(t, msg, `"allowed":true`, "alice may create Pods in the test namespace (RoleBinding)")
	t.Logf("can_i (a SubjectAccessReview): %v ms", d)
	allowed, msg, _ = call(t, "can_i", sar("set", "yunikorn.apache.org", "userinfos"))
	require.True(t, allowed, msg)
	assert.Contains(t, msg, `"allowed":false`, "nobody granted alice the custom verb")
}

// annotatedTestGuest annotates the CLI's test guest with metadata that
// declares v1/kind as its context-aware resource.
func annotatedTestGuest(t *testing.T, kind string) string {
	t.Helper()
	dir := t.TempDir()
	md := filepath.Join(dir, "metadata.yml")
	require.NoError(t, os.WriteFile(md, []byte("rules:\n  - {apiGroups: [\"\"], apiVersions: [v1], resources: [pods], operations: [CREATE]}\n"+
		"mutating: false\nexecutionMode: kubewarden-wapc\n"+
		"contextAwareResources:\n  - apiVersion: v1\n    kind: "+kind+"\n"), 0o600))
	out := filepath.Join(dir, "guest.wasm")
	// The repository's own annotate (make annotated's): the CLI leaves it to kwctl.
	cmd := exec.CommandContext(t.Context(), "go", "run", "./cmd/policymeta", "annotate",
		filepath.Join(e2e.repo, "cmd", "yunikorn-userinfo", "testdata", "guest.wasm"), "-m", md, "-o", out)
	cmd.Dir = filepath.Join(e2e.repo, "release")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
