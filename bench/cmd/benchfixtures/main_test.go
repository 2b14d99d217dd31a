package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

// committedDir is testdata/bench, seen from this package.
var committedDir = filepath.Join("..", "..", "..", "testdata", "bench")

// committed reads every committed fixture, by file name.
func committed(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(committedDir, "*.json"))
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		files[filepath.Base(p)] = data
	}
	return files
}

// request is the part of a fixture's AdmissionReview the tests look at.
type request struct {
	UID       string `json:"uid"`
	Operation string `json:"operation"`
	UserInfo  struct {
		Username string   `json:"username"`
		UID      string   `json:"uid"`
		Groups   []string `json:"groups"`
	} `json:"userInfo"`
	Object    json.RawMessage `json:"object"`
	OldObject json.RawMessage `json:"oldObject"`
	DryRun    *bool           `json:"dryRun"`
}

func decodeRequest(t *testing.T, data []byte) request {
	t.Helper()
	var review struct {
		APIVersion string  `json:"apiVersion"`
		Kind       string  `json:"kind"`
		Request    request `json:"request"`
	}
	require.NoError(t, json.Unmarshal(data, &review))
	require.Equal(t, "admission.k8s.io/v1", review.APIVersion)
	require.Equal(t, "AdmissionReview", review.Kind)
	return review.Request
}

// annotationsPath is where the user.info annotation lives for each object.
var annotationsPath = map[string][]string{
	"pod-small":  {"metadata", "annotations"},
	"pod-large":  {"metadata", "annotations"},
	"deployment": {"spec", "template", "metadata", "annotations"},
}

// annotations returns the annotation map of object at path, nil if absent.
func annotations(t *testing.T, object json.RawMessage, path []string) map[string]any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(object, &v))
	for _, key := range path {
		m, ok := v.(map[string]any)
		require.True(t, ok, "object at %s is not a JSON object", key)
		if v, ok = m[key]; !ok {
			return nil
		}
	}
	m, ok := v.(map[string]any)
	require.True(t, ok, "annotations are not a JSON object")
	return m
}

// split returns the object and case of a fixture file name.
func split(t *testing.T, name string) (subject, c string) {
	t.Helper()
	base := strings.TrimSuffix(name, ".json")
	for _, c := range cases {
		if s, ok := strings.CutSuffix(base, "-"+c); ok {
			return s, c
		}
	}
	t.Fatalf("%s: no known case in the file name", name)
	return "", ""
}

func TestCommittedFixturesAreGenerated(t *testing.T) {
	t.Parallel()
	generated, err := generate()
	require.NoError(t, err)
	files := committed(t)

	var names []string
	for _, f := range generated {
		names = append(names, f.name)
		got, ok := files[f.name]
		if !assert.True(t, ok, "%s is missing from testdata/bench: run `cd bench && go run ./cmd/benchfixtures`", f.name) {
			continue
		}
		assert.True(t, string(f.data) == string(got),
			"testdata/bench/%s differs from the generator's output: run `cd bench && go run ./cmd/benchfixtures`", f.name)
	}
	for name := range files {
		assert.Contains(t, names, name, "testdata/bench/%s is not generated: remove it or add it to the generator", name)
	}
	assert.Len(t, names, 9)
}

func TestGenerateIsDeterministic(t *testing.T) {
	t.Parallel()
	first, err := generate()
	require.NoError(t, err)
	second, err := generate()
	require.NoError(t, err)
	assert.Equal(t, first, second)
}

func TestFixtureSizes(t *testing.T) {
	t.Parallel()
	const kb = 1024
	// Sizes of request.object (an UPDATE review carries it twice).
	bounds := map[string][2]int{
		"pod-small":  {3 * kb, 5 * kb},
		"pod-large":  {45 * kb, 60 * kb},
		"deployment": {3 * kb, 7 * kb},
	}
	for name, data := range committed(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			subject, c := split(t, name)
			req := decodeRequest(t, data)
			b := bounds[subject]
			assert.GreaterOrEqual(t, len(req.Object), b[0], "object size")
			assert.LessOrEqual(t, len(req.Object), b[1], "object size")
			if subject == "pod-large" && c != caseUnchanged {
				assert.GreaterOrEqual(t, len(data), b[0], "file size")
				assert.LessOrEqual(t, len(data), b[1], "file size")
			}
		})
	}
}

func TestFixtureCases(t *testing.T) {
	t.Parallel()
	uids := map[string]string{}
	for name, data := range committed(t) {
		req := decodeRequest(t, data)
		require.NotContains(t, uids, req.UID, "%s reuses the uid of %s", name, uids[req.UID])
		uids[req.UID] = name
	}
	for name, data := range committed(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			subject, c := split(t, name)
			req := decodeRequest(t, data)
			assert.Equal(t, "alice", req.UserInfo.Username)
			assert.Equal(t, "uid-alice", req.UserInfo.UID)
			assert.Equal(t, []string{"dev", "system:authenticated"}, req.UserInfo.Groups)
			require.NotNil(t, req.DryRun)
			assert.False(t, *req.DryRun)

			got := annotations(t, req.Object, annotationsPath[subject])
			switch c {
			case caseInject:
				assert.Equal(t, "CREATE", req.Operation)
				assert.NotContains(t, got, userInfoKey)
				assert.JSONEq(t, "null", string(req.OldObject))
			case casePresent:
				assert.Equal(t, "CREATE", req.Operation)
				assert.Equal(t, userInfoValue, got[userInfoKey])
				assert.JSONEq(t, "null", string(req.OldObject))
			case caseUnchanged:
				assert.Equal(t, "UPDATE", req.Operation)
				assert.Equal(t, userInfoValue, got[userInfoKey])
				assert.Equal(t, string(req.Object), string(req.OldObject), "object and oldObject are byte for byte equal")
			}
		})
	}
}

// policyModule is the module the verdicts are checked with: $POLICY_WASM
// (a fresh build, set by `make test`), else the one embedded in the CLI.
func policyModule(t *testing.T) []byte {
	t.Helper()
	path := os.Getenv("POLICY_WASM")
	if path == "" {
		path = filepath.Join("..", "..", "..", "cmd", "yunikorn-userinfo", "policy.wasm")
	}
	wasm, err := os.ReadFile(path)
	require.NoError(t, err, "read policy module")
	return wasm
}

// TestFixtureVerdicts checks that each fixture gets the verdict its case
// promises from the real policy: create-inject a patch that adds exactly the
// annotation, the others allowed without a patch.
func TestFixtureVerdicts(t *testing.T) {
	t.Parallel()
	e, err := engine.New(t.Context(), policyModule(t), engine.Options{MaxInstances: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(context.WithoutCancel(t.Context())) })

	files := committed(t)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		t.Run(name, func(t *testing.T) {
			subject, c := split(t, name)
			req, err := admission.ParseReview(files[name])
			require.NoError(t, err)
			resp, err := admission.Evaluate(t.Context(), e.Validate, req, json.RawMessage("{}"))
			require.NoError(t, err)
			require.True(t, resp.Allowed, "allowed: %+v", resp.Status)
			assert.Equal(t, req.UID, resp.UID)
			assert.Nil(t, resp.Status)
			if c != caseInject {
				assert.Nil(t, resp.Patch, "no patch: %s", resp.Patch)
				return
			}
			require.NotNil(t, resp.Patch)
			patch, err := jsonpatch.DecodePatch(resp.Patch)
			require.NoError(t, err)
			patched, err := patch.Apply(req.Object)
			require.NoError(t, err)

			// What the object must become: the same, plus the annotation.
			var want map[string]any
			require.NoError(t, json.Unmarshal(req.Object, &want))
			m := want
			for _, key := range annotationsPath[subject] {
				next, ok := m[key].(map[string]any)
				if !ok {
					next = map[string]any{}
					m[key] = next
				}
				m = next
			}
			m[userInfoKey] = userInfoValue
			wantJSON, err := json.Marshal(want)
			require.NoError(t, err)
			assert.JSONEq(t, string(wantJSON), string(patched))
		})
	}
}

func TestUUID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		seed string
	}{
		{name: "request", seed: "request/pod-small-create-inject"},
		{name: "object", seed: "object/pod-small"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := uuid(tc.seed)
			assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, got)
			assert.Equal(t, got, uuid(tc.seed))
			assert.NotEqual(t, got, uuid(tc.seed+"x"))
		})
	}
}
