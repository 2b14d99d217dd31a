// Command policy is the yunikorn.apache.org/user.info admission policy, a
// Kubewarden waPC module built with TinyGo. It records who submitted a Pod
// or workload as the annotation YuniKorn reads for queues, ACLs and quotas,
// and refuses any attempt to forge or change it. docs/BEHAVIOUR.md is the
// contract it implements; RATIONALE.md says why it is built this way.
package main

import (
	_ "github.com/kubewarden/policy-sdk-go/protocol" // registers protocol_version ("v1") in the Wasm build

	wapc "github.com/wapc/wapc-guest-tinygo"
)

func main() {
	logSink = func(line []byte) {
		// A failed log call must not change the decision.
		_, _ = wapc.HostCall("kubewarden", "tracing", "log", line)
	}
	wapc.RegisterFunctions(wapc.Functions{
		"validate":          validate,
		"validate_settings": validateSettings,
	})
}
