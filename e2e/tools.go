//go:build tools

// The cluster binaries the harness builds (internal/kbuild). Importing their
// main packages here keeps them, and exactly the versions go.mod pins, in the
// module graph; the build tag keeps them out of every normal build.
package e2e

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
