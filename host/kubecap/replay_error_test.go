package kubecap

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplay_getError: an object annotated ReplayErrorAnnotation is not
// served: its get fails with the annotation's text, not as not found; its
// neighbours are served as usual.
func TestReplay_getError(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: refused
  namespace: ns
  annotations:
    `+ReplayErrorAnnotation+`: 'configmaps "refused" is forbidden'
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: served
  namespace: ns
data: {k: v}
`), 0o600))
	r, err := LoadReplay(dir)
	require.NoError(t, err)
	cm := Resource{APIVersion: "v1", Kind: "ConfigMap"}
	_, err = r.Get(t.Context(), cm, "ns", "refused", false)
	require.Error(t, err)
	assert.Equal(t, `configmaps "refused" is forbidden`, err.Error())
	assert.False(t, errors.Is(err, ErrNotFound))
	obj, err := r.Get(t.Context(), cm, "ns", "served", false)
	require.NoError(t, err)
	assert.Contains(t, string(obj), `"k":"v"`)
}
