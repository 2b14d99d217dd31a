//go:build tools

// Package jobset pins the JobSet controller's main package, which the
// real-cluster suite builds from this module (e2e/internal/kbuild).
package jobset

import _ "sigs.k8s.io/jobset"
