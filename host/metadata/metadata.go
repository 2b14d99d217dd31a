package metadata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// SectionName is the custom section in which kwctl stores the metadata, as
// compact JSON.
const SectionName = "io.kubewarden.metadata"

// ProtocolV1 is the only waPC protocol version Kubewarden defines; it is what
// a policy's `protocol_version` operation answers.
const ProtocolV1 = "v1"

// Execution modes (metadata `executionMode`).
const (
	// ExecutionModeKubewardenWapc is a waPC policy, the default.
	ExecutionModeKubewardenWapc = "kubewarden-wapc"
	// ExecutionModeOpa is a Rego policy built for Open Policy Agent.
	ExecutionModeOpa = "opa"
	// ExecutionModeGatekeeper is a Rego policy built for Gatekeeper.
	ExecutionModeGatekeeper = "gatekeeper"
	// ExecutionModeWasi is a WASI command policy (argv/stdin/stdout ABI).
	ExecutionModeWasi = "wasi"
)

// Policy types (metadata `policyType`).
const (
	// PolicyTypeKubernetes evaluates Kubernetes AdmissionRequests, the default.
	PolicyTypeKubernetes = "kubernetes"
	// PolicyTypeRaw evaluates arbitrary JSON documents.
	PolicyTypeRaw = "raw"
)

// Well-known annotations.
const (
	// AnnotationUsage holds the policy's README; `kwctl annotate -u` fills it.
	AnnotationUsage = "io.kubewarden.policy.usage"
	// AnnotationSeverity is read by Kubewarden's audit scanner.
	AnnotationSeverity = "io.kubewarden.policy.severity"
)

// Operation is an admission operation a rule matches.
type Operation string

// The operations a Kubernetes webhook rule accepts.
const (
	OperationCreate  Operation = "CREATE"
	OperationUpdate  Operation = "UPDATE"
	OperationDelete  Operation = "DELETE"
	OperationConnect Operation = "CONNECT"
	OperationAll     Operation = "*"
)

// Rule is one webhook rule: which requests the policy is registered for. It
// has the shape of a Kubernetes RuleWithOperations.
//
// # Notes
//
// A fork of Kubewarden's evaluator adds an optional `scope`; it is not
// supported here, and a metadata.yml using it is rejected as unknown.
type Rule struct {
	APIGroups   []string    `json:"apiGroups"`
	APIVersions []string    `json:"apiVersions"`
	Resources   []string    `json:"resources"`
	Operations  []Operation `json:"operations"`
}

// ContextAwareResource is a Kubernetes resource type the policy may read
// through host capabilities.
type ContextAwareResource struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// Metadata is Kubewarden policy metadata. Zero values are not defaults: use
// [Parse] or [Decode], which apply Kubewarden's defaults (backgroundAudit
// true, executionMode kubewarden-wapc, policyType kubernetes).
type Metadata struct {
	// ProtocolVersion is what the module's protocol_version operation
	// answered; empty in metadata.yml, filled in by annotate.
	ProtocolVersion string
	Rules           []Rule
	// Annotations is nil when absent; an empty non-nil map is kept as {}.
	Annotations     map[string]string
	Mutating        bool
	BackgroundAudit bool
	ExecutionMode   string
	PolicyType      string
	// ContextAwareResources is written as a sorted set, like kwctl's BTreeSet.
	ContextAwareResources []ContextAwareResource
	// HostCapabilities is nil when absent (newer Kubewarden only). Written as
	// a sorted set.
	HostCapabilities []string
	// MinimumKubewardenVersion is a semantic version, empty when absent.
	MinimumKubewardenVersion string
}

// wire is the JSON/YAML shape of Metadata. Pointers tell absent fields from
// zero values, so defaults can be applied and `mutating` can be required.
type wire struct {
	ProtocolVersion          string                 `json:"protocolVersion,omitempty"`
	Rules                    []Rule                 `json:"rules"`
	Annotations              *map[string]string     `json:"annotations,omitempty"`
	Mutating                 *bool                  `json:"mutating"`
	BackgroundAudit          *bool                  `json:"backgroundAudit,omitempty"`
	ExecutionMode            string                 `json:"executionMode,omitempty"`
	PolicyType               string                 `json:"policyType,omitempty"`
	ContextAwareResources    []ContextAwareResource `json:"contextAwareResources"`
	HostCapabilities         *[]string              `json:"hostCapabilities,omitempty"`
	MinimumKubewardenVersion string                 `json:"minimumKubewardenVersion,omitempty"`
}

// Exact key sets, checked case-sensitively: encoding/json matches keys
// case-insensitively, while kwctl (serde) does not, so `Mutating: true` must
// not be silently accepted as `mutating`.
var (
	metadataKeys = []string{
		"protocolVersion", "rules", "annotations", "mutating", "backgroundAudit", "executionMode",
		"policyType", "contextAwareResources", "hostCapabilities", "minimumKubewardenVersion",
	}
	ruleKeys                 = []string{"apiGroups", "apiVersions", "resources", "operations"}
	contextAwareResourceKeys = []string{"apiVersion", "kind"}
)

// Parse reads a metadata.yml document (YAML, or JSON, which is YAML) strictly:
// unknown or duplicate keys and wrong types are errors, so a typo cannot
// silently drop a setting. `mutating` is required; defaults are applied. It
// does not call Validate.
func Parse(data []byte) (*Metadata, error) {
	var w wire
	if err := yaml.UnmarshalStrict(data, &w); err != nil {
		return nil, fmt.Errorf("parse metadata: %w", err)
	}
	asJSON, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse metadata: %w", err)
	}
	if err := checkKeys(asJSON); err != nil {
		return nil, fmt.Errorf("parse metadata: %w", err)
	}
	return w.metadata()
}

// Decode reads the JSON content of an io.kubewarden.metadata section.
// Unlike Parse it ignores unknown keys, as kwctl does, so modules annotated
// by a newer kwctl can still be inspected.
func Decode(section []byte) (*Metadata, error) {
	var w wire
	if err := json.Unmarshal(section, &w); err != nil {
		return nil, fmt.Errorf("decode metadata section: %w", err)
	}
	return w.metadata()
}

func (w *wire) metadata() (*Metadata, error) {
	if w.Mutating == nil {
		return nil, errors.New("mutating: required field is missing")
	}
	md := &Metadata{
		ProtocolVersion:          w.ProtocolVersion,
		Rules:                    w.Rules,
		Mutating:                 *w.Mutating,
		BackgroundAudit:          true,
		ExecutionMode:            ExecutionModeKubewardenWapc,
		PolicyType:               PolicyTypeKubernetes,
		ContextAwareResources:    w.ContextAwareResources,
		MinimumKubewardenVersion: w.MinimumKubewardenVersion,
	}
	if w.Annotations != nil {
		md.Annotations = *w.Annotations
		if md.Annotations == nil { // `annotations: null`
			md.Annotations = map[string]string{}
		}
	}
	if w.BackgroundAudit != nil {
		md.BackgroundAudit = *w.BackgroundAudit
	}
	if w.ExecutionMode != "" {
		md.ExecutionMode = w.ExecutionMode
	}
	if w.PolicyType != "" {
		md.PolicyType = w.PolicyType
	}
	if w.HostCapabilities != nil {
		md.HostCapabilities = *w.HostCapabilities
		if md.HostCapabilities == nil {
			md.HostCapabilities = []string{}
		}
	}
	return md, nil
}

// MarshalJSON writes the compact JSON kwctl stores in the custom section. It
// has a value receiver so that a Metadata value, not only a pointer, encodes
// in this form.
//
// # Notes
//
// Field order follows the Rust `Metadata` struct of Kubewarden's
// policy-evaluator (crates/policy-evaluator/src/policy_metadata.rs):
// protocolVersion, rules, annotations, mutating, backgroundAudit,
// executionMode, policyType, contextAwareResources, hostCapabilities,
// minimumKubewardenVersion; optional ones are omitted when absent.
// Annotations are sorted by key (BTreeMap), contextAwareResources and
// hostCapabilities are sorted and deduplicated (BTreeSet). Like serde_json,
// `<`, `>` and `&` are not escaped; unlike serde_json, Go escapes U+2028 and
// U+2029, which only changes bytes, not meaning.
func (m Metadata) MarshalJSON() ([]byte, error) {
	w := wire{
		ProtocolVersion:          m.ProtocolVersion,
		Rules:                    make([]Rule, 0, len(m.Rules)),
		Mutating:                 &m.Mutating,
		BackgroundAudit:          &m.BackgroundAudit,
		ExecutionMode:            m.ExecutionMode,
		PolicyType:               m.PolicyType,
		ContextAwareResources:    sortedResources(m.ContextAwareResources),
		MinimumKubewardenVersion: m.MinimumKubewardenVersion,
	}
	for _, r := range m.Rules {
		w.Rules = append(w.Rules, Rule{
			APIGroups:   nonNil(r.APIGroups),
			APIVersions: nonNil(r.APIVersions),
			Resources:   nonNil(r.Resources),
			Operations:  nonNil(r.Operations),
		})
	}
	if m.Annotations != nil {
		w.Annotations = &m.Annotations
	}
	if m.HostCapabilities != nil {
		caps := nonNil(slices.Compact(slices.Sorted(slices.Values(m.HostCapabilities))))
		w.HostCapabilities = &caps
	}
	// executionMode and policyType are always written by kwctl: fill the
	// defaults for a Metadata built by hand.
	if w.ExecutionMode == "" {
		w.ExecutionMode = ExecutionModeKubewardenWapc
	}
	if w.PolicyType == "" {
		w.PolicyType = PolicyTypeKubernetes
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func sortedResources(in []ContextAwareResource) []ContextAwareResource {
	out := slices.Clone(nonNil(in))
	slices.SortFunc(out, func(a, b ContextAwareResource) int {
		if c := strings.Compare(a.APIVersion, b.APIVersion); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	return slices.Compact(out)
}

// checkKeys rejects keys that are not spelled exactly as Kubewarden spells
// them, at every level that has a fixed key set.
func checkKeys(doc []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return fmt.Errorf("the document must be a mapping: %w", err)
	}
	var errs []error
	errs = append(errs, unknownKeys("", top, metadataKeys)...)
	errs = append(errs, checkListKeys("rules", top["rules"], ruleKeys)...)
	errs = append(errs, checkListKeys("contextAwareResources", top["contextAwareResources"], contextAwareResourceKeys)...)
	return errors.Join(errs...)
}

func checkListKeys(path string, raw json.RawMessage, known []string) []error {
	var items []map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &items) != nil {
		return nil // wrong types are reported by the typed decoding
	}
	var errs []error
	for i, item := range items {
		errs = append(errs, unknownKeys(fmt.Sprintf("%s[%d].", path, i), item, known)...)
	}
	return errs
}

func unknownKeys(prefix string, obj map[string]json.RawMessage, known []string) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(known, k) {
			errs = append(errs, fmt.Errorf("%s%s: unknown field", prefix, k))
		}
	}
	return errs
}

// semverRE is the regular expression suggested by semver.org (SemVer 2.0.0),
// which the Rust semver crate kwctl uses also enforces: no leading "v".
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

var severities = []string{"info", "low", "medium", "high", "critical"}

// Validate checks the metadata the way kwctl does before annotating, and a
// little more: every problem is reported, each with its field path.
//
// Checked: at least one rule (kwctl accepts none, but a policy without rules
// is never called); each rule's lists non-empty and `*` alone; resources
// follow the Kubernetes webhook rule checks; operations among CREATE, UPDATE,
// DELETE, CONNECT and `*`; known executionMode and policyType; a v1 protocol
// version when set on a waPC policy; non-empty context-aware resources and
// host capabilities; a semantic minimumKubewardenVersion; and the severity
// annotation, if present, among info, low, medium, high, critical.
func (m *Metadata) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if len(m.Rules) == 0 {
		add("rules: at least one rule is required")
	}
	for i, r := range m.Rules {
		p := fmt.Sprintf("rules[%d]", i)
		errs = append(errs, validateNames(p+".apiGroups", r.APIGroups, true)...)
		errs = append(errs, validateNames(p+".apiVersions", r.APIVersions, false)...)
		errs = append(errs, validateResources(p+".resources", r.Resources)...)
		errs = append(errs, validateOperations(p+".operations", r.Operations)...)
	}

	switch m.ExecutionMode {
	case ExecutionModeKubewardenWapc, ExecutionModeOpa, ExecutionModeGatekeeper, ExecutionModeWasi:
	default:
		add("executionMode: unsupported value %q (want %s, %s, %s or %s)", m.ExecutionMode,
			ExecutionModeKubewardenWapc, ExecutionModeOpa, ExecutionModeGatekeeper, ExecutionModeWasi)
	}
	switch m.PolicyType {
	case PolicyTypeKubernetes, PolicyTypeRaw:
	default:
		add("policyType: unsupported value %q (want %s or %s)", m.PolicyType, PolicyTypeKubernetes, PolicyTypeRaw)
	}
	if m.ExecutionMode == ExecutionModeKubewardenWapc && m.ProtocolVersion != "" && m.ProtocolVersion != ProtocolV1 {
		add("protocolVersion: unsupported value %q (want %s)", m.ProtocolVersion, ProtocolV1)
	}
	for i, r := range m.ContextAwareResources {
		if r.APIVersion == "" {
			add("contextAwareResources[%d].apiVersion: must not be empty", i)
		}
		if r.Kind == "" {
			add("contextAwareResources[%d].kind: must not be empty", i)
		}
	}
	for i, c := range m.HostCapabilities {
		if c == "" {
			add("hostCapabilities[%d]: must not be empty", i)
		}
	}
	if v := m.MinimumKubewardenVersion; v != "" && !semverRE.MatchString(v) {
		add("minimumKubewardenVersion: %q is not a semantic version (like 1.10.0)", v)
	}
	if s, ok := m.Annotations[AnnotationSeverity]; ok && !slices.Contains(severities, s) {
		add("annotations[%s]: unsupported value %q (want one of %s)", AnnotationSeverity, s, strings.Join(severities, ", "))
	}
	return errors.Join(errs...)
}

// validateNames checks apiGroups or apiVersions: non-empty, `*` alone, and
// (apiVersions only) no empty entries; "" is the core API group.
func validateNames(path string, names []string, emptyAllowed bool) []error {
	if len(names) == 0 {
		return []error{fmt.Errorf("%s: must not be empty", path)}
	}
	var errs []error
	if slices.Contains(names, "*") && len(names) > 1 {
		errs = append(errs, fmt.Errorf("%s: if '*' is present, it must be the only entry", path))
	}
	if !emptyAllowed {
		for i, n := range names {
			if n == "" {
				errs = append(errs, fmt.Errorf("%s[%d]: must not be empty", path, i))
			}
		}
	}
	return errs
}

func validateOperations(path string, ops []Operation) []error {
	if len(ops) == 0 {
		return []error{fmt.Errorf("%s: must not be empty", path)}
	}
	var errs []error
	if slices.Contains(ops, OperationAll) && len(ops) > 1 {
		errs = append(errs, fmt.Errorf("%s: if '*' is present, it must be the only entry", path))
	}
	for i, op := range ops {
		switch op {
		case OperationCreate, OperationUpdate, OperationDelete, OperationConnect, OperationAll:
		default:
			errs = append(errs, fmt.Errorf("%s[%d]: unsupported value %q (want CREATE, UPDATE, DELETE, CONNECT or *)", path, i, op))
		}
	}
	return errs
}

// validateResources applies the Kubernetes webhook rule checks on resources
// (k8s.io/kubernetes pkg/apis/admissionregistration/validation, validateResources):
// entries are "resource" or "resource/subresource" with `*` wildcards, and
// no entry may be already covered by a wildcard in another one. Unlike
// Kubernetes, the check does not depend on the order of the entries.
func validateResources(path string, resources []string) []error {
	if len(resources) == 0 {
		return []error{fmt.Errorf("%s: must not be empty", path)}
	}
	var errs []error
	wildSub := map[string]bool{} // "x/*": every subresource of x
	wildRes := map[string]bool{} // "*/y": subresource y of every resource
	hasAll, hasPlain := false, false
	for i, r := range resources {
		if r == "" {
			errs = append(errs, fmt.Errorf("%s[%d]: must not be empty", path, i))
			continue
		}
		res, sub, ok := strings.Cut(r, "/")
		switch {
		case !ok && r == "*":
			hasAll = true
		case !ok:
			hasPlain = true
		case sub == "*":
			wildSub[res] = true
		}
		if ok && res == "*" {
			wildRes[sub] = true
		}
	}
	if slices.Contains(resources, "*/*") && len(resources) > 1 {
		errs = append(errs, fmt.Errorf("%s: if '*/*' is present, it must be the only entry", path))
	}
	if hasAll && hasPlain {
		errs = append(errs, fmt.Errorf("%s: if '*' is present, no other resource without a subresource may be listed", path))
	}
	for i, r := range resources {
		res, sub, ok := strings.Cut(r, "/")
		if !ok || r == "*/*" {
			continue
		}
		if sub != "*" && wildSub[res] {
			errs = append(errs, fmt.Errorf("%s[%d]: %q is already covered by '%s/*'", path, i, r, res))
		}
		if res != "*" && wildRes[sub] {
			errs = append(errs, fmt.Errorf("%s[%d]: %q is already covered by '*/%s'", path, i, r, sub))
		}
	}
	return errs
}
