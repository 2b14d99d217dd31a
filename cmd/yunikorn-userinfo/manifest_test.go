package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

const objectsDir = "../../testdata/objects"

// TestRun_objectMatchesReview checks, for every kind the fixtures cover,
// that `run --object MANIFEST --user U --group G` builds the request the
// fixture holds (kind, resource, subresource, name, namespace, operation,
// options) and gets the same answer as `run -r FIXTURE`: allowed, patch,
// status and warnings. The manifests in testdata/objects are the fixtures'
// objects without managedFields and namespace, which run fills in.
func TestRun_objectMatchesReview(t *testing.T) {
	t.Parallel()
	cache := compilationCache(t)
	const kuberay, spark = `{"workloads":["kuberay"]}`, `{"workloads":["spark"]}`
	alice := []string{"--user", "alice", "--group", "dev"}
	tests := []struct {
		fixture  string // under testdata/
		object   string // under testdata/objects
		args     []string
		settings string
	}{
		{fixture: "base/pod.json", object: "pod.yaml", args: alice},
		{fixture: "base/deployment.json", object: "deployment.yaml", args: alice},
		{fixture: "base/statefulset.json", object: "statefulset.yaml", args: alice},
		{fixture: "base/daemonset.json", object: "daemonset.yaml", args: alice},
		{fixture: "base/replicaset.json", object: "replicaset.yaml", args: alice},
		{fixture: "base/replicationcontroller.json", object: "replicationcontroller.yaml", args: alice},
		{fixture: "base/job.json", object: "job.yaml", args: alice},
		{fixture: "base/cronjob.json", object: "cronjob.yaml", args: alice},
		{fixture: "requests/binding.json", object: "binding.yaml", args: []string{"--user", "system:kube-scheduler"}},
		{fixture: "requests/eviction.json", object: "eviction.json", args: alice},
		{fixture: "requests/podtemplate.json", object: "podtemplate.yaml", args: alice},
		{fixture: "requests/configmap.json", object: "configmap.yaml", args: alice},
		{fixture: "requests/crd-pod.json", object: "crd-pod.yaml", args: alice},
		{fixture: "requests/crd-job.json", object: "crd-job.yaml", args: alice},
		{fixture: "requests/delete-pod.json", object: "delete-pod.yaml", args: append([]string{"--operation", "DELETE"}, alice...)},
		{fixture: "requests/raycluster-create.json", object: "raycluster-create.yaml", args: alice, settings: kuberay},
		{fixture: "requests/rayjob-selector-create.json", object: "rayjob-selector-create.yaml", args: alice, settings: kuberay},
		{fixture: "requests/raycluster-update.json", object: "raycluster-update.yaml", settings: kuberay,
			args: append([]string{"--operation", "UPDATE", "--old-object", filepath.Join(objectsDir, "raycluster-update.old.yaml")}, alice...)},
		{fixture: "requests/sparkapplication-update.json", object: "sparkapplication-update.yaml", settings: spark,
			args: []string{"--operation", "update", "--old-object", filepath.Join(objectsDir, "sparkapplication-update.old.yaml"),
				"--user", "system:serviceaccount:platform:adopter"}},
	}
	for _, tc := range tests {
		t.Run(tc.object, func(t *testing.T) {
			t.Parallel()
			fixturePath := filepath.Join("../../testdata", tc.fixture)
			raw, err := os.ReadFile(fixturePath)
			require.NoError(t, err)
			want := gjson.ParseBytes(raw)
			if r := want.Get("request"); r.Exists() {
				want = r
			}
			settings := tc.settings
			if settings == "" {
				settings = "{}"
			}
			manifest := append([]string{"--object", filepath.Join(objectsDir, tc.object), "-n", want.Get("namespace").String()}, tc.args...)

			printed := runCLIWith(t, cache, "", append([]string{"run", "--print-request"}, manifest...)...)
			require.Equal(t, 0, printed.code, printed.stderr)
			got := gjson.Parse(printed.stdout)
			assert.Equal(t, "admission.k8s.io/v1", got.Get("apiVersion").String())
			assert.Equal(t, "AdmissionReview", got.Get("kind").String())
			req := got.Get("request")
			for _, field := range []string{"kind", "resource", "requestKind", "requestResource", "subResource", "requestSubResource",
				"namespace", "operation", "dryRun", "options"} {
				assert.JSONEq(t, jsonOf(want.Get(field)), jsonOf(req.Get(field)), field)
			}
			if want.Get("name").String() == want.Get("object.metadata.name").String() {
				assert.Equal(t, want.Get("name").String(), req.Get("name").String(), "name")
			}
			assert.Equal(t, want.Get("userInfo.username").String(), req.Get("userInfo.username").String())
			assert.JSONEq(t, want.Get("userInfo.groups").Raw, req.Get("userInfo.groups").Raw, "the groups the API server adds")
			if want.Get("operation").String() == "DELETE" {
				assert.Equal(t, "null", req.Get("object").Raw)
				assert.Equal(t, want.Get("oldObject.metadata.name").String(), req.Get("oldObject.metadata.name").String())
			} else {
				assert.Equal(t, want.Get("object.metadata.namespace").String(), req.Get("object.metadata.namespace").String(),
					"the namespace filled in")
			}

			fromObject := runCLIWith(t, cache, "", append([]string{"run", "--settings-json", settings}, manifest...)...)
			require.Equal(t, 0, fromObject.code, fromObject.stderr)
			fromReview := runCLIWith(t, cache, "", "run", "--settings-json", settings, "-r", fixturePath)
			require.Equal(t, 0, fromReview.code, fromReview.stderr)
			for _, field := range []string{"allowed", "patchType", "patch", "status", "warnings"} {
				assert.Equal(t, gjson.Get(fromReview.stdout, field).Raw, gjson.Get(fromObject.stdout, field).Raw, field)
			}
		})
	}
}

func jsonOf(r gjson.Result) string {
	if !r.Exists() {
		return `""` // an absent subresource is the empty one
	}
	return r.Raw
}

// TestRun_objectRequest checks what --object builds beyond the fixtures:
// the namespace filled in or refused, dry runs, the groups completed,
// JSON and YAML manifests.
func TestRun_objectRequest(t *testing.T) {
	t.Parallel()
	pod := writeFile(t, "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: alice-\nspec:\n  containers: [{name: c, image: busybox}]\n")
	status := writeFile(t, "pod.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"spark"}}`)
	printReq := func(t *testing.T, args ...string) gjson.Result {
		t.Helper()
		r := runCLI(t, "", append([]string{"run", "--print-request"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		require.True(t, json.Valid([]byte(r.stdout)), r.stdout)
		return gjson.Get(r.stdout, "request")
	}

	r := printReq(t, "--object", pod, "--user", "alice")
	assert.Equal(t, "default", r.Get("namespace").String(), "kubectl's default namespace")
	assert.Equal(t, "default", r.Get("object.metadata.namespace").String())
	assert.False(t, r.Get("name").Exists(), "generateName: no name yet, as the API server sends it")
	assert.JSONEq(t, `["system:authenticated"]`, r.Get("userInfo.groups").Raw)
	assert.False(t, r.Get("dryRun").Bool())
	assert.Len(t, r.Get("uid").String(), 36)

	r = printReq(t, "--object", status, "--subresource", "status", "--operation", "UPDATE", "--old-object", status,
		"--user", "system:serviceaccount:spark:driver", "--group", "system:authenticated", "--dry-run")
	assert.Equal(t, "spark", r.Get("namespace").String(), "the object's namespace")
	assert.Equal(t, "status", r.Get("subResource").String())
	assert.Equal(t, "pods", r.Get("resource.resource").String())
	assert.JSONEq(t, `["system:authenticated","system:serviceaccounts","system:serviceaccounts:spark"]`, r.Get("userInfo.groups").Raw)
	assert.True(t, r.Get("dryRun").Bool())
	assert.Equal(t, "UpdateOptions", r.Get("options.kind").String())

	r = printReq(t, "--object", pod, "--user", "system:anonymous", "--operation", "delete")
	assert.JSONEq(t, `["system:unauthenticated"]`, r.Get("userInfo.groups").Raw)
	assert.Equal(t, "null", r.Get("object").Raw)
	assert.Equal(t, "Pod", r.Get("oldObject.kind").String())
	assert.Equal(t, "Background", r.Get("options.propagationPolicy").String())

	// The review printed is one run -r reads back.
	review := runCLI(t, "", "run", "--print-request", "--object", pod, "--user", "alice", "--group", "dev")
	require.Equal(t, 0, review.code, review.stderr)
	back := runCLI(t, review.stdout, "run", guestPath, "-r", "-", "--settings-json", `{"mode":"accept"}`)
	require.Equal(t, 0, back.code, back.stderr)
	assert.Equal(t, gjson.Get(review.stdout, "request.uid").String(), gjson.Get(back.stdout, "uid").String())
}

func TestRun_objectErrors(t *testing.T) {
	t.Parallel()
	pod := writeFile(t, "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: e2e\n")
	twoDocs := writeFile(t, "two.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n")
	noKind := writeFile(t, "nokind.yaml", "apiVersion: v1\nmetadata: {name: a}\n")
	list := writeFile(t, "list.yaml", "- a\n")
	deploy := writeFile(t, "deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n")
	scale := writeFile(t, "scale.yaml", "apiVersion: autoscaling/v1\nkind: Scale\nmetadata: {name: web}\n")
	binding := writeFile(t, "binding.yaml", "apiVersion: v1\nkind: Binding\nmetadata: {name: p}\ntarget: {kind: Node, name: n}\n")

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"neither", []string{"run"},
			"want -r REQUEST (an AdmissionRequest or AdmissionReview) or --object FILE --user USER (a manifest and its submitter)"},
		{"both", []string{"run", "-r", requestPath, "--object", pod, "--user", "alice"},
			"-r and --object exclude each other: -r reads a whole AdmissionReview, --object builds one"},
		{"user with -r", []string{"run", "-r", requestPath, "--user", "alice"},
			"--user goes with --object, not with -r: the review given with -r says it"},
		{"operation with -r", []string{"bench", "-r", requestPath, "--operation", "DELETE"},
			"--operation goes with --object, not with -r: the review given with -r says it"},
		{"print-request with -r", []string{"run", "-r", requestPath, "--print-request"},
			"--print-request goes with --object: it prints the review built from the manifest (with -r, the file is the review)"},
		{"no user", []string{"run", "--object", pod},
			"--object needs --user USER: the submitter the API server authenticated"},
		{"bad operation", []string{"run", "--object", pod, "--user", "alice", "--operation", "PATCH"},
			`invalid --operation "PATCH": want CREATE, UPDATE or DELETE`},
		{"update without old", []string{"run", "--object", pod, "--user", "alice", "--operation", "UPDATE"},
			"--operation UPDATE needs --old-object FILE: the object as stored before the update"},
		{"old with create", []string{"run", "--object", pod, "--user", "alice", "--old-object", pod},
			"--old-object goes with --operation UPDATE, not CREATE"},
		{"kind changed", []string{"run", "--print-request", "--object", pod, "--user", "alice", "--operation", "UPDATE", "--old-object", deploy},
			"--old-object is apps/v1 Deployment, --object v1 Pod: an update keeps the kind"},
		{"namespace conflict", []string{"run", "--print-request", "--object", pod, "--user", "alice", "-n", "other"},
			`--object: the object's metadata.namespace "e2e" is not the request's namespace "other" (--namespace)`},
		{"two documents", []string{"run", "--print-request", "--object", twoDocs, "--user", "alice"},
			"--object " + twoDocs + ": 2 YAML documents: give one object"},
		{"no kind", []string{"run", "--print-request", "--object", noKind, "--user", "alice"},
			"--object: the object needs apiVersion and kind"},
		{"not an object", []string{"run", "--print-request", "--object", list, "--user", "alice"},
			"--object " + list + ": want one object (a mapping with apiVersion and kind)"},
		{"missing file", []string{"run", "--print-request", "--object", "testdata/missing.yaml", "--user", "alice"},
			"read --object: open testdata/missing.yaml: no such file or directory"},
		{"scale", []string{"run", "--print-request", "--object", scale, "--user", "alice"},
			"--object: a Scale does not say which resource it scales (deployments, replicasets, statefulsets, ...): write the AdmissionReview and pass it with -r"},
		{"binding subresource", []string{"run", "--print-request", "--object", binding, "--user", "alice", "--subresource", "status"},
			"--subresource status: a Binding is written as the pods/binding subresource"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, "", tc.args...)
			assert.Equal(t, 1, r.code)
			assert.Equal(t, "Error: "+tc.want+"\n", r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
}

// TestRun_cacheDir checks the compilation cache: kept in the user's cache
// directory without --cache-dir, off with --cache-dir "", and a directory
// that cannot be created means compiling without one, not a failure.
func TestRun_cacheDir(t *testing.T) {
	t.Parallel()
	runCached := func(t *testing.T, userCacheDir string, args ...string) result {
		t.Helper()
		var stdout, stderr strings.Builder
		code := runWith(t.Context(), append([]string{"run", guestPath, "-r", requestPath, "--settings-json", `{"mode":"accept"}`}, args...),
			deps{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, policy: embeddedPolicy, userCacheDir: userCacheDir})
		return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}
	entries := func(dir string) int {
		n := 0
		_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return nil
		})
		return n
	}

	userDir := filepath.Join(t.TempDir(), "cache")
	r := runCached(t, userDir)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, acceptedLine, r.stdout)
	assert.Equal(t, 1, entries(userDir), "the compiled module, by default in the user's cache directory")

	off := filepath.Join(t.TempDir(), "off")
	r = runCached(t, off, "--cache-dir=")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NoDirExists(t, off, `--cache-dir "" compiles without a cache`)

	blocked := filepath.Join(writeFile(t, "file", ""), "cache") // under a file: cannot be created
	r = runCached(t, blocked, "-v")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, acceptedLine, r.stdout)
	assert.Contains(t, r.stderr, `level=DEBUG msg="compiling without a compilation cache"`)

	r = runCached(t, "", "--cache-dir", blocked)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, `level=WARN msg="compiling without a compilation cache"`, "a directory asked for is worth a warning")
}
