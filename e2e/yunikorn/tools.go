//go:build tools

// Package yunikorn pins the YuniKorn programs the real-cluster suite builds
// from this module (see e2e/internal/kbuild): the scheduler and the
// admission controller, both from k8shim.
package yunikorn

import (
	_ "github.com/apache/yunikorn-k8shim/pkg/cmd/admissioncontroller"
	_ "github.com/apache/yunikorn-k8shim/pkg/cmd/shim"
)
