// Package e2e holds the real-cluster end-to-end tests of yunikorn-userinfo:
// a real etcd, kube-apiserver and kube-controller-manager (built from their
// Go modules by internal/kbuild, run on 127.0.0.1 by internal/cluster) call
// `yunikorn-userinfo serve` as their admission webhook, and the tests in
// scenarios/ check the objects the API server stores.
//
// Run them with `make e2e` from the repository root, or, with the CLI built
// (`make build`), `go test -v -count=1 -timeout 30m ./...` in this directory.
// The cluster binaries are built once into a cache outside the clone
// ($YUNIKORN_E2E_CACHE, default ~/.cache/yunikorn-userinfo/e2e).
package e2e
