package peer

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSameDependencyVersions checks that every module our handler is built
// from here is at the version the main module requires: building YuniKorn
// alongside must not silently give our side newer dependencies (wazero, the
// Prometheus client …) than the product ships with.
func TestSameDependencyVersions(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	require.NoError(t, err, "read the main module's go.mod")
	required := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && strings.HasPrefix(f[1], "v") && strings.Contains(f[0], ".") {
			required[f[0]] = f[1]
		}
	}
	require.NotEmpty(t, required["github.com/tetratelabs/wazero"], "the main module requires wazero")

	// The modules of every package our side links, as this module resolves
	// them (test binaries carry no module list, so ask the go command).
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps",
		"-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}",
		"github.com/yunikorn-userinfo/userinfo/host/webhook",
		"github.com/yunikorn-userinfo/userinfo/host/engine",
		"github.com/yunikorn-userinfo/userinfo/host/settings",
	).Output()
	require.NoError(t, err, "go list")
	shared := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) != 2 || shared[f[0]] {
			continue
		}
		if want, ok := required[f[0]]; ok {
			shared[f[0]] = true
			assert.Equal(t, want, f[1], "%s: the main module requires %s", f[0], want)
		}
	}
	assert.Contains(t, shared, "github.com/tetratelabs/wazero")
	assert.Contains(t, shared, "github.com/prometheus/client_golang")
}
