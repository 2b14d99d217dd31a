package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/yunikorn-userinfo/userinfo/host/metadata"
	"github.com/yunikorn-userinfo/userinfo/internal/cel"
	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/ykconfig"
)

// kubewardenFlags are the flags of `migrate --kubewarden`.
type kubewardenFlags struct {
	kubewarden   bool
	module       string
	twinMode     string
	policyServer string
	follow       bool
}

func addMigrateKubewardenFlags(fs *pflag.FlagSet, f *kubewardenFlags) {
	fs.BoolVar(&f.follow, "follow", false, "write followYuniKornConfig (the policy reads the access control keys live from YuniKorn's ConfigMaps in --namespace, or the FILEs' namespace) instead of copies of them")
	fs.BoolVar(&f.kubewarden, "kubewarden", false, "print the two ClusterAdmissionPolicies (the mutating policy, protecting, and its validating twin) with the migrated settings, instead of the settings alone")
	fs.StringVar(&f.module, "module", "", "with --kubewarden: the policy module (default: the embedded module's OCI reference, registry://io.kubewarden.policy.ociUrl:vVERSION)")
	fs.StringVar(&f.twinMode, "twin-mode", "monitor", "with --kubewarden: the validating twin's mode, monitor (the watch before enforcing: docs/KUBEWARDEN.md) or protect")
	fs.StringVar(&f.policyServer, "policy-server", "default", "with --kubewarden: the PolicyServer that runs both policies")
}

// checkKubewardenFlags refuses --kubewarden's flags without it.
func (f *kubewardenFlags) check(output string, changed func(string) bool) error {
	if f.twinMode != "monitor" && f.twinMode != "protect" {
		return fmt.Errorf("invalid --twin-mode %q: want monitor or protect", f.twinMode)
	}
	if !f.kubewarden {
		for _, name := range []string{"module", "twin-mode", "policy-server"} {
			if changed(name) {
				return fmt.Errorf("--%s needs --kubewarden", name)
			}
		}
		return nil
	}
	if output != "yaml" {
		return fmt.Errorf("--kubewarden writes YAML: drop --output %s", output)
	}
	return nil
}

// kubewardenMatchCondition is the match condition of the
// ClusterAdmissionPolicies (deploy/kubewarden/clusteradmissionpolicy.yaml
// explains it; the command's tests hold the two equal).
const kubewardenMatchCondition = `request.resource.resource == 'bindings' || (has(request.subResource) && request.subResource == 'binding')
  ? has(object.metadata.annotations) && 'yunikorn.apache.org/user.info' in object.metadata.annotations
  : !has(request.subResource) || request.subResource == '' ||
    (has(object.metadata.annotations) && 'yunikorn.apache.org/user.info' in object.metadata.annotations
      ? object.metadata.annotations['yunikorn.apache.org/user.info'] : null)
    !=
    (has(oldObject.metadata.annotations) && 'yunikorn.apache.org/user.info' in oldObject.metadata.annotations
      ? oldObject.metadata.annotations['yunikorn.apache.org/user.info'] : null)
`

// kubewardenExcluded are the namespaces the policies leave out: the
// control plane's, cert-manager's and Kubewarden's own.
var kubewardenExcluded = []string{"kube-system", "cert-manager", "kubewarden"}

// writeKubewarden writes the mutating ClusterAdmissionPolicy and its
// validating twin, with the migrated settings, from the embedded module's
// metadata (rules, backgroundAudit, OCI reference).
func (a *app) writeKubewarden(res *ykconfig.Result, source string, f *kubewardenFlags) ([]byte, error) {
	section, ok, err := metadata.ReadCustomSection(a.policy, metadata.SectionName)
	if err != nil {
		return nil, fmt.Errorf("read the embedded module's metadata: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("read the embedded module's metadata: %w", errNotAnnotated)
	}
	md, err := metadata.Decode(section)
	if err != nil {
		return nil, fmt.Errorf("read the embedded module's metadata: %w", err)
	}
	module := f.module
	if module == "" {
		oci, version := md.Annotations["io.kubewarden.policy.ociUrl"], md.Annotations["io.kubewarden.policy.version"]
		if oci == "" || version == "" {
			return nil, fmt.Errorf("the embedded module names no OCI reference (io.kubewarden.policy.ociUrl and .version): pass --module")
		}
		module = "registry://" + oci + ":v" + version
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The yunikorn-user-info policy under Kubewarden, converted by `%s migrate --kubewarden`\n"+
		"# from the admission controller configuration in %s.\n"+
		"# The mutating policy protects from the start: it records every submitter and refuses\n"+
		"# forged values (a policy in monitor mode has its patches dropped by policy-server).\n"+
		"# The validating twin judges the final object after every mutating webhook; in mode\n"+
		"# monitor it only reports what it would refuse. Once it reports nothing, set its mode\n"+
		"# to protect (docs/KUBEWARDEN.md, \"Monitor mode under Kubewarden\").\n", binaryName, source)
	for i, twin := range []bool{false, true} {
		name, mode := "yunikorn-user-info", "protect"
		settings := res.Settings
		if twin {
			name, mode = name+"-validate", f.twinMode
			settings = append(append([]ykconfig.Setting(nil), settings...), ykconfig.Setting{Key: "validateOnly", Value: true, From: "the validating twin"})
		}
		doc := kubewardenPolicy(name, mode, !twin, module, f.policyServer, md, settings)
		var out bytes.Buffer
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		if err := enc.Encode(doc); err != nil {
			return nil, err
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(out.Bytes())
	}
	return b.Bytes(), nil
}

// kubewardenPolicy is one ClusterAdmissionPolicy as a YAML document, keys
// in the order deploy/kubewarden writes them.
func kubewardenPolicy(name, mode string, mutating bool, module, policyServer string, md *metadata.Metadata, settings []ykconfig.Setting) *yaml.Node {
	spec := mapNode(
		"module", str(module),
		"policyServer", str(policyServer),
		"mode", str(mode),
		"mutating", boolNode(mutating),
		"backgroundAudit", boolNode(md.BackgroundAudit),
		"failurePolicy", str("Fail"),
		"matchPolicy", str("Equivalent"),
		"sideEffects", str("None"),
		"timeoutSeconds", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: "5"},
		"rules", rulesNode(md.Rules),
		"matchConditions", matchConditionsNode(mutating, settings),
		"namespaceSelector", mapNode("matchExpressions", seqNode(mapNode(
			"key", str("kubernetes.io/metadata.name"), "operator", str("NotIn"), "values", strSeq(kubewardenExcluded)))),
	)
	if reads := contextReads(settings); len(reads) > 0 {
		var items []*yaml.Node
		for _, r := range reads {
			av, kind, _ := strings.Cut(r, " ")
			items = append(items, mapNode("apiVersion", str(av), "kind", str(kind)))
		}
		spec.Content = append(spec.Content, str("contextAwareResources"), seqNode(items...))
	}
	spec.Content = append(spec.Content, str("settings"), ykconfig.Mapping(settings))
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{mapNode(
		"apiVersion", str("policies.kubewarden.io/v1"),
		"kind", str("ClusterAdmissionPolicy"),
		"metadata", mapNode("name", str(name), "annotations", mapNode(
			"io.kubewarden.policy.title", str(md.Annotations["io.kubewarden.policy.title"]),
			"io.kubewarden.policy.severity", str(md.Annotations["io.kubewarden.policy.severity"]),
			"io.kubewarden.policy.category", str(md.Annotations["io.kubewarden.policy.category"]))),
		"spec", spec,
	)}}
}

// matchConditionsNode is the policy's match conditions: the one both
// policies share, and for the twin its own (docs/BEHAVIOUR.md §4.9) when
// the settings allow it, as the chart writes them.
func matchConditionsNode(mutating bool, settings []ykconfig.Setting) *yaml.Node {
	conds := seqNode(mapNode("name", str("user-info-may-change"),
		"expression", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kubewardenMatchCondition, Style: yaml.LiteralStyle}))
	if mutating {
		return conds
	}
	if expr, ok := twinCondition(settings); ok {
		conds.Content = append(conds.Content, mapNode("name", str(cel.TwinConditionName), "expression", str(expr)))
	}
	return conds
}

// twinCondition is the twin's own match condition for settings, unless
// they turn on a rule that reads the cluster (cel.ParseSettings refuses
// them) or set recordedGroups.
func twinCondition(settings []ykconfig.Setting) (string, bool) {
	raw, err := (&ykconfig.Result{Settings: settings}).JSON()
	if err != nil {
		return "", false
	}
	s, err := cel.ParseSettings(raw)
	if err != nil || s.RecordedGroups != nil {
		return "", false
	}
	return cel.TwinCondition(s), true
}

// contextReads are the kinds the settings make the policy read, which
// policy-server lets it read only when the policy lists them (as the
// chart lists them): "apiVersion Kind".
func contextReads(settings []ykconfig.Setting) []string {
	var out []string
	add := func(r string) {
		for _, o := range out {
			if o == r {
				return
			}
		}
		out = append(out, r)
	}
	on := func(s ykconfig.Setting) bool {
		if obj, ok := s.Value.([]ykconfig.Setting); ok {
			for _, o := range obj {
				if o.Key == "mode" {
					return o.Value != "off"
				}
			}
			return true
		}
		return s.Value != "off"
	}
	for _, s := range settings {
		switch s.Key {
		case "queueCheck":
			if on(s) {
				add("v1 ConfigMap")
				add("v1 Namespace")
				add("v1 Pod") // the originator Pods of the scheduler's placeholders
			}
		case "followYuniKornConfig":
			add("v1 ConfigMap")
		case "applicationOwnership":
			if on(s) {
				add("v1 Pod")
			}
		case "scheduling":
			add("v1 Namespace")
			add("scheduling.k8s.io/v1 PriorityClass")
		}
	}
	return out
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func boolNode(v bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}
}

func mapNode(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i < len(kv); i += 2 {
		m.Content = append(m.Content, str(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return m
}

func seqNode(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}
}

func strSeq(ss []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	for _, s := range ss {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle})
	}
	return n
}

func rulesNode(rules []metadata.Rule) *yaml.Node {
	var items []*yaml.Node
	for _, r := range rules {
		ops := make([]string, len(r.Operations))
		for i, o := range r.Operations {
			ops[i] = string(o)
		}
		items = append(items, mapNode("apiGroups", strSeq(r.APIGroups), "apiVersions", strSeq(r.APIVersions),
			"resources", strSeq(r.Resources), "operations", strSeq(ops)))
	}
	return seqNode(items...)
}

// followNamespace is where --follow follows YuniKorn's ConfigMaps: the
// namespace --namespace names when given, else the ConfigMaps', else
// --namespace's default.
func followNamespace(src ykconfig.Source, f *migrateFlags, namespaceSet bool) string {
	if ns := src.Namespace(); ns != "" && !namespaceSet {
		return ns
	}
	return f.namespace
}
