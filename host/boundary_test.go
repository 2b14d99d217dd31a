package host

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportBoundary fails when the generic host depends on YuniKorn: its
// packages may import nothing from policy/ (the policy and its rule
// packages), internal/yunikorn/ or cmd/. Its tests may read the shared
// fixture table (internal/fixtures, which names the annotation through
// policy/userinfo), but never the policy itself, the YuniKorn tools or
// the CLI.
func TestImportBoundary(t *testing.T) {
	t.Parallel()
	const mod = "github.com/yunikorn-userinfo/userinfo/"
	for _, tc := range []struct {
		name   string
		args   []string
		banned []string
		exact  []string
	}{
		{"packages", []string{"list", "-deps", "-f", "{{.ImportPath}}", "./..."}, []string{"policy", "internal/yunikorn", "cmd"}, nil},
		{"tests", []string{"list", "-deps", "-test", "-f", "{{.ImportPath}}", "./..."}, []string{"internal/yunikorn", "cmd"}, []string{"policy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.CommandContext(t.Context(), "go", tc.args...).Output()
			require.NoError(t, err, "go %s", strings.Join(tc.args, " "))
			var seen int
			for dep := range strings.Lines(string(out)) {
				dep = strings.TrimSpace(dep)
				if !strings.HasPrefix(dep, mod) {
					continue
				}
				seen++
				rel := strings.TrimPrefix(dep, mod)
				rel, _, _ = strings.Cut(rel, " ") // "pkg [pkg.test]"
				for _, b := range tc.banned {
					assert.False(t, rel == b || strings.HasPrefix(rel, b+"/"), "the generic host (%s) depends on %s", tc.name, dep)
				}
				for _, b := range tc.exact {
					assert.NotEqual(t, b, rel, "the generic host (%s) depends on %s", tc.name, dep)
				}
			}
			assert.Greater(t, seen, 5, "go list found the host's own packages")
		})
	}
}
