package workloads

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsonx"
)

func decode(t *testing.T, s string) gjson.Result {
	t.Helper()
	require.True(t, gjson.Valid(s), s)
	return gjson.Parse(s)
}

// Presets resolve from the generated file, with their record path, extra
// owners and versions; custom kinds keep their paths.
func TestParse(t *testing.T) {
	s, err := ParseSettings([]byte(`{"bypassAuth":false,"workloads":["kuberay",{"preset":"leaderworkerset","operators":["x"]},
		{"group":"example.com","kind":"Trainer","paths":["spec.workers[*].template.metadata.annotations"],"owners":["Pod","example.com/Pool"]}]}`))
	require.NoError(t, err)
	var names []string
	for _, k := range s.Kinds {
		names = append(names, k.String()+"@"+k.Version)
	}
	assert.Equal(t, []string{"RayCluster.ray.io@v1", "RayJob.ray.io@v1", "RayService.ray.io@v1", "LeaderWorkerSet.leaderworkerset.x-k8s.io@v1", "Trainer.example.com@"}, names)
	rc := s.Kind(KindRef{"ray.io", "RayCluster"})
	require.NotNil(t, rc)
	var paths []string
	for _, p := range rc.Paths {
		paths = append(paths, p.Text)
	}
	assert.Equal(t, []string{"spec.headGroupSpec.template.metadata.annotations", "spec.workerGroupSpecs[*].template.metadata.annotations", RecordPath}, paths)
	assert.Equal(t, "rayclusters", rc.Resource)
	assert.True(t, s.IsOwner(KindRef{"", "Pod"}), "leaderworkerset's extra owner")
	assert.True(t, s.IsOwner(KindRef{"example.com", "Pool"}))
	assert.True(t, s.IsOwner(KindRef{"ray.io", "RayJob"}))
	assert.False(t, s.IsOwner(KindRef{"apps", "ReplicaSet"}))
	assert.Nil(t, s.Kind(KindRef{"ray.io", "Nope"}))

	none, err := ParseSettings([]byte(`{}`))
	require.NoError(t, err)
	assert.Empty(t, none.Kinds)
	assert.Equal(t, "kuberay, spark, kubeflow-training, kubeflow-trainer, jobset, leaderworkerset", PresetNames())
}

func TestParse_errors(t *testing.T) {
	for settings, want := range map[string]string{
		`[]`:                             "settings: must be a JSON object",
		`{"workloads":{}}`:               "settings.workloads: must be an array of presets (kuberay, spark, kubeflow-training, kubeflow-trainer, jobset, leaderworkerset) or objects, got object {}",
		`{"workloads":["nope"]}`:         `settings.workloads[0]: unknown preset "nope" (presets: kuberay, spark,`,
		`{"workloads":[1]}`:              "settings.workloads[0]: must be a preset name or an object",
		`{"workloads":[{"preset":"x"}]}`: `settings.workloads[0].preset: unknown preset "x"`,
		`{"workloads":[{"kind":"A"}]}`:   "settings.workloads[0]: must name a preset, or a kind with its paths",
		`{"workloads":[{"preset":"spark","kind":"A"}]}`:                             "settings.workloads[0]: names a preset and a kind",
		`{"workloads":[{"kind":"A","paths":[]}]}`:                                   "settings.workloads[0].paths: must name at least one annotation path",
		`{"workloads":[{"kind":"A","paths":["spec.x"]}]}`:                           `settings.workloads[0].paths[0]: "spec.x" must name an annotations map`,
		`{"workloads":[{"kind":"A","paths":["spec.a[1].annotations"]}]}`:            `segment "a[1]" is not a member name`,
		`{"workloads":[{"kind":"a.b","paths":["x.annotations"]}]}`:                  `group "" and kind "a.b" must be an API group and a kind`,
		`{"workloads":[{"kind":"A","paths":["x.annotations"],"extra":1}]}`:          `settings.workloads[0]: unknown key "extra"`,
		`{"workloads":[{"kind":"A","paths":["x.annotations"],"owners":["a/b/c"]}]}`: `settings.workloads[0].owners[0]: must be a kind as group/Kind`,
		`{"workloads":["spark","spark"]}`:                                           "settings.workloads: kind SparkApplication.sparkoperator.k8s.io is named by both preset spark and preset spark",
		`{"workloads":[{"kind":1,"paths":["x.annotations"]}]}`:                      "settings.workloads[0].kind: must be a string",
		`{"workloads":[{"kind":"A","paths":["x.annotations"],"resource":""}]}`:      "settings.workloads[0].resource: must be a non-empty string",
	} {
		_, err := ParseSettings([]byte(settings))
		assert.ErrorContains(t, err, want, settings)
	}
}

// Templates follow the policy's rules: a wildcard enters every element
// or member; a template must exist up to its metadata, which may be
// absent; null is absent; a level of the wrong type is malformed.
func TestTemplates(t *testing.T) {
	s, err := ParseSettings([]byte(`{"workloads":["kuberay","kubeflow-training","spark"]}`))
	require.NoError(t, err)
	rc := s.Kind(KindRef{"ray.io", "RayCluster"})
	got, err := rc.Templates(decode(t, `{"metadata":{"name":"r","annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"a\"}"}},
		"spec":{"headGroupSpec":{"template":{"spec":{"schedulerName":"yunikorn"}}},
		"workerGroupSpecs":[{"template":{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"x"}}}},null,{"replicas":1},{"template":{"metadata":{}}}]}}`))
	require.NoError(t, err)
	type short struct {
		Field   string
		Value   string
		Present bool
		Sched   string
	}
	var out []short
	for _, tm := range got {
		sched := ""
		if tm.Holder.Exists() {
			sched = tm.Holder.Get("spec").Raw
		}
		out = append(out, short{tm.Field, tm.Value, tm.Present, sched})
	}
	assert.Equal(t, []short{
		{"spec.headGroupSpec.template.metadata.annotations", "", false, `{"schedulerName":"yunikorn"}`},
		{"spec.workerGroupSpecs[0].template.metadata.annotations", "x", true, ""},
		{"spec.workerGroupSpecs[3].template.metadata.annotations", "", false, ""},
		{"metadata.annotations", `{"user":"a"}`, true, ""},
	}, out)

	pt := s.Kind(KindRef{"kubeflow.org", "PyTorchJob"})
	got, err = pt.Templates(decode(t, `{"metadata":{},"spec":{"pytorchReplicaSpecs":{"Worker":{"template":{}},"Master":{"template":{"metadata":{"annotations":{}}}}}}}`))
	require.NoError(t, err)
	require.Len(t, got, 3)
	// Members in document order (the host marshals objects with sorted
	// keys), as the policy walks them.
	assert.Equal(t, "spec.pytorchReplicaSpecs.Worker.template.metadata.annotations", got[0].Field)
	assert.Equal(t, "spec.pytorchReplicaSpecs.Master.template.metadata.annotations", got[1].Field)

	spark := s.Kind(KindRef{"sparkoperator.k8s.io", "SparkApplication"})
	got, err = spark.Templates(decode(t, `{"spec":{"driver":{"annotations":{"yunikorn.apache.org/user.info":"v"}}}}`))
	require.NoError(t, err)
	require.Len(t, got, 2, "the driver and the record; no executor")
	assert.Equal(t, Template{Field: "spec.driver.annotations", Value: "v", Present: true}, got[0])

	for obj, want := range map[string]string{
		`{"spec":{"workerGroupSpecs":{}}}`:                                        "spec.workerGroupSpecs: must be an array, got object",
		`{"spec":{"workerGroupSpecs":[{"template":"x"}]}}`:                        "spec.workerGroupSpecs[0].template: must be an object, got string",
		`{"spec":{"headGroupSpec":{"template":{"metadata":{"annotations":[]}}}}}`: "spec.headGroupSpec.template.metadata.annotations: must be an object, got array",
		`{"metadata":{"annotations":{"yunikorn.apache.org/user.info":1}}}`:        `metadata.annotations["yunikorn.apache.org/user.info"]: must be a string, got number`,
		`{"spec":{"workerGroupSpecs":[1]}}`:                                       "spec.workerGroupSpecs[0]: must be an object, got number",
	} {
		_, err := rc.Templates(decode(t, obj))
		var me *jsonx.InputError
		require.ErrorAs(t, err, &me, obj)
		assert.EqualError(t, err, want)
	}
}
