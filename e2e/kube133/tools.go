//go:build tools

// Package kube133 pins the v1.33 cluster binaries' main packages, which the
// real-cluster suite builds from this module (e2e/internal/kbuild), so go.mod
// keeps them and exactly these versions in the module graph.
package kube133

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
