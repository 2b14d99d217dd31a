package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestReportAPIs: the same findings give the same results, summary and
// properties in both report APIs; OpenReports also names the source on
// the report itself, as its CRD requires; Apply writes each API's own
// resource.
func TestReportAPIs(t *testing.T) {
	r := &Report{
		Findings: []Finding{
			{Rule: RuleMissing, Resource: Resource{APIVersion: "v1", Kind: "Pod", Namespace: "a", Name: "p", UID: "u1"}, Message: "m1"},
		},
		Passed:             map[string]int{"a": 3},
		AllNamespaces:      true,
		CrossNamespaceApps: 1,
	}
	wg := r.PolicyReports(WGPolicy, t0)[0].Object
	for _, tc := range []struct {
		api         ReportAPI
		kind, ckind string
		source      bool
	}{
		{OpenReports, "Report", "ClusterReport", true},
		{WGPolicy, "PolicyReport", "ClusterPolicyReport", false},
	} {
		t.Run(tc.api.Name, func(t *testing.T) {
			reps := r.PolicyReports(tc.api, t0)
			require.Len(t, reps, 1)
			got := reps[0].Object
			assert.Equal(t, tc.api.APIVersion, got["apiVersion"])
			assert.Equal(t, tc.kind, got["kind"])
			assert.Equal(t, wg["results"], got["results"], "the results do not depend on the API")
			assert.Equal(t, wg["summary"], got["summary"])
			if tc.source {
				assert.Equal(t, "yunikorn-userinfo", got["source"])
			} else {
				assert.NotContains(t, got, "source")
			}
			cluster := r.ClusterPolicyReport(tc.api, t0)
			require.NotNil(t, cluster)
			assert.Equal(t, tc.ckind, cluster.GetKind())
			assert.Equal(t, tc.api.APIVersion, cluster.GetAPIVersion())

			dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
				tc.api.GVR: tc.kind + "List", tc.api.ClusterGVR: tc.ckind + "List"})
			_, err := Apply(t.Context(), dyn, tc.api, "", reps)
			require.NoError(t, err)
			_, err = dyn.Resource(tc.api.GVR).Namespace("a").Get(t.Context(), ReportName, metav1.GetOptions{})
			require.NoError(t, err, "written as %s", tc.api.GVR)
			require.NoError(t, ApplyCluster(t.Context(), dyn, tc.api, cluster))
			_, err = dyn.Resource(tc.api.ClusterGVR).Get(t.Context(), ReportName, metav1.GetOptions{})
			require.NoError(t, err, "written as %s", tc.api.ClusterGVR)
		})
	}
}

// TestServed: a cluster without a report API's CRD is named, with how to
// install it; one that serves only the namespaced kind is refused too.
func TestServed(t *testing.T) {
	disc := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{}}
	err := Served(disc, OpenReports)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the cluster does not serve reports.openreports.io (openreports.io/v1alpha1)")
	assert.Contains(t, err.Error(), "install the OpenReports CRDs")

	disc.Resources = []*metav1.APIResourceList{{GroupVersion: "openreports.io/v1alpha1",
		APIResources: []metav1.APIResource{{Name: "reports", Namespaced: true, Kind: "Report"}}}}
	err = Served(disc, OpenReports)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "clusterreports.openreports.io")

	disc.Resources[0].APIResources = append(disc.Resources[0].APIResources, metav1.APIResource{Name: "clusterreports", Kind: "ClusterReport"})
	require.NoError(t, Served(disc, OpenReports))
	require.Error(t, Served(disc, WGPolicy), "wgpolicyk8s.io is not served")
}
