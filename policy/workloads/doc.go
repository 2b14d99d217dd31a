// Package workloads holds the rules of the policy's workload kinds
// (docs/BEHAVIOUR.md §3.3) once, for the policy module and the host's
// tools: the built-in kinds and where their pod metadata is, the presets,
// the grammar of annotation paths and the walk that finds the templates
// a path names in an object, and the reading of settings.workloads.
//
// It reads raw JSON with gjson and is written for TinyGo (no reflection,
// no goroutines). The host marshals a decoded object to JSON and reads it
// with the same walk.
package workloads
