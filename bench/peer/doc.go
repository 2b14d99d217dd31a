// Package peer compares, end to end per admission and in process, this
// project's webhook with Apache YuniKorn's own admission controller, on the
// shared fixtures in testdata/bench.
//
// It has only tests and benchmarks. Each admission is one HTTP request
// (POST /mutate, Content-Type application/json, the fixture's
// AdmissionReview as body) given to the implementation's http.Handler
// through net/http/httptest, without a network or TLS:
//
//   - impl=ours: host/webhook.Handler over host/engine running the policy
//     module embedded in the CLI (cmd/yunikorn-userinfo/policy.wasm, or
//     $POLICY_WASM), wired as `serve` wires it: settings {} checked with
//     validate_settings, a settings store, as many instances as GOMAXPROCS.
//   - impl=yunikorn: the http.ServeMux of yunikorn-k8shim's admission
//     controller main (pkg/cmd/admissioncontroller), routing /mutate to the
//     exported (*admission.AdmissionController).Serve, with the controller
//     built the way that main builds it: admission.InitAdmissionController
//     over conf.NewAdmissionControllerConf (configuration maps absent, so
//     every setting at its default) and the priority-class and namespace
//     caches with no informer (no PriorityClass or Namespace known).
//
// The module's go.mod keeps YuniKorn's dependencies (Kubernetes client
// libraries) out of the main module. See bench/README.md for what each
// implementation does on each fixture and for the caveats.
package peer
