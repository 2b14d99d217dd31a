// Package cel writes the policy's core rules as admission policies that
// the API server evaluates itself: a MutatingAdmissionPolicy that records
// the submitter and restores a removed value, and a
// ValidatingAdmissionPolicy that refuses what the policy module refuses
// (docs/BEHAVIOUR.md, "In-apiserver mode").
//
// The settings must have been accepted by the module's validate_settings
// first; rules that read the cluster are refused (ErrNeedsWebhook).
package cel

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Options choose what Generate writes.
type Options struct {
	// KubeVersion is the API server's minor version, "1.34" and later:
	// MutatingAdmissionPolicy is admissionregistration.k8s.io/v1 from
	// 1.36, v1beta1 (off by default) in 1.34 and 1.35.
	KubeVersion string
	// Name prefixes the objects' names; default "yunikorn-userinfo".
	Name string
}

// MAPVersion is the MutatingAdmissionPolicy API version for a Kubernetes
// minor version.
func MAPVersion(kube string) (string, error) {
	major, minor, ok := strings.Cut(strings.TrimPrefix(kube, "v"), ".")
	if minor, _, _ = strings.Cut(minor, "."); !ok || major != "1" {
		return "", fmt.Errorf("--kube-version %q: want a Kubernetes version like 1.36", kube)
	}
	n, err := strconv.Atoi(minor)
	switch {
	case err != nil:
		return "", fmt.Errorf("--kube-version %q: want a Kubernetes version like 1.36", kube)
	case n >= 36:
		return "admissionregistration.k8s.io/v1", nil
	case n >= 34:
		return "admissionregistration.k8s.io/v1beta1", nil
	}
	return "", fmt.Errorf("--kube-version %q: MutatingAdmissionPolicy is beta from Kubernetes 1.34 (v1beta1, behind its feature gate) and GA from 1.36; older API servers need the webhook", kube)
}

// target is one shape of object: where the metadata that carries the
// annotation is, and the resources of that shape.
type target struct {
	name string
	// path are the fields from the object to that metadata.
	path  []string
	rules []resourceRule
	// binding: a Binding, whose annotations the API server merges into
	// the Pod; only refused when it carries the annotation.
	binding bool
}

var targets = []target{
	{name: "pods", path: []string{"metadata"}, rules: []resourceRule{
		{APIGroups: []string{""}, APIVersions: []string{"v1"}, Operations: []string{"CREATE", "UPDATE"}, Resources: []string{"pods"}},
		// Their strategies keep (status) or reset (ephemeralcontainers)
		// metadata changes: guarded as the webhook guards them.
		{APIGroups: []string{""}, APIVersions: []string{"v1"}, Operations: []string{"UPDATE"}, Resources: []string{"pods/status", "pods/ephemeralcontainers"}},
	}},
	{name: "templates", path: []string{"spec", "template", "metadata"}, rules: []resourceRule{
		{APIGroups: []string{""}, APIVersions: []string{"v1"}, Operations: []string{"CREATE", "UPDATE"}, Resources: []string{"replicationcontrollers"}},
		{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Operations: []string{"CREATE", "UPDATE"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}},
		{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Operations: []string{"CREATE", "UPDATE"}, Resources: []string{"jobs"}},
	}},
	{name: "cronjobs", path: []string{"spec", "jobTemplate", "spec", "template", "metadata"}, rules: []resourceRule{
		{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Operations: []string{"CREATE", "UPDATE"}, Resources: []string{"cronjobs"}},
	}},
	{name: "bindings", path: []string{"metadata"}, binding: true, rules: []resourceRule{
		{APIGroups: []string{""}, APIVersions: []string{"v1"}, Operations: []string{"CREATE"}, Resources: []string{"pods/binding", "bindings"}},
	}},
}

// optional is the CEL optional of the field at path under root.
func optional(root string, path []string, last ...string) string {
	return root + ".?" + strings.Join(append(append([]string(nil), path...), last...), ".?")
}

// annotation is the CEL optional of the user.info annotation of root.
func (t target) annotation(root string) string {
	return optional(root, t.path, "annotations") + "[?" + Quote(AnnotationKey) + "]"
}

// pointer is the JSON pointer of the target's metadata.
func (t target) pointer() string { return "/" + strings.Join(t.path, "/") }

type (
	object struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   meta   `json:"metadata"`
		Spec       any    `json:"spec"`
	}
	meta struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels,omitempty"`
	}
	resourceRule struct {
		APIGroups   []string `json:"apiGroups"`
		APIVersions []string `json:"apiVersions"`
		Operations  []string `json:"operations"`
		Resources   []string `json:"resources"`
	}
	matchResources struct {
		ResourceRules []resourceRule `json:"resourceRules"`
	}
	matchCondition struct {
		Name       string `json:"name"`
		Expression string `json:"expression"`
	}
	validation struct {
		Expression string `json:"expression"`
		// Message is what the API server shows when MessageExpression
		// fails or yields a line break (a name may hold one).
		Message           string `json:"message"`
		MessageExpression string `json:"messageExpression,omitempty"`
		Reason            string `json:"reason"`
	}
	auditAnnotation struct {
		Key             string `json:"key"`
		ValueExpression string `json:"valueExpression"`
	}
	vapSpec struct {
		ParamKind        map[string]string `json:"paramKind,omitempty"`
		FailurePolicy    string            `json:"failurePolicy"`
		MatchConstraints matchResources    `json:"matchConstraints"`
		MatchConditions  []matchCondition  `json:"matchConditions,omitempty"`
		Variables        []variable        `json:"variables,omitempty"`
		Validations      []validation      `json:"validations"`
		AuditAnnotations []auditAnnotation `json:"auditAnnotations,omitempty"`
	}
	mutation struct {
		PatchType string    `json:"patchType"`
		JSONPatch jsonPatch `json:"jsonPatch"`
	}
	jsonPatch struct {
		Expression string `json:"expression"`
	}
	mapSpec struct {
		ParamKind          map[string]string `json:"paramKind,omitempty"`
		FailurePolicy      string            `json:"failurePolicy"`
		ReinvocationPolicy string            `json:"reinvocationPolicy"`
		MatchConstraints   matchResources    `json:"matchConstraints"`
		MatchConditions    []matchCondition  `json:"matchConditions,omitempty"`
		Variables          []variable        `json:"variables,omitempty"`
		Mutations          []mutation        `json:"mutations"`
	}
	bindingSpec struct {
		PolicyName        string   `json:"policyName"`
		ValidationActions []string `json:"validationActions,omitempty"`
	}
)

// Objects returns the policies and bindings for s, in the order they are
// best applied: each mutating policy before its validating twin, each
// policy before its binding.
func Objects(s *Settings, o Options) ([]any, error) {
	mapVersion, err := MAPVersion(o.KubeVersion)
	if err != nil {
		return nil, err
	}
	prefix := o.Name
	if prefix == "" {
		prefix = "yunikorn-userinfo"
	}
	labels := map[string]string{"app.kubernetes.io/name": "yunikorn-userinfo", "app.kubernetes.io/component": "cel"}
	var out []any
	for _, t := range targets {
		name := prefix + "-" + t.name
		if !t.binding && !s.ValidateOnly {
			out = append(out,
				object{mapVersion, "MutatingAdmissionPolicy", meta{name, labels}, mutatingSpec(s, t)},
				object{mapVersion, "MutatingAdmissionPolicyBinding", meta{name, labels}, bindingSpec{PolicyName: name}})
		}
		out = append(out,
			object{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", meta{name, labels}, validatingSpec(s, t)},
			object{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", meta{name, labels},
				bindingSpec{PolicyName: name, ValidationActions: []string{"Deny"}}})
	}
	return out, nil
}

// Generate writes the objects as a YAML stream.
func Generate(s *Settings, o Options) ([]byte, error) {
	objs, err := Objects(s, o)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# The core rules of the yunikorn-user-info policy, evaluated by the API server\n" +
		"# itself (yunikorn-userinfo cel). Context rules need the webhook.\n")
	for _, obj := range objs {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encode %T: %w", obj, err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

// changed is the CEL condition of an UPDATE that adds, removes or changes
// the annotation; a CREATE always counts.
func (t target) changed() string {
	return "request.operation != 'UPDATE' || " + t.annotation("object") + ".hasValue() != " + t.annotation("oldObject") + ".hasValue() || " +
		t.annotation("object") + ".orValue('') != " + t.annotation("oldObject") + ".orValue('')"
}

// exempt is the CEL condition of a CREATE without the annotation that the
// policy admits unchanged (docs/BEHAVIOUR.md §4.1): bypassAuth with the
// legacy label, and a ReplicaSet that a system user creates from its
// Deployment's annotated template.
func exempt(s *Settings, t target) string {
	var parts []string
	if s.params {
		parts = append(parts, "("+paramTrue("bypassAuth", false)+" && "+optional("object", t.path, "labels")+"[?"+
			paramKey("userLabelKey", defaultUserLabelKey)+"].orValue('') != '')")
		if t.name == "templates" {
			parts = append(parts, "(request.kind.group == 'apps' && request.kind.kind == 'ReplicaSet' && "+paramMatch("variables.user", "systemUsers")+")")
		}
		return strings.Join(parts, " || ")
	}
	if s.BypassAuth {
		parts = append(parts, optional("object", t.path, "labels")+"[?"+Quote(s.UserLabelKey)+"].orValue('') != ''")
	}
	if t.name == "templates" && len(s.SystemUsers) > 0 {
		parts = append(parts, "(request.kind.group == 'apps' && request.kind.kind == 'ReplicaSet' && "+anyMatch("variables.user", s.SystemUsers)+")")
	}
	if len(parts) == 0 {
		return "false"
	}
	return strings.Join(parts, " || ")
}

func (t target) variables(s *Settings) []variable {
	vs := identityVariables(s)
	return append(vs,
		variable{"ann", t.annotation("object")},
		variable{"exempt", exempt(s, t)})
}

func mutatingSpec(s *Settings, t target) mapSpec {
	key := Quote(AnnotationKey)
	// add sets the annotation to v, creating the annotations map or the
	// template's metadata when they are absent.
	ptr := t.pointer()
	parent := optional("object", t.path)
	add := func(v string) string {
		return "(" + parent + ".hasValue() ? (" + optional("object", t.path, "annotations") + ".hasValue() ? " +
			"[JSONPatch{op: 'add', path: " + Quote(ptr+"/annotations/") + " + jsonpatch.escapeKey(" + key + "), value: " + v + "}] : " +
			"[JSONPatch{op: 'add', path: " + Quote(ptr+"/annotations") + ", value: {" + key + ": " + v + "}}]) : " +
			"[JSONPatch{op: 'add', path: " + Quote(ptr) + ", value: {'annotations': {" + key + ": " + v + "}}}])"
	}
	old := t.annotation("oldObject")
	expr := "request.operation == 'CREATE' ? " +
		"(!variables.exempt && variables.encodable ? " + add("variables.own") + " : []) : " +
		"(" + old + ".hasValue() ? " + add(old+".value()") + " : [])"
	return mapSpec{
		FailurePolicy:      "Fail",
		ReinvocationPolicy: "IfNeeded",
		MatchConstraints:   matchResources{ResourceRules: t.rules},
		MatchConditions: []matchCondition{{Name: "annotation-absent",
			Expression: "!" + t.annotation("object") + ".hasValue() && (request.operation == 'CREATE' || " + old + ".hasValue())"}},
		Variables: t.variables(s),
		Mutations: []mutation{{PatchType: "JSONPatch", JSONPatch: jsonPatch{Expression: expr}}},
	}
}

func validatingSpec(s *Settings, t target) vapSpec {
	if t.binding {
		return vapSpec{
			FailurePolicy:    "Fail",
			MatchConstraints: matchResources{ResourceRules: t.rules},
			Validations: []validation{{
				Expression:        "!" + t.annotation("object") + ".hasValue()",
				Message:           msgChangeNotAllowed,
				MessageExpression: Quote(msgChangeNotAllowed),
				Reason:            "Forbidden",
			}},
		}
	}
	bypass := strconv.FormatBool(s.BypassAuth)
	if s.params {
		bypass = paramTrue("bypassAuth", false)
	}
	old := t.annotation("oldObject")
	labelKey := Quote(s.UserLabelKey)
	if s.params {
		labelKey = paramKey("userLabelKey", defaultUserLabelKey)
	}
	label := func(root string) string { return optional(root, t.path, "labels") + "[?" + labelKey + "].orValue('')" }
	return vapSpec{
		FailurePolicy:    "Fail",
		MatchConstraints: matchResources{ResourceRules: t.rules},
		MatchConditions: []matchCondition{{Name: "annotation-judged", Expression: t.changed() +
			" || " + label("object") + " != " + label("oldObject")}},
		Variables: append(t.variables(s),
			variable{"label", label("object")},
			variable{"oldLabel", label("oldObject")}),
		Validations: []validation{
			{
				// CREATE without the annotation: recorded by the mutating
				// policy unless exempt.
				Expression:        "request.operation != 'CREATE' || variables.ann.hasValue() || variables.exempt",
				Message:           msgMissing,
				MessageExpression: "variables.encodable ? " + Quote(msgMissing) + " : variables.cannotRecord",
				Reason:            "Forbidden",
			},
			{
				// CREATE with a value, by a submitter who may not supply
				// one: only the submitter's own identity.
				// The submitter's own value first: the commonest case (the
				// mutating policy's stamp) then never matches the allow-lists'
				// patterns, which the chart's form compiles on every call.
				Expression: "request.operation != 'CREATE' || !variables.ann.hasValue() || " + bypass +
					" || (variables.encodable && variables.ann.value() == variables.own) || variables.allowed",
				Message:           "the submitter is not allowed to set user annotation",
				MessageExpression: "variables.encodable ? variables.notAllowed : variables.cannotRecord",
				Reason:            "Forbidden",
			},
			{
				// CREATE with a value, by an allowed submitter: a value in
				// the form encoding/json writes.
				Expression: "request.operation != 'CREATE' || !variables.ann.hasValue() || " + bypass +
					" || (variables.encodable && variables.ann.value() == variables.own) || !variables.allowed || " +
					"(variables.ann.value().matches(" + Quote(canonicalValue) + ") && !" + invalidUTF8("variables.ann.value()") + ")",
				Message:           msgNotCanonical,
				MessageExpression: Quote(msgNotCanonical),
				Reason:            "Invalid",
			},
			{
				// UPDATE: the recorded identity never changes; a removal
				// was restored by the mutating policy.
				Expression: "request.operation != 'UPDATE' || (" + old + ".hasValue() ? " +
					"(variables.ann.hasValue() && variables.ann.value() == " + old + ".value()) : !variables.ann.hasValue())",
				Message:           msgChangeNotAllowed,
				MessageExpression: old + ".hasValue() && !variables.ann.hasValue() ? " + Quote(msgRemoved) + " : " + Quote(msgChangeNotAllowed),
				Reason:            "Forbidden",
			},
			{
				// UPDATE of an object that records no user.info: YuniKorn
				// reads the legacy username label instead, so adding or
				// changing it is judged as a supplied value would be.
				Expression: "request.operation != 'UPDATE' || variables.ann.hasValue() || " + old + ".hasValue() || " +
					"variables.label == '' || variables.label == variables.oldLabel || " + bypass +
					" || variables.label == variables.user || variables.allowed",
				Message: msgChangeNotAllowed,
				MessageExpression: Quote(msgChangeNotAllowed+": the object records no "+AnnotationKey+
					", so YuniKorn reads its user from the legacy username label, which would name ") +
					" + variables.label + '; ' + variables.notAllowed",
				Reason: "Forbidden",
			},
		},
	}
}

// StaticSuffix ends the name of every object an API server loads from its
// static manifests (k8s.io/apiserver admission/plugin/manifest): no
// object created through the API may carry it, so nobody can shadow,
// edit or delete them.
const StaticSuffix = ".static.k8s.io"

// StaticFiles is the staticManifestsDir form (ManifestBasedAdmissionControlConfig,
// beta and on by default from Kubernetes 1.37, alpha in 1.36): the
// mutating and the validating objects each in a directory of their own,
// with their names suffixed, and the AdmissionConfiguration that points
// the two admission plugins at dir. Only admissionregistration.k8s.io/v1
// objects load from manifests, so 1.36 is the least version.
func StaticFiles(s *Settings, o Options, dir string) (map[string][]byte, error) {
	v, err := MAPVersion(o.KubeVersion)
	if err != nil {
		return nil, err
	}
	if v != "admissionregistration.k8s.io/v1" {
		return nil, fmt.Errorf("--kube-version %q: static manifests load only admissionregistration.k8s.io/v1 objects: Kubernetes 1.36 or later", o.KubeVersion)
	}
	objs, err := Objects(s, o)
	if err != nil {
		return nil, err
	}
	// No comment before the first document: the API server's manifest
	// loader reads a comment-only document as an object without a kind.
	docs := map[string]*bytes.Buffer{"mutating": {}, "validating": {}}
	for _, obj := range objs {
		x := obj.(object)
		x.Metadata.Name += StaticSuffix
		if b, ok := x.Spec.(bindingSpec); ok {
			b.PolicyName += StaticSuffix
			x.Spec = b
		}
		which := "validating"
		if strings.HasPrefix(x.Kind, "Mutating") {
			which = "mutating"
		}
		y, err := yaml.Marshal(x)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", x.Kind, err)
		}
		docs[which].WriteString("---\n")
		docs[which].Write(y)
	}
	files := map[string][]byte{
		"validating/yunikorn-userinfo.yaml": docs["validating"].Bytes(),
		"admission-configuration.yaml": []byte(`# Pass to kube-apiserver with --admission-control-config-file.
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionPolicy
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: ValidatingAdmissionPolicyConfiguration
    staticManifestsDir: ` + dir + `/validating
`),
	}
	if !s.ValidateOnly {
		files["mutating/yunikorn-userinfo.yaml"] = docs["mutating"].Bytes()
		files["admission-configuration.yaml"] = append(files["admission-configuration.yaml"], []byte(`- name: MutatingAdmissionPolicy
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: MutatingAdmissionPolicyConfiguration
    staticManifestsDir: `+dir+`/mutating
`)...)
	}
	return files, nil
}
