// Package kubecap answers Kubewarden's Kubernetes host capabilities, the
// way policy-server answers them, so that context-aware policies run the
// same in this host:
//
//   - kubewarden/kubernetes/get_resource: one object, by apiVersion, kind,
//     name and (for namespaced kinds) namespace;
//   - kubewarden/kubernetes/list_resources_by_namespace and
//     list_resources_all: a "<Kind>List" of the objects, optionally
//     filtered by label and field selectors;
//   - kubewarden/kubernetes/can_i: a SubjectAccessReview's status.
//
// Reads are limited to the contextAwareResources a module's metadata
// declares; anything else is refused with policy-server's message. Objects
// come from a [Backend]: [Cluster] watches the declared resources of a real
// API server (one informer each, so an admission reads a cache, not the
// API server) and asks it SubjectAccessReviews; [Replay] answers from a
// directory of objects, the way kwctl replays recorded answers, so
// fixtures stay offline.
//
// The payloads and answers follow policy-evaluator's callback handler
// (kubewarden-controller, crates/policy-evaluator/src/callback_handler)
// and policy-sdk-go's capabilities/kubernetes types.
package kubecap
