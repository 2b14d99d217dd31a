package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Values shared by every fixture. Fixed, so that the output is the same on
// every run.
const (
	namespace   = "team-a"
	createdAt   = "2026-11-22T05:08:38Z"
	scheduledAt = "2026-11-22T05:08:39Z"
	// apiAccessVolume is the projected service-account token volume that the
	// ServiceAccount admission plugin adds to every Pod (random suffix in a
	// real cluster, fixed here).
	apiAccessVolume = "kube-api-access-7xk2p"
	apiAccessPath   = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// envVar is a container environment variable: a literal value or a
// reference (valueFrom).
type envVar struct {
	name  string
	value string
	// from is the valueFrom source when set: secretKeyRef, configMapKeyRef
	// or fieldRef.
	from     string
	fromName string // secret or config map name, or the field path
	fromKey  string
}

// mount is a container volume mount.
type mount struct {
	name     string
	path     string
	readOnly bool
}

// container describes one container of a pod spec.
type container struct {
	name     string
	image    string
	command  []string
	args     []string
	ports    []int // TCP container ports, named after the container
	env      []envVar
	cpu      string // request; the limit is twice as much
	memory   string // request and limit
	mounts   []mount
	probes   bool // liveness and readiness HTTP probes on the first port
	security bool // a restricted securityContext
}

// volume is a pod volume: a config map, a secret or an emptyDir.
type volume struct {
	name   string
	kind   string // configMap, secret or emptyDir
	source string // config map or secret name
}

// podTemplate is everything that makes up a pod spec and its metadata.
type podTemplate struct {
	labels         map[string]string
	annotations    map[string]string
	initContainers []container
	containers     []container
	volumes        []volume
	nodeSelector   map[string]string
	priorityClass  string
	serviceAccount string // "" for the default service account
}

// clone returns a deep enough copy of t to change its metadata maps.
func (t podTemplate) clone() podTemplate {
	t.labels = maps.Clone(t.labels)
	t.annotations = maps.Clone(t.annotations)
	return t
}

// containerJSON renders c as the API server stores it: defaults filled in
// and, in a Pod (not a template), the service-account token mounted.
func containerJSON(c container, inPod bool) object {
	var ports []object
	for i, p := range c.ports {
		ports = append(ports, obj("name", portName(c.name, i), "containerPort", p, "protocol", "TCP"))
	}
	var env []object
	for _, e := range c.env {
		env = append(env, envJSON(e))
	}
	var resources object
	if c.cpu != "" {
		resources = obj(
			"limits", map[string]string{"cpu": doubleCPU(c.cpu), "memory": c.memory},
			"requests", map[string]string{"cpu": c.cpu, "memory": c.memory},
		)
	} else {
		resources = obj()
	}
	var mounts []object
	for _, m := range c.mounts {
		mounts = append(mounts, obj("name", m.name, "readOnly", boolOrNil(m.readOnly), "mountPath", m.path))
	}
	if inPod {
		mounts = append(mounts, obj("name", apiAccessVolume, "readOnly", true, "mountPath", apiAccessPath))
	}
	var liveness, readiness object
	if c.probes && len(c.ports) > 0 {
		liveness = probeJSON("/healthz", c.ports[0], 15)
		readiness = probeJSON("/readyz", c.ports[0], 5)
	}
	var security object
	if c.security {
		security = obj(
			"capabilities", obj("drop", []string{"ALL"}),
			"runAsNonRoot", true,
			"readOnlyRootFilesystem", true,
			"allowPrivilegeEscalation", false,
			"seccompProfile", obj("type", "RuntimeDefault"),
		)
	}
	return obj(
		"name", c.name,
		"image", c.image,
		"command", stringsOrNil(c.command),
		"args", stringsOrNil(c.args),
		"ports", objectsOrNil(ports),
		"env", objectsOrNil(env),
		"resources", resources,
		"volumeMounts", objectsOrNil(mounts),
		"livenessProbe", objectOrNil(liveness),
		"readinessProbe", objectOrNil(readiness),
		"terminationMessagePath", "/dev/termination-log",
		"terminationMessagePolicy", "File",
		"imagePullPolicy", "IfNotPresent",
		"securityContext", objectOrNil(security),
	)
}

func envJSON(e envVar) object {
	switch e.from {
	case "":
		return obj("name", e.name, "value", e.value)
	case "fieldRef":
		return obj("name", e.name, "valueFrom", obj("fieldRef", obj("apiVersion", "v1", "fieldPath", e.fromName)))
	default:
		return obj("name", e.name, "valueFrom", obj(e.from, obj("name", e.fromName, "key", e.fromKey)))
	}
}

func probeJSON(path string, port, period int) object {
	return obj(
		"httpGet", obj("path", path, "port", port, "scheme", "HTTP"),
		"initialDelaySeconds", 5,
		"timeoutSeconds", 1,
		"periodSeconds", period,
		"successThreshold", 1,
		"failureThreshold", 3,
	)
}

func volumeJSON(v volume) object {
	switch v.kind {
	case "configMap":
		return obj("name", v.name, "configMap", obj("name", v.source, "defaultMode", 420))
	case "secret":
		return obj("name", v.name, "secret", obj("secretName", v.source, "defaultMode", 420))
	default:
		return obj("name", v.name, "emptyDir", obj())
	}
}

// apiAccessVolumeJSON is the projected volume of the ServiceAccount
// admission plugin, as in the captured samples.
func apiAccessVolumeJSON() object {
	return obj("name", apiAccessVolume, "projected", obj(
		"sources", []object{
			obj("serviceAccountToken", obj("expirationSeconds", 3607, "path", "token")),
			obj("configMap", obj("name", "kube-root-ca.crt", "items", []object{obj("key", "ca.crt", "path", "ca.crt")})),
			obj("downwardAPI", obj("items", []object{obj(
				"path", "namespace",
				"fieldRef", obj("apiVersion", "v1", "fieldPath", "metadata.namespace"),
			)})),
		},
		"defaultMode", 420,
	))
}

// podSpecJSON renders the spec of t. In a Pod (inPod) it carries what the
// API server's admission plugins add: the token volume and mounts, the
// default tolerations and the resolved priority.
func podSpecJSON(t podTemplate, inPod bool) object {
	var volumes []object
	for _, v := range t.volumes {
		volumes = append(volumes, volumeJSON(v))
	}
	if inPod {
		volumes = append(volumes, apiAccessVolumeJSON())
	}
	var initContainers, containers []object
	for _, c := range t.initContainers {
		initContainers = append(initContainers, containerJSON(c, inPod))
	}
	for _, c := range t.containers {
		containers = append(containers, containerJSON(c, inPod))
	}
	sa := t.serviceAccount
	if sa == "" && inPod {
		sa = "default"
	}
	var tolerations []object
	var priority any
	var preemption any
	var serviceLinks any
	if inPod {
		tolerations = []object{
			obj("key", "node.kubernetes.io/not-ready", "operator", "Exists", "effect", "NoExecute", "tolerationSeconds", 300),
			obj("key", "node.kubernetes.io/unreachable", "operator", "Exists", "effect", "NoExecute", "tolerationSeconds", 300),
		}
		priority = 0
		if t.priorityClass != "" {
			priority = 100000
		}
		preemption = "PreemptLowerPriority"
		serviceLinks = true
	}
	var saName, saLegacy any
	if sa != "" {
		saName, saLegacy = sa, sa
	}
	return obj(
		"volumes", objectsOrNil(volumes),
		"initContainers", objectsOrNil(initContainers),
		"containers", objectsOrNil(containers),
		"restartPolicy", "Always",
		"terminationGracePeriodSeconds", 30,
		"dnsPolicy", "ClusterFirst",
		"nodeSelector", mapOrNil(t.nodeSelector),
		"serviceAccountName", saName,
		"serviceAccount", saLegacy,
		"securityContext", obj(),
		"schedulerName", "default-scheduler",
		"tolerations", objectsOrNil(tolerations),
		"priorityClassName", stringOrNil(t.priorityClass),
		"priority", priority,
		"enableServiceLinks", serviceLinks,
		"preemptionPolicy", preemption,
	)
}

// metadataFields is the f:metadata part of managedFields for t.
func metadataFields(t podTemplate) fields {
	f := fields{}
	if len(t.labels) > 0 {
		f["f:labels"] = node(leaves(slices.Sorted(maps.Keys(t.labels))...))
	}
	if len(t.annotations) > 0 {
		f["f:annotations"] = node(leaves(slices.Sorted(maps.Keys(t.annotations))...))
	}
	return f
}

// specFields is the f:spec part of managedFields for what the user wrote in
// t (not what admission plugins added).
func specFields(t podTemplate) fields {
	f := leaves("dnsPolicy", "restartPolicy", "schedulerName", "securityContext", "terminationGracePeriodSeconds")
	containerSet := func(cs []container) fields {
		set := fields{}
		for _, c := range cs {
			set[fmt.Sprintf(`k:{"name":%q}`, c.name)] = containerFields(c)
		}
		return set
	}
	f["f:containers"] = containerSet(t.containers)
	if len(t.initContainers) > 0 {
		f["f:initContainers"] = containerSet(t.initContainers)
	}
	if len(t.volumes) > 0 {
		vols := fields{}
		for _, v := range t.volumes {
			src := leaves("defaultMode", "name")
			if v.kind == "secret" {
				src = leaves("defaultMode", "secretName")
			}
			if v.kind == "emptyDir" {
				src = fields{}
			}
			vols[fmt.Sprintf(`k:{"name":%q}`, v.name)] = node(fields{"f:name": leaf(), "f:" + v.kind: node(src)})
		}
		f["f:volumes"] = vols
	}
	if len(t.nodeSelector) > 0 {
		f["f:nodeSelector"] = leaf()
	}
	if t.priorityClass != "" {
		f["f:priorityClassName"] = leaf()
	}
	if t.serviceAccount != "" {
		f["f:serviceAccountName"] = leaf()
	}
	return f
}

func containerFields(c container) fields {
	f := leaves("image", "imagePullPolicy", "name", "terminationMessagePath", "terminationMessagePolicy")
	f["f:resources"] = fields{}
	if c.cpu != "" {
		f["f:resources"] = node(fields{
			"f:limits":   node(leaves("cpu", "memory")),
			"f:requests": node(leaves("cpu", "memory")),
		})
	}
	if len(c.command) > 0 {
		f["f:command"] = leaf()
	}
	if len(c.args) > 0 {
		f["f:args"] = leaf()
	}
	if len(c.ports) > 0 {
		ports := fields{".": leaf()}
		for _, p := range c.ports {
			ports[fmt.Sprintf(`k:{"containerPort":%d,"protocol":"TCP"}`, p)] = node(leaves("containerPort", "name", "protocol"))
		}
		f["f:ports"] = ports
	}
	if len(c.env) > 0 {
		env := fields{".": leaf()}
		for _, e := range c.env {
			item := leaves("name", "value")
			if e.from != "" {
				item = fields{"f:name": leaf(), "f:valueFrom": node(fields{"f:" + e.from: leaf()})}
			}
			env[fmt.Sprintf(`k:{"name":%q}`, e.name)] = node(item)
		}
		f["f:env"] = env
	}
	if len(c.mounts) > 0 {
		ms := fields{".": leaf()}
		for _, m := range c.mounts {
			item := leaves("mountPath", "name")
			if m.readOnly {
				item["f:readOnly"] = leaf()
			}
			ms[fmt.Sprintf(`k:{"mountPath":%q}`, m.path)] = node(item)
		}
		f["f:volumeMounts"] = ms
	}
	if c.probes && len(c.ports) > 0 {
		probe := node(fields{
			"f:failureThreshold":    leaf(),
			"f:httpGet":             node(leaves("path", "port", "scheme")),
			"f:initialDelaySeconds": leaf(),
			"f:periodSeconds":       leaf(),
			"f:successThreshold":    leaf(),
			"f:timeoutSeconds":      leaf(),
		})
		f["f:livenessProbe"] = probe
		f["f:readinessProbe"] = probe
	}
	if c.security {
		f["f:securityContext"] = node(fields{
			"f:allowPrivilegeEscalation": leaf(),
			"f:capabilities":             node(leaves("drop")),
			"f:readOnlyRootFilesystem":   leaf(),
			"f:runAsNonRoot":             leaf(),
			"f:seccompProfile":           node(leaves("type")),
		})
	}
	return node(f)
}

// managedFieldsEntry is one managedFields entry.
func managedFieldsEntry(manager, operation, apiVersion, at, subresource string, tree fields) object {
	return obj(
		"manager", manager,
		"operation", operation,
		"apiVersion", apiVersion,
		"time", at,
		"fieldsType", "FieldsV1",
		"fieldsV1", tree,
		"subresource", stringOrNil(subresource),
	)
}

// persisted says whether an object is being created (nil) or already
// stored, with its server-set metadata.
type persisted struct {
	uid             string
	resourceVersion string
}

// podObject renders a Pod named name from t.
func podObject(name string, t podTemplate, stored *persisted) object {
	tree := fields{"f:spec": specFields(t)}
	if md := metadataFields(t); len(md) > 0 {
		tree["f:metadata"] = md
	}
	managed := []object{managedFieldsEntry("kubectl-create", "Update", "v1", createdAt, "", tree)}
	meta := obj("name", name, "namespace", namespace)
	status := obj()
	if stored != nil {
		meta = meta.set("uid", stored.uid).
			set("resourceVersion", stored.resourceVersion).
			set("creationTimestamp", createdAt)
		managed = append(managed, managedFieldsEntry("kube-scheduler", "Update", "v1", scheduledAt, "status",
			fields{"f:status": fields{"f:conditions": fields{
				".":                         leaf(),
				`k:{"type":"PodScheduled"}`: node(leaves("lastProbeTime", "lastTransitionTime", "message", "reason", "status", "type")),
			}}}))
		status = obj(
			"phase", "Pending",
			"conditions", []object{obj(
				"type", "PodScheduled",
				"status", "False",
				"lastProbeTime", null,
				"lastTransitionTime", scheduledAt,
				"reason", "Unschedulable",
				"message", "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
			)},
			"qosClass", "Burstable",
		)
	}
	meta = meta.
		set("labels", mapOrNil(t.labels)).
		set("annotations", mapOrNil(t.annotations)).
		set("managedFields", managed)
	return obj(
		"kind", "Pod",
		"apiVersion", "v1",
		"metadata", dropNil(meta),
		"spec", podSpecJSON(t, true),
		"status", status,
	)
}

// deploymentObject renders a Deployment named name whose pod template is t.
func deploymentObject(name string, replicas int, t podTemplate, stored *persisted) object {
	selector := map[string]string{"app": t.labels["app"]}
	templateMeta := fields{}
	if md := metadataFields(t); len(md) > 0 {
		templateMeta = md
	}
	tree := fields{
		"f:metadata": fields{"f:labels": node(leaves("app"))},
		"f:spec": merge(leaves("progressDeadlineSeconds", "replicas", "revisionHistoryLimit", "selector"), fields{
			"f:strategy": fields{
				"f:rollingUpdate": node(leaves("maxSurge", "maxUnavailable")),
				"f:type":          leaf(),
			},
			"f:template": fields{
				"f:metadata": templateMeta,
				"f:spec":     specFields(t),
			},
		}),
	}
	managed := []object{managedFieldsEntry("kubectl-create", "Update", "apps/v1", createdAt, "", tree)}
	meta := obj("name", name, "namespace", namespace)
	var annotations map[string]string
	status := obj()
	if stored != nil {
		meta = meta.set("uid", stored.uid).
			set("resourceVersion", stored.resourceVersion).
			set("generation", 1).
			set("creationTimestamp", createdAt)
		annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
		managed = append(managed,
			managedFieldsEntry("kube-controller-manager", "Update", "apps/v1", scheduledAt, "",
				fields{"f:metadata": fields{"f:annotations": node(leaves("deployment.kubernetes.io/revision"))}}),
			managedFieldsEntry("kube-controller-manager", "Update", "apps/v1", scheduledAt, "status",
				fields{"f:status": merge(leaves("availableReplicas", "observedGeneration", "readyReplicas", "replicas", "updatedReplicas"),
					fields{"f:conditions": fields{
						".":                        leaf(),
						`k:{"type":"Available"}`:   node(leaves("lastTransitionTime", "lastUpdateTime", "message", "reason", "status", "type")),
						`k:{"type":"Progressing"}`: node(leaves("lastTransitionTime", "lastUpdateTime", "message", "reason", "status", "type")),
					}})}),
		)
		status = obj(
			"observedGeneration", 1,
			"replicas", replicas,
			"updatedReplicas", replicas,
			"readyReplicas", replicas,
			"availableReplicas", replicas,
			"conditions", []object{
				obj("type", "Available", "status", "True", "lastUpdateTime", scheduledAt, "lastTransitionTime", scheduledAt,
					"reason", "MinimumReplicasAvailable", "message", "Deployment has minimum availability."),
				obj("type", "Progressing", "status", "True", "lastUpdateTime", scheduledAt, "lastTransitionTime", createdAt,
					"reason", "NewReplicaSetAvailable", "message", fmt.Sprintf("ReplicaSet %q has successfully progressed.", name+"-5d8f7c9b6d")),
			},
		)
	}
	meta = meta.
		set("labels", map[string]string{"app": t.labels["app"]}).
		set("annotations", mapOrNil(annotations)).
		set("managedFields", managed)
	return obj(
		"kind", "Deployment",
		"apiVersion", "apps/v1",
		"metadata", dropNil(meta),
		"spec", obj(
			"replicas", replicas,
			"selector", obj("matchLabels", selector),
			"template", obj(
				"metadata", obj("labels", mapOrNil(t.labels), "annotations", mapOrNil(t.annotations)),
				"spec", podSpecJSON(t, false),
			),
			"strategy", obj("type", "RollingUpdate", "rollingUpdate", obj("maxUnavailable", "25%", "maxSurge", "25%")),
			"revisionHistoryLimit", 10,
			"progressDeadlineSeconds", 600,
		),
		"status", status,
	)
}

func portName(container string, i int) string {
	name := container
	if len(name) > 10 {
		name = name[:10]
	}
	if i == 0 {
		return name
	}
	return name + "-" + strconv.Itoa(i)
}

// doubleCPU doubles a CPU quantity in millicores ("250m" -> "500m").
func doubleCPU(q string) string {
	n, err := strconv.Atoi(q[:len(q)-1])
	if err != nil || q[len(q)-1] != 'm' {
		panic(fmt.Sprintf("doubleCPU: %q is not in millicores", q))
	}
	return strconv.Itoa(2*n) + "m"
}

// The helpers below turn empty values into nil so that obj leaves them out,
// as omitempty does.

func boolOrNil(b bool) any {
	if !b {
		return nil
	}
	return true
}

func stringOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func stringsOrNil(s []string) any {
	if len(s) == 0 {
		return nil
	}
	return s
}

func objectsOrNil(o []object) any {
	if len(o) == 0 {
		return nil
	}
	return o
}

func objectOrNil(o object) any {
	if o == nil {
		return nil
	}
	return o
}

func mapOrNil(m map[string]string) any {
	if len(m) == 0 {
		return nil
	}
	return m
}

// dropNil removes members whose value is nil (set keeps them).
func dropNil(o object) object {
	out := o[:0:0]
	for _, m := range o {
		switch v := m.value.(type) {
		case nil:
			continue
		case json.RawMessage:
			if v == nil {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}
