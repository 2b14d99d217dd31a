package scenarios

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// foreignGroups are the API groups of other projects' custom resources in
// the chart's renderings (cert-manager, Kubewarden, the Prometheus
// operator). This cluster installs none of their CRDs, and their versions
// are those projects', not Kubernetes'.
var foreignGroups = []string{"cert-manager.io", "policies.kubewarden.io", "monitoring.coreos.com"}

// TestChartRenderingServed: every Kubernetes object of the chart's
// renderings (make chart-render: standalone, Kubewarden, operators, first
// install, the switch's watch step, and from Kubernetes 1.36 cel and
// hybrid) is one this API server serves, with every field the chart sets.
// Each is created with dryRun=All, so nothing is stored, and
// fieldValidation=Strict, so a field the version does not know is an
// error; and the object the server would store must keep every value the
// rendering set, since a field whose feature gate is off is dropped
// without an error. This is what the chart's kubeVersion rests on for each
// version the suite runs.
func TestChartRenderingServed(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns := newNamespace(t, "")
	cfg, err := e2e.cluster.Config(admin)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	groups, err := restmapper.GetAPIGroupResources(client(admin).Discovery())
	require.NoError(t, err)
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}

	checked := 0
	variants := []struct{ env, file string }{
		{"E2E_CHART_STANDALONE", "standalone.yaml"},
		{"E2E_CHART_KUBEWARDEN", "kubewarden.yaml"},
		{"E2E_CHART_OPERATORS", "operators.yaml"},
		{"E2E_CHART_INSTALL", "install.yaml"},
		{"E2E_CHART_WATCH", "watch.yaml"},
	}
	// Modes cel and hybrid render admissionregistration.k8s.io/v1
	// MutatingAdmissionPolicies, served from 1.36.
	if e2e.kubeMinor >= 36 {
		variants = append(variants, struct{ env, file string }{"E2E_CHART_CEL", "cel.yaml"},
			struct{ env, file string }{"E2E_CHART_HYBRID", "hybrid.yaml"})
	}
	for _, variant := range variants {
		rendering, err := cluster.ReadRendering(chartRendering(e2e.repo, variant.env, variant.file))
		require.NoError(t, err)
		for _, kind := range rendering.Kinds() {
			for i, doc := range rendering.All(kind) {
				var obj unstructured.Unstructured
				require.NoError(t, yaml.Unmarshal(doc, &obj.Object), "%s: %s #%d", variant.file, kind, i)
				gvk := obj.GroupVersionKind()
				what := fmt.Sprintf("%s: %s %s", variant.file, gvk, obj.GetName())
				if slices.Contains(foreignGroups, gvk.Group) {
					continue
				}
				m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				require.NoErrorf(t, err, "%s: Kubernetes %s does not serve it", what, e2e.kubeVersion)
				ri := dyn.Resource(m.Resource)
				var res dynamic.ResourceInterface = ri
				if m.Scope.Name() == "namespace" {
					obj.SetNamespace(ns)
					res = ri.Namespace(ns)
				} else {
					// Another scenario may hold the rendered name.
					obj.SetName(obj.GetName() + "-" + ns)
				}
				out, err := res.Create(ctx, &obj, dry)
				if !assert.NoErrorf(t, err, "%s: refused by Kubernetes %s", what, e2e.kubeVersion) {
					continue
				}
				for _, lost := range missingFrom(obj.Object, out.Object, "") {
					assert.Failf(t, "a rendered field is not kept", "%s on Kubernetes %s: %s", what, e2e.kubeVersion, lost)
				}
				checked++
			}
		}
	}
	t.Logf("%d rendered objects accepted as rendered by Kubernetes %s", checked, e2e.kubeVersion)
	require.Positive(t, checked)
}

// missingFrom lists the paths of want's values that got lacks or holds
// otherwise: each map key of want, recursively, and lists element by
// element. What got adds (defaults, status) is not compared.
func missingFrom(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, stored %s", path, short(got))}
		}
		var lost []string
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				lost = append(lost, path+"."+k+": dropped")
				continue
			}
			lost = append(lost, missingFrom(v, gv, path+"."+k)...)
		}
		return lost
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d elements, stored %s", path, len(w), short(got))}
		}
		var lost []string
		for i := range w {
			lost = append(lost, missingFrom(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return lost
	default:
		if reflect.DeepEqual(normalise(want), normalise(got)) {
			return nil
		}
		// A quantity written as a number (cpu: 1) is stored as a string.
		if _, isNumber := normalise(want).(float64); isNumber && fmt.Sprint(normalise(want)) == fmt.Sprint(got) {
			return nil
		}
		return []string{fmt.Sprintf("%s: want %s, stored %s", path, short(want), short(got))}
	}
}

// normalise makes YAML's and JSON's numbers compare equal (int64 and
// float64 of the same value).
func normalise(v any) any {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case int:
		return float64(n)
	}
	return v
}

func short(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return strings.TrimSpace(s)
}
