package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestReleaseWorkflow: the release workflow runs on v* tags, is made of
// the Makefile's own targets (each one it runs exists; it runs the change
// path, .ci/run, then make lab and make release), pushes with pinned
// registry tools, and builds Helm's CLI at the version whose libraries
// render the chart in these tests.
func TestReleaseWorkflow(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, ".github/workflows/release.yml"))
	require.NoError(t, err)
	var wf struct {
		// YAML 1.1, which sigs.k8s.io/yaml reads, takes the key on for true.
		On struct {
			Push struct {
				Tags []string `json:"tags"`
			} `json:"push"`
		} `json:"true"`
		Env  map[string]string `json:"env"`
		Jobs map[string]struct {
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &wf))
	assert.Equal(t, []string{"v*"}, wf.On.Push.Tags)

	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	require.NoError(t, err)
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-zA-Z0-9_.-]+):.*## `).FindAllStringSubmatch(string(makefile), -1) {
		targets[m[1]] = true
	}
	ran := map[string]bool{}
	ci := false
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			ci = ci || strings.Contains(s.Run, "bash .ci/run")
			for _, m := range regexp.MustCompile(`(?m)\bmake ([a-z][a-zA-Z0-9_.-]*)`).FindAllStringSubmatch(s.Run, -1) {
				assert.True(t, targets[m[1]], "the workflow runs make %s, which the Makefile does not document", m[1])
				ran[m[1]] = true
			}
		}
	}
	assert.True(t, ci, "the workflow runs the change path, .ci/run, as CI does")
	for _, want := range []string{"lab", "release"} {
		assert.True(t, ran[want], "the workflow runs make %s", want)
	}

	gomod, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*helm\.sh/helm/v4 (v\S+)`).FindStringSubmatch(string(gomod))
	require.NotNil(t, m, "test/manifests pins helm.sh/helm/v4")
	assert.Equal(t, "helm.sh/helm/v4/cmd/helm@"+m[1], wf.Env["HELM_MODULE"], "the CLI that packages the chart is the Helm that renders it here")
	assert.False(t, strings.Contains(string(raw), "@latest"), "every tool is pinned")
}
