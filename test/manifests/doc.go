// Package manifests holds the tests of every YAML file in the repository:
// the Kubernetes manifests under deploy/ (decoded strictly into the
// Kubernetes, cert-manager, Kubewarden and kustomize Go types), metadata.yml,
// the Artifact Hub files, and the consistency checks between them (webhook
// and policy rules against metadata.yml, probes against ports, selectors
// against labels, match conditions evaluated by the API server's own code).
//
// It is a separate Go module so that these heavy dependencies stay out of
// the policy and host module. Run it from the repository root with
//
//	cd test/manifests && go test ./...
//
// A YAML file that no validator claims fails the tests: a new file has to
// be given a validator (files_test.go) before it can be committed.
package manifests
