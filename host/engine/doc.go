// Package engine runs Kubewarden waPC policy modules on wazero.
//
// An [Engine] compiles a module once and evaluates it on a bounded set of
// instances, each with its own linear memory capped by
// [Options.MemoryLimitPages]. Every invocation gets a deadline
// ([Options.Timeout]); an instance that trapped, timed out or exited is
// discarded and a fresh one is created on the next invocation.
//
// A running guest is stopped at its deadline without wazero's per-iteration
// context checks, which cost most of a JSON-scanning guest's time: the
// module is rewritten on load to count its loop iterations and calls
// against a budget (internal/budget) that the engine zeroes when the
// deadline passes, and that also bounds the work of one call
// ([Options.Budget]). Modules the rewriter does not support run under
// wazero's checks instead ([Engine.Metered] tells which).
//
// The engine is generic: it runs any Kubewarden waPC module, and starts
// each instance exactly as Kubewarden's policy-server does: _start if
// exported, then wapc_init if exported, never _initialize. That covers the
// shapes TinyGo produces for Kubewarden:
//
//   - default (command) builds, whose _start runs main and then calls WASI
//     proc_exit(0): the host's proc_exit unwinds without closing the module;
//   - -buildmode=wasi-legacy builds, whose _start returns normally.
//
// A reactor build (-buildmode=c-shared, or standard Go) that relies on
// _initialize is not initialised by policy-server, nor here: New logs a
// warning when a module exports _initialize, and such a module fails to
// start rather than working here and failing in the cluster.
//
// Guest host calls (waPC __host_call) are answered by [Options.HostCalls];
// the default, [KubewardenHostCalls], forwards policy log lines to the
// logger and refuses every other capability.
//
// See https://wapc.io/docs/spec/ and
// https://docs.kubewarden.io/reference/spec/intro-spec
package engine
