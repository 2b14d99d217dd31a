//go:build tools

// Package yunikorn pins the YuniKorn scheduler's main package, which the
// real-cluster suite builds from this module (see e2e/internal/ykbuild).
package yunikorn

import _ "github.com/apache/yunikorn-k8shim/pkg/cmd/shim"
