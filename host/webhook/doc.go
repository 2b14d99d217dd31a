// Package webhook serves a Kubewarden waPC policy as a Kubernetes admission
// webhook over HTTPS.
//
// A [Handler] answers POST /mutate with an AdmissionReview
// (admission.k8s.io/v1) for every request, whatever it held, and serves
// /healthz and /readyz. It evaluates through any [Policy], normally an
// *engine.Engine, with a deadline per evaluation that the API server's own
// timeout can only shorten, every request bounded in memory (a byte budget
// for bodies), concurrency and time. A [Server] runs the handler and the
// Prometheus endpoint and shuts down gracefully. [Metrics] are the
// Prometheus metrics.
//
// [Run] assembles all of it from [RunOptions], as `yunikorn-userinfo serve`
// does: the module compiled into an engine, settings and TLS files reloaded
// as they change, the handler, the metrics and the server. Callers that need
// other wiring compose the parts themselves.
//
// The package is generic over Kubewarden policies; it never looks inside
// the objects it admits beyond the fields it logs.
//
// See https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/
package webhook
