//go:build tools

// Package kuberay pins the KubeRay operator's main package, which the
// real-cluster suite builds from this module (e2e/internal/kbuild).
package kuberay

import _ "github.com/ray-project/kuberay/ray-operator"
