package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// TestRun_scaledRayCluster runs the embedded policy, as `run` does with
// its default limits, on a RayCluster CREATE with 10,000 worker groups
// (3 MB): the answer must admit it with exactly one patch operation per
// template, in document order, each adding the annotation where the
// template lacks it (the annotation, its map, or the metadata holding
// it), and applying the patch must give the object the policy computed.
// How long it takes is BenchmarkScaling's (and docs/PERFORMANCE.md's) to
// show; before the fix this request ran out of the work budget (code 500).
func TestRun_scaledRayCluster(t *testing.T) {
	const n = 10000
	var shape fixtures.Scaled
	for _, s := range fixtures.ScaledShapes() {
		if s.Name == "RayCluster/workerGroups" {
			shape = s
		}
	}
	require.NotEmpty(t, shape.Name)
	dir := t.TempDir()
	reqPath, settingsPath := filepath.Join(dir, "request.json"), filepath.Join(dir, "settings.json")
	require.NoError(t, os.WriteFile(reqPath, shape.Request(n), 0o600))
	require.NoError(t, os.WriteFile(settingsPath, []byte(shape.Settings()), 0o600))

	res := runCLI(t, "", "run", "-r", reqPath, "-s", settingsPath)
	require.Equal(t, 0, res.code, res.stderr)
	var resp struct {
		Allowed   bool   `json:"allowed"`
		PatchType string `json:"patchType"`
		Patch     string `json:"patch"`
		Status    *struct {
			Message string `json:"message"`
			Code    int    `json:"code"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &resp))
	require.True(t, resp.Allowed, "status: %+v", resp.Status)
	assert.Equal(t, "JSONPatch", resp.PatchType)
	patch, err := base64.StdEncoding.DecodeString(resp.Patch)
	require.NoError(t, err)

	// The head group's template is template 0, worker group i's template
	// i+1; template k has an annotations map when k%3 is 0, metadata
	// without one when it is 1, no metadata when it is 2.
	value, err := json.Marshal(shape.Annotation(n))
	require.NoError(t, err)
	var want bytes.Buffer
	// The RayCluster records its submitter on its own metadata too, first
	// in document order.
	want.WriteString(`[{"op":"add","path":"/metadata/annotations","value":{"yunikorn.apache.org/user.info":` + string(value) + `}}`)
	for k := 0; k <= n; k++ {
		want.WriteByte(',')
		path := "/spec/headGroupSpec/template"
		if k > 0 {
			path = "/spec/workerGroupSpecs/" + strconv.Itoa(k-1) + "/template"
		}
		switch k % 3 {
		case 0:
			want.WriteString(`{"op":"add","path":"` + path + `/metadata/annotations/yunikorn.apache.org~1user.info","value":` + string(value) + `}`)
		case 1:
			want.WriteString(`{"op":"add","path":"` + path + `/metadata/annotations","value":{"yunikorn.apache.org/user.info":` + string(value) + `}}`)
		case 2:
			want.WriteString(`{"op":"add","path":"` + path + `/metadata","value":{"annotations":{"yunikorn.apache.org/user.info":` + string(value) + `}}}`)
		}
	}
	want.WriteByte(']')
	if !bytes.Equal(want.Bytes(), patch) {
		i := 0
		for i < len(patch) && i < want.Len() && patch[i] == want.Bytes()[i] {
			i++
		}
		require.Failf(t, "patch differs", "at byte %d of %d: got %.200q, want %.200q", i, want.Len(), patch[i:], want.Bytes()[i:])
	}

	ops, err := jsonpatch.DecodePatch(patch)
	require.NoError(t, err)
	patched, err := ops.Apply(shape.Object(n))
	require.NoError(t, err)
	assert.JSONEq(t, string(shape.Mutated(n)), string(patched), "the patched object is the one the policy returned")
}
