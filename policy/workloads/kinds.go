package workloads

// KindRef names a kind by API group ("" for the core group) and kind;
// the version does not matter.
type KindRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
}

// String is the kind as messages write it: Kind.group, or Kind.
func (k KindRef) String() string {
	if k.Group == "" {
		return k.Kind
	}
	return k.Kind + "." + k.Group
}

// Where the metadata of the Pods a built-in kind produces lives: the
// annotation is read and written there, never on the workload's own
// metadata (YuniKorn reads it from the Pod).
var (
	podMetadataPath      = []string{"metadata"}
	templateMetadataPath = []string{"spec", "template", "metadata"}
	cronJobMetadataPath  = []string{"spec", "jobTemplate", "spec", "template", "metadata"}
)

// BuiltinMetadataPath says, for each kind the policy guards without
// settings, where that metadata is. A switch rather than a map: TinyGo
// hashes and compares struct map keys through reflection, about a hundred
// calls per lookup.
func BuiltinMetadataPath(group, kind string) (path []string, builtin bool) {
	switch group {
	case "":
		switch kind {
		case "Pod":
			return podMetadataPath, true
		case "ReplicationController":
			return templateMetadataPath, true
		}
	case "apps":
		switch kind {
		case "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet":
			return templateMetadataPath, true
		}
	case "batch":
		switch kind {
		case "Job":
			return templateMetadataPath, true
		case "CronJob":
			return cronJobMetadataPath, true
		}
	}
	return nil, false
}
