// Package admission translates between Kubernetes admission objects and the
// Kubewarden waPC policy protocol.
//
// It is generic over Kubewarden policies and knows nothing about Wasm: the
// caller runs the module. The flow is:
//
//  1. [ParseRequest] reads a bare AdmissionRequest or a full AdmissionReview,
//     as `kwctl run -r` accepts both, and keeps the request bytes verbatim.
//  2. [ValidationPayload] builds the payload for the policy's `validate`
//     operation by concatenating raw bytes, so the policy sees exactly what the
//     API server sent (no float rounding of large integers, no lost fields).
//  3. [ParseValidationResponse] reads the policy's answer.
//  4. [Respond] turns it into an AdmissionResponse, computing the JSONPatch with
//     [CreatePatch] against the original request.object bytes so that the patch
//     holds only the changes the policy made. [Errored] reports evaluation
//     failures, and [Review] wraps a response for the webhook.
//
// See https://docs.kubewarden.io/reference/spec/validating-policies and
// https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#response
package admission
