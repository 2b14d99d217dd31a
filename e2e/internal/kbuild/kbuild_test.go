package kbuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersionLDFlags(t *testing.T) {
	t.Parallel()
	got, err := versionLDFlags("v1.37.1")
	require.NoError(t, err)
	for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
		assert.Contains(t, got, "-X "+pkg+".gitVersion=v1.37.1")
		assert.Contains(t, got, "-X "+pkg+".gitMajor=1 ")
		assert.Contains(t, got, "-X "+pkg+".gitMinor=37 ")
		assert.Contains(t, got, "-X "+pkg+".gitTreeState=clean")
	}
	_, err = versionLDFlags("latest")
	assert.Error(t, err)
}

// Only a directory with the stamp and all three binaries counts as built.
func TestFinished(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	names := []string{Etcd, KubeAPIServer, KubeControllerManager, stampFile}
	for i, name := range names {
		assert.Falsef(t, finished(dir), "with %d of %d files", i, len(names))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o600))
	}
	assert.True(t, finished(dir))
}

// The cache key names the versions and go.sum, so a changed pin or Go
// release builds afresh.
func TestComputeKey(t *testing.T) {
	t.Parallel()
	opts := Options{ModuleDir: filepath.Join("..", "..")}
	require.NoError(t, opts.setDefaults())
	k, err := computeKey(t.Context(), opts)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(k.name, k.kubernetes+"-etcd"+strings.TrimPrefix(k.etcd, "v")+"-go"), k.name)
	assert.Equal(t, k.goSum[:12], k.name[len(k.name)-12:])
}
