// Package perfkit is the benchmark tooling of the project: it measures what
// the Go benchmarks and the load generator cannot (cold start of `serve`,
// memory over a soak), reads every result the bench scripts leave in one
// directory (go test -bench text, loadgen JSON reports, cold start and soak
// files) and turns them into the Markdown tables of docs/PERFORMANCE.md.
//
// cmd/perfkit is its command line; hack/bench.sh and hack/soak.sh drive it.
package perfkit
