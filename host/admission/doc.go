// Package admission translates between Kubernetes admission objects and the
// Kubewarden waPC policy protocol.
//
// It is generic over Kubewarden policies and knows nothing about Wasm: the
// caller runs the module. Callers read a request with [ParseRequest] (a bare
// AdmissionRequest or a full AdmissionReview, as `kwctl run -r` accepts
// both) or [ParseReview] (the webhook's strict AdmissionReview), then call
// [Evaluate] with the module's validate function. Evaluate:
//
//  1. builds the payload of `validate` ([ValidationPayload]) by concatenating
//     raw bytes, so the policy sees exactly what the API server sent (no
//     float rounding of large integers, no lost fields);
//  2. reads the policy's answer ([ParseValidationResponse]);
//  3. turns it into an AdmissionResponse, computing the JSONPatch against the
//     original request.object bytes, in time linear in their size and under
//     the caller's deadline, so that the patch holds only the changes the
//     policy made; a failed evaluation is [Errored] with code 500.
//
// [Review] wraps a response for the webhook; [CreatePatch] is the differ on
// its own.
//
// See https://docs.kubewarden.io/reference/spec/validating-policies and
// https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#response
package admission
