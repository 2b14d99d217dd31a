package kubecap

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	sdkkube "github.com/kubewarden/policy-sdk-go/pkg/capabilities/kubernetes"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

// granted are the kinds the tests' policy declares.
var granted = []Resource{{"v1", "Pod"}, {"v1", "ConfigMap"}, {"v1", "Namespace"}}

// capabilityCases are payloads and the answers policy-server gives them
// (policy-evaluator's callback handler and kubernetes client), answered
// here from testdata/cluster. want is compared as JSON; wantErr exactly.
var capabilityCases = []struct {
	name, op, payload string
	want              string
	wantErr           string
}{
	{name: "get a namespaced object", op: OpGetResource,
		payload: `{"api_version":"v1","kind":"Pod","name":"web","namespace":"default","disable_cache":false}`,
		want:    `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]},"status":{"phase":"Running"}}`},
	{name: "get a cluster-scoped object", op: OpGetResource,
		payload: `{"api_version":"v1","kind":"Namespace","name":"spark","disable_cache":true}`,
		want:    `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"spark","labels":{"team":"data"}}}`},
	{name: "get with field masks keeps apiVersion, kind and metadata", op: OpGetResource,
		payload: `{"api_version":"v1","kind":"Pod","name":"web","namespace":"default","disable_cache":false,"field_masks":["spec.containers.image"]}`,
		want:    `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},"spec":{"containers":[{"image":"nginx"}]}}`},
	{name: "get a namespaced kind without a namespace", op: OpGetResource,
		payload: `{"api_version":"v1","kind":"Pod","name":"web","disable_cache":false}`,
		wantErr: "Resource v1/Pod is namespaced, but no namespace was provided"},
	{name: "get a missing object", op: OpGetResource,
		payload: `{"api_version":"v1","kind":"Pod","name":"nope","namespace":"default","disable_cache":false}`,
		wantErr: `Cannot find v1/Pod named 'nope' inside of namespace 'Some("default")'`},
	{name: "get a kind the metadata does not declare", op: OpGetResource,
		payload: `{"api_version":"v1","kind":"Secret","name":"token","namespace":"default","disable_cache":false}`,
		wantErr: "Policy has not been granted access to Kubernetes v1/Secret resources. The violation has been reported."},
	{name: "list by namespace", op: OpListResourcesByNamespace,
		payload: `{"api_version":"v1","kind":"Pod","namespace":"spark","label_selector":"spark-role=executor","field_masks":["status.phase"]}`,
		want:    `{"apiVersion":"v1","kind":"PodList","metadata":{},"items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"executor-1","namespace":"spark","labels":{"spark-role":"executor"}},"status":{"phase":"Pending"}}]}`},
	{name: "list by namespace, nothing there", op: OpListResourcesByNamespace,
		payload: `{"api_version":"v1","kind":"Pod","namespace":"empty"}`,
		want:    `{"apiVersion":"v1","kind":"PodList","metadata":{},"items":[]}`},
	{name: "list all with a field selector", op: OpListResourcesAll,
		payload: `{"api_version":"v1","kind":"Pod","field_selector":"status.phase=Running,metadata.namespace!=default","field_masks":["spec.nodeName"]}`,
		want:    `{"apiVersion":"v1","kind":"PodList","metadata":{},"items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"driver","namespace":"spark","uid":"5d1a7b6e-1111-4c6a-9c1e-000000000001","labels":{"spark-role":"driver"},"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"alice\",\"groups\":[\"dev\"]}"}},"spec":{"nodeName":"node-1"}}]}`},
	{name: "list all of an undeclared kind", op: OpListResourcesAll,
		payload: `{"api_version":"apps/v1","kind":"Deployment"}`,
		wantErr: "Policy has not been granted access to Kubernetes apps/v1/Deployment resources. The violation has been reported."},
	{name: "list with a broken label selector", op: OpListResourcesAll,
		payload: `{"api_version":"v1","kind":"Pod","label_selector":"a in (b"}`,
		wantErr: "label_selector: unable to parse requirement: found '', expected: ',' or ')'"},
	{name: "list by namespace without one", op: OpListResourcesByNamespace,
		payload: `{"api_version":"v1","kind":"Pod","namespace":""}`,
		wantErr: "list_resources_by_namespace: namespace is required"},
	{name: "can_i allowed", op: OpCanI,
		payload: `{"subject_access_review":{"groups":["system:authenticated","system:serviceaccounts"],"resource_attributes":{"namespace":"spark","verb":"set","group":"yunikorn.apache.org","resource":"userinfos"},"user":"system:serviceaccount:spark:livy"},"disable_cache":false}`,
		want:    `{"allowed":true,"reason":"RBAC: allowed by RoleBinding \"livy-userinfo/spark\""}`},
	{name: "can_i elsewhere", op: OpCanI,
		payload: `{"subject_access_review":{"groups":["system:authenticated","system:serviceaccounts"],"resource_attributes":{"namespace":"default","verb":"set","group":"yunikorn.apache.org","resource":"userinfos"},"user":"system:serviceaccount:spark:livy"},"disable_cache":true}`,
		want:    `{"allowed":false,"reason":"no SubjectAccessReview in the replay directory matches this request"}`},
	{name: "can_i as policy-server's own test writes it: nulls for the optional members", op: OpCanI,
		payload: `{"subject_access_review":{"groups":null,"resource_attributes":{"group":null,"name":null,"namespace":null,"resource":"pods","subresource":null,"verb":"get","version":null},"user":"test"},"disable_cache":false}`,
		want:    `{"allowed":false,"reason":"no SubjectAccessReview in the replay directory matches this request"}`},
	{name: "can_i for a named user", op: OpCanI,
		payload: `{"subject_access_review":{"groups":["system:authenticated"],"resource_attributes":{"group":"yunikorn.apache.org","name":"carol","namespace":"analytics","resource":"userinfos","verb":"set"},"user":"system:serviceaccount:analytics:notebook"},"disable_cache":false}`,
		want:    `{"allowed":true,"reason":"RBAC: allowed by RoleBinding \"notebook-userinfo/analytics\""}`},
	{name: "can_i in policy-sdk-go v0.13.1's shape (resourceAttributes) is refused as policy-server refuses it", op: OpCanI,
		payload: `{"subject_access_review":{"groups":["g"],"resourceAttributes":{"namespace":"spark","verb":"set","group":"yunikorn.apache.org","resource":"userinfos"},"user":"u"},"disable_cache":false}`,
		wantErr: "can_i: invalid request: missing field `resource_attributes`"},
	{name: "can_i without disable_cache", op: OpCanI,
		payload: `{"subject_access_review":{"groups":null,"resource_attributes":{"resource":"pods","verb":"get"},"user":"u"}}`,
		wantErr: "can_i: invalid request: missing field `disable_cache`"},
	{name: "can_i with a null verb", op: OpCanI,
		payload: `{"subject_access_review":{"groups":null,"resource_attributes":{"resource":"pods","verb":null},"user":"u"},"disable_cache":true}`,
		wantErr: "can_i: invalid request: verb: invalid type: null"},
	{name: "malformed payload", op: OpGetResource, payload: `{"api_version":1}`,
		wantErr: "get_resource: invalid request: json: cannot unmarshal number into Go struct field GetRequest.api_version of type string"},
	{name: "unknown operation", op: "watch", payload: `{}`, wantErr: "unknown operation: watch"},
}

func replayHostCalls(t *testing.T) engine.HostCallHandler {
	t.Helper()
	r, err := LoadReplay("testdata/cluster")
	require.NoError(t, err)
	h, err := HostCalls(Options{Backend: r, Resources: granted})
	require.NoError(t, err)
	return h
}

func TestHostCalls_replay(t *testing.T) {
	checkCapabilityCases(t, replayHostCalls(t), false)
}

// checkCapabilityCases runs the table through h (without the can_i cases
// when skipCanI).
func checkCapabilityCases(t *testing.T, h engine.HostCallHandler, skipCanI bool) {
	t.Helper()
	for _, tc := range capabilityCases {
		if skipCanI && tc.op == OpCanI {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			out, err := h(t.Context(), "kubewarden", "kubernetes", tc.op, []byte(tc.payload))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tc.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(out))
		})
	}
}

// TestHostCalls_otherCapabilities: the rest goes to Next (the default
// handler logs and refuses).
func TestHostCalls_otherCapabilities(t *testing.T) {
	h := replayHostCalls(t)
	out, err := h(t.Context(), "kubewarden", "tracing", "log", []byte(`{"level":"info","message":"hi"}`))
	assert.NoError(t, err)
	assert.Empty(t, out)
	_, err = h(t.Context(), "kubewarden", "net", "v1/dns_lookup_host", []byte(`"example.com"`))
	assert.ErrorContains(t, err, "not available")
}

// TestHostCalls_observe: every call is reported with a bounded operation
// label and its outcome.
func TestHostCalls_observe(t *testing.T) {
	r, err := LoadReplay("testdata/cluster")
	require.NoError(t, err)
	var seen []string
	h, err := HostCalls(Options{Backend: r, Resources: granted, Observe: func(op, outcome string, _ time.Duration) {
		seen = append(seen, op+" "+outcome)
	}})
	require.NoError(t, err)
	ctx := context.Background()
	_, _ = h(ctx, "kubewarden", "kubernetes", OpGetResource, []byte(`{"api_version":"v1","kind":"Pod","name":"web","namespace":"default"}`))
	_, _ = h(ctx, "kubewarden", "kubernetes", OpListResourcesAll, []byte(`{"api_version":"v1","kind":"Secret"}`))
	_, _ = h(ctx, "kubewarden", "kubernetes", "x\x00garbage", []byte(`{}`))
	_, _ = h(ctx, IndexBinding, IndexNamespace, OpIndexValues, []byte(`{"index":"not kept","key":"k","limit":1}`))
	assert.Equal(t, []string{"get_resource ok", "list_resources_all refused", "other error", "index_values missed"}, seen)
}

// TestRequests_policySDK: the payloads policy-sdk-go's helpers send decode
// into these types field for field.
func TestRequests_policySDK(t *testing.T) {
	ns, sel := "spark", "a=b"
	for _, tc := range []struct {
		sdk  any
		into any
		want any
	}{
		{sdk: sdkkube.GetResourceRequest{APIVersion: "v1", Kind: "Pod", Name: "p", Namespace: &ns, DisableCache: true, FieldMasks: []string{"spec"}},
			into: &GetRequest{}, want: &GetRequest{APIVersion: "v1", Kind: "Pod", Name: "p", Namespace: &ns, DisableCache: true, FieldMasks: []string{"spec"}}},
		{sdk: sdkkube.ListResourcesByNamespaceRequest{APIVersion: "v1", Kind: "Pod", Namespace: ns, LabelSelector: &sel},
			into: &ListByNamespaceRequest{}, want: &ListByNamespaceRequest{APIVersion: "v1", Kind: "Pod", Namespace: ns, LabelSelector: &sel}},
		{sdk: sdkkube.ListAllResourcesRequest{APIVersion: "v1", Kind: "Pod", FieldSelector: &sel},
			into: &ListAllRequest{}, want: &ListAllRequest{APIVersion: "v1", Kind: "Pod", FieldSelector: &sel}},
	} {
		b, err := json.Marshal(tc.sdk)
		require.NoError(t, err)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(tc.into), "%s", b)
		assert.Equal(t, tc.want, tc.into)
	}
	// policy-sdk-go's CanIRequest does not have policy-server's shape: it
	// names the attributes "resourceAttributes", where policy-server (and
	// this host) read "resource_attributes". A policy that asks through
	// that SDK function gets an error under both.
	b, err := json.Marshal(sdkkube.CanIRequest{SubjectAccessReview: sdkkube.SubjectAccessReview{User: "u",
		ResourceAttributes: sdkkube.ResourceAttributes{Namespace: ns, Verb: "set", Resource: "userinfos"}}})
	require.NoError(t, err)
	_, err = decodeCanI(b)
	require.EqualError(t, err, "can_i: invalid request: missing field `resource_attributes`")
	// And the SDK decodes the status this host answers.
	var st sdkkube.SubjectAccessReviewStatus
	b, _ = json.Marshal(Status{Allowed: true, Reason: "r"})
	require.NoError(t, json.Unmarshal(b, &st))
	assert.Equal(t, sdkkube.SubjectAccessReviewStatus{Allowed: true, Reason: "r"}, st)
}
