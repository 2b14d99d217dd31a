//go:build tools

// Package kube136 pins the v1.36 cluster binaries' main packages, which the
// real-cluster suite builds from this module (e2e/internal/kbuild), so go.mod
// keeps them and exactly these versions in the module graph.
package kube136

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
