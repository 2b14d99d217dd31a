package workloads

import "strings"

// Preset is a named set of kinds that one operator serves, with the paths
// taken from the CRDs its Go module ships.
type Preset struct {
	Name  string
	Kinds []PresetKind
	// ExtraOwners are kinds besides the preset's own whose identity its
	// operator copies into what it creates.
	ExtraOwners []KindRef
}

// PresetKind is one kind of a preset.
type PresetKind struct {
	Group, Version, Kind string
	Resource             string // the plural, for the webhook's rules and RBAC
	Paths                []string
}

// Presets, by the operator versions they were read from: KubeRay
// ray-operator v1.4.2, Spark operator v2.3.0, Kubeflow training-operator
// v1.9.3 and trainer v2.0.0, JobSet v0.8.2, LeaderWorkerSet v0.6.2.
var Presets = []Preset{
	{Name: "kuberay", Kinds: []PresetKind{
		{"ray.io", "v1", "RayCluster", "rayclusters", []string{
			"spec.headGroupSpec.template.metadata.annotations",
			"spec.workerGroupSpecs[*].template.metadata.annotations"}},
		{"ray.io", "v1", "RayJob", "rayjobs", []string{
			"spec.rayClusterSpec.headGroupSpec.template.metadata.annotations",
			"spec.rayClusterSpec.workerGroupSpecs[*].template.metadata.annotations",
			"spec.submitterPodTemplate.metadata.annotations"}},
		{"ray.io", "v1", "RayService", "rayservices", []string{
			"spec.rayClusterConfig.headGroupSpec.template.metadata.annotations",
			"spec.rayClusterConfig.workerGroupSpecs[*].template.metadata.annotations"}},
	}},
	{Name: "spark", Kinds: []PresetKind{
		{"sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkapplications", []string{
			"spec.driver.annotations", "spec.executor.annotations"}},
		{"sparkoperator.k8s.io", "v1beta2", "ScheduledSparkApplication", "scheduledsparkapplications", []string{
			"spec.template.driver.annotations", "spec.template.executor.annotations"}},
	}},
	{Name: "kubeflow-training", Kinds: []PresetKind{
		{"kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", []string{"spec.pytorchReplicaSpecs.*.template.metadata.annotations"}},
		{"kubeflow.org", "v1", "TFJob", "tfjobs", []string{"spec.tfReplicaSpecs.*.template.metadata.annotations"}},
		{"kubeflow.org", "v1", "MPIJob", "mpijobs", []string{"spec.mpiReplicaSpecs.*.template.metadata.annotations"}},
		{"kubeflow.org", "v1", "XGBoostJob", "xgboostjobs", []string{"spec.xgbReplicaSpecs.*.template.metadata.annotations"}},
		{"kubeflow.org", "v1", "PaddleJob", "paddlejobs", []string{"spec.paddleReplicaSpecs.*.template.metadata.annotations"}},
		{"kubeflow.org", "v1", "JAXJob", "jaxjobs", []string{"spec.jaxReplicaSpecs.*.template.metadata.annotations"}},
	}},
	{Name: "kubeflow-trainer", Kinds: []PresetKind{
		// A TrainJob has no pod template: its annotations go to the JobSet
		// the trainer creates, whose templates inherit the identity by the
		// owner proof.
		{"trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs", []string{"spec.annotations"}},
	}},
	{Name: "jobset", Kinds: []PresetKind{
		{"jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", []string{"spec.replicatedJobs[*].template.spec.template.metadata.annotations"}},
	}},
	{Name: "leaderworkerset", Kinds: []PresetKind{
		{"leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", []string{
			"spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations",
			"spec.leaderWorkerTemplate.workerTemplate.metadata.annotations"}},
	}, ExtraOwners: []KindRef{{"", "Pod"}}}, // a group's worker StatefulSet is owned by its leader Pod
}

// PresetNames lists the presets for messages.
func PresetNames() string {
	names := make([]string, len(Presets))
	for i, p := range Presets {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// FindPreset returns the preset called name, or nil.
func FindPreset(name string) *Preset {
	for i := range Presets {
		if Presets[i].Name == name {
			return &Presets[i]
		}
	}
	return nil
}
