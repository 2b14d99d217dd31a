// Command policy is the yunikorn.apache.org/user.info admission policy, a
// Kubewarden waPC module built with TinyGo. It records who submitted a Pod
// or workload as the annotation YuniKorn reads for queues, ACLs and quotas,
// and refuses any attempt to forge or change it. docs/BEHAVIOUR.md is the
// contract it implements; RATIONALE.md says why it is built this way.
//
// The Wasm entry points are in guest_wasm.go (the waPC ABI) and guest.go
// (the operations); natively the package is its tests.
package main
