package kbuild

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPatchRESTAddr(t *testing.T) {
	t.Parallel()
	core := t.TempDir()
	ws := filepath.Join(core, "pkg", "webservice")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	src := "package webservice\n\nfunc start() {\n\ts := &http.Server{\n\t\t" + restListen + "\n\t}\n}\n"
	require.NoError(t, os.WriteFile(filepath.Join(ws, "webservice.go"), []byte(src), 0o444))

	require.NoError(t, patchRESTAddr(core))
	got, err := os.ReadFile(filepath.Join(ws, "webservice.go"))
	require.NoError(t, err)
	assert.Contains(t, string(got), "Addr:              restAddr(),")
	assert.NotContains(t, string(got), `":9080"`)
	added, err := os.ReadFile(filepath.Join(ws, "e2e_rest_addr.go"))
	require.NoError(t, err)
	assert.Contains(t, string(added), `os.Getenv("YUNIKORN_REST_ADDR")`)
	assert.Contains(t, string(added), `return "127.0.0.1:9080"`)

	// A core whose listener changed is an error, never a silent build that
	// listens on every interface.
	require.NoError(t, os.WriteFile(filepath.Join(ws, "webservice.go"), []byte("package webservice\n"), 0o644))
	assert.ErrorContains(t, patchRESTAddr(core), "not found once")
}
