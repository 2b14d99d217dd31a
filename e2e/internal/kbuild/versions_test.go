package kbuild

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each version the suite offers builds from a module that pins exactly
// that Kubernetes minor version, so E2E_KUBE_VERSION=1.33 can never run
// another one.
func TestKubeModuleDir_pinsTheVersion(t *testing.T) {
	t.Parallel()
	e2eDir := filepath.Join("..", "..")
	require.Equal(t, []string{"1.33", "1.35", "1.36", DefaultKubeVersion}, KubeVersions())
	for _, v := range KubeVersions() {
		dir, err := KubeModuleDir(e2eDir, v)
		require.NoError(t, err)
		opts := Options{ModuleDir: dir}
		require.NoError(t, opts.setDefaults())
		k, err := computeKey(t.Context(), opts)
		require.NoError(t, err, v)
		assert.Truef(t, strings.HasPrefix(k.kubernetes, "v"+v+"."), "%s builds %s", v, k.kubernetes)
		assert.Truef(t, strings.HasPrefix(k.name, k.kubernetes+"-"), "the cache key %s names the version", k.name)
	}
	dir, err := KubeModuleDir(e2eDir, "")
	require.NoError(t, err)
	assert.Equal(t, e2eDir, dir, "unset: the e2e module's own pins")
	dir, err = KubeModuleDir(e2eDir, "v1.33")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(e2eDir, "kube133"), dir)
	_, err = KubeModuleDir(e2eDir, "1.30")
	assert.ErrorContains(t, err, `E2E_KUBE_VERSION="1.30": not a Kubernetes version the suite builds (want one of 1.33, 1.35, 1.36, 1.37)`)
}
