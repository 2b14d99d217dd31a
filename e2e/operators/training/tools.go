//go:build tools

// Package training pins the Kubeflow training operator's main package,
// which the real-cluster suite builds, patched to listen on loopback, from
// this module (e2e/internal/kbuild).
package training

import _ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
