package host

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportBoundary fails when a package of the generic host depends on
// the policy, its rule packages or the YuniKorn tools: the host must stay a
// host for any Kubewarden waPC module.
func TestImportBoundary(t *testing.T) {
	t.Parallel()
	const mod = "github.com/yunikorn-userinfo/userinfo/"
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-test",
		"-f", "{{.ImportPath}}", "./...").Output()
	require.NoError(t, err, "go list -deps ./host/...")
	var seen int
	for dep := range strings.Lines(string(out)) {
		dep = strings.TrimSpace(dep)
		if !strings.HasPrefix(dep, mod) {
			continue
		}
		seen++
		rel := strings.TrimPrefix(dep, mod)
		for _, banned := range []string{"policy", "internal/yunikorn", "cmd"} {
			assert.False(t, rel == banned || strings.HasPrefix(rel, banned+"/"),
				"the generic host depends on %s", dep)
		}
	}
	assert.Greater(t, seen, 5, "go list found the host's own packages")
}
