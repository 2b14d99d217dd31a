package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/workloads"
)

// The host's tools read a custom object's templates with
// workloads.Kind.Templates, which follows a template's keys with a plain
// scan; the policy follows them into its podMeta through the payload's
// index. Both walk the same workloads.Path: they must find the same
// templates, in the same order, with the same values, and refuse the same
// objects with the same message.
func TestTemplates_policyAndHostAgree(t *testing.T) {
	set, err := workloads.ParseSettings([]byte(`{"workloads":["kuberay","kubeflow-training","spark","jobset",
		{"group":"example.com","kind":"Thing","paths":["spec.*.a[*][*].annotations","spec.*.template.metadata.annotations","spec.head.template.metadata.annotations","spec.x.annotations"]}]}`))
	require.NoError(t, err)
	const ui = `"yunikorn.apache.org/user.info"`
	objects := map[workloads.KindRef][]string{
		{Group: "ray.io", Kind: "RayCluster"}: {
			`{}`, `{"metadata":null,"spec":null}`,
			`{"metadata":{"annotations":{` + ui + `:"{\"user\":\"a\"}"}},"spec":{"headGroupSpec":{"template":{"spec":{}}},
				"workerGroupSpecs":[{"template":{"metadata":{"annotations":{` + ui + `:"x"}}}},null,{"replicas":1},{"template":{"metadata":{}}},{"template":{"metadata":{"annotations":null}}}]}}`,
			`{"spec":{"workerGroupSpecs":{}}}`, `{"spec":{"workerGroupSpecs":[1]}}`, `{"spec":{"workerGroupSpecs":[{"template":"x"}]}}`,
			`{"spec":{"headGroupSpec":{"template":{"metadata":{"annotations":[]}}}}}`,
			`{"metadata":{"annotations":{` + ui + `:1}}}`, `{"metadata":{"annotations":{` + ui + `:null}}}`,
			`{"metadata":{"annotations":{` + ui + `:"a",` + ui + `:"b"}}}`, `{"spec":{"headGroupSpec":{},"headGroupSpec":{}}}`,
			`{"metadata":{"annotations":{` + ui + `:"caf\u00e9 \ud800"}}}`,
		},
		{Group: "kubeflow.org", Kind: "PyTorchJob"}: {
			`{"spec":{"pytorchReplicaSpecs":{"Worker":{"template":{}},"Master":{"template":{"metadata":{"annotations":{}}}},"Gone":null}}}`,
			`{"spec":{"pytorchReplicaSpecs":{"W":{"template":{}},"W":{"template":{}}}}}`,
			`{"spec":{"pytorchReplicaSpecs":{"a.b/c":{"template":{"metadata":{"annotations":{` + ui + `:"v"}}}}}}}`,
			`{"spec":{"pytorchReplicaSpecs":[]}}`,
		},
		{Group: "sparkoperator.k8s.io", Kind: "SparkApplication"}: {
			`{"spec":{"driver":{"annotations":{` + ui + `:"v"}}}}`, `{"spec":{"driver":{},"executor":{"annotations":{}}}}`,
		},
		{Group: "jobset.x-k8s.io", Kind: "JobSet"}: {
			`{"spec":{"replicatedJobs":[{"template":{"spec":{"template":{}}}},{"template":{}},{"template":{"spec":{"template":{"metadata":{}}}}}]}}`,
		},
		{Group: "example.com", Kind: "Thing"}: {
			`{"spec":{"head":{"template":{"metadata":{}}},"w":{"a":[[{"annotations":{}}],[null,{}]]},"x":{}}}`,
			`{"spec":{"head":{"template":{}},"x":{"annotations":{` + ui + `:"v"}}}}`,
			`{"spec":{"w":{"a":[{"x":1}]}}}`,
		},
	}
	type found struct {
		Field, Value string
		Present      bool
	}
	for kr, objs := range objects {
		hk := set.Kind(kr)
		require.NotNil(t, hk, kr.String())
		pk := &workloadKind{kindRef: kindRef{kr.Group, kr.Kind}, paths: hk.Paths}
		for _, obj := range objs {
			require.True(t, gjson.Valid(obj), obj)
			var policy, host []found
			locs, perr := locateAll(obj, "", pk)
			for _, pm := range locs {
				v, _, ok, err := pm.annotation()
				if err != nil {
					perr = err
					break
				}
				policy = append(policy, found{join(pm.metaField(), "annotations"), v, ok})
			}
			tmpls, herr := hk.Templates(gjson.Parse(obj))
			for _, tm := range tmpls {
				host = append(host, found{tm.Field, tm.Value, tm.Present})
			}
			if perr != nil || herr != nil {
				require.Error(t, perr, "%s %s: the host refuses (%v), the policy does not", kr, obj, herr)
				require.Error(t, herr, "%s %s: the policy refuses (%v), the host does not", kr, obj, perr)
				assert.Equal(t, perr.Error(), herr.Error(), "%s %s", kr, obj)
				continue
			}
			assert.Equal(t, policy, host, "%s %s", kr, obj)
		}
	}
}
