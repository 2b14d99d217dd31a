package metadata

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const minimalYAML = `
rules:
- apiGroups: [""]
  apiVersions: ["v1"]
  resources: ["pods"]
  operations: ["CREATE"]
mutating: false
`

func TestParse_repositoryMetadata(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "metadata.yml"))
	require.NoError(t, err)

	md, err := Parse(data)
	require.NoError(t, err)
	require.NoError(t, md.Validate())

	assert.True(t, md.Mutating)
	assert.True(t, md.BackgroundAudit, "the policy answers Kubewarden's audit scanner (docs/BEHAVIOUR.md §4.12)")
	assert.Equal(t, ExecutionModeKubewardenWapc, md.ExecutionMode)
	assert.Equal(t, PolicyTypeKubernetes, md.PolicyType)
	assert.Subset(t, md.ContextAwareResources, []ContextAwareResource{{APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "v1", Kind: "Namespace"}},
		"the queue check reads ConfigMaps and Namespaces")
	assert.Subset(t, md.ContextAwareResources, []ContextAwareResource{{APIVersion: "v1", Kind: "Pod"}, {APIVersion: "ray.io/v1", Kind: "RayCluster"}},
		"the provenance proofs read owners and token-bound Pods")
	assert.True(t, slices.IsSortedFunc(md.ContextAwareResources, func(a, b ContextAwareResource) int {
		return cmp.Or(cmp.Compare(a.APIVersion, b.APIVersion), cmp.Compare(a.Kind, b.Kind))
	}), "in the order kwctl's inspect lists them")
	assert.Empty(t, md.ProtocolVersion, "annotate fills it")
	assert.Equal(t, []Rule{
		{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Operations: []Operation{"CREATE", "UPDATE"}},
		{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Operations: []Operation{"CREATE", "UPDATE"}},
		{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs", "cronjobs"}, Operations: []Operation{"CREATE", "UPDATE"}},
		{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"replicationcontrollers"}, Operations: []Operation{"CREATE", "UPDATE"}},
		{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/status", "pods/ephemeralcontainers"}, Operations: []Operation{"UPDATE"}},
		{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding", "bindings"}, Operations: []Operation{"CREATE"}},
	}, md.Rules)
	assert.Equal(t, "high", md.Annotations[AnnotationSeverity])
	assert.Equal(t, "0.1.0", md.Annotations["io.kubewarden.policy.version"])
	assert.Equal(t, "yunikorn-user-info", md.Annotations["io.kubewarden.policy.title"])
	assert.Equal(t, "Apache-2.0", md.Annotations["io.kubewarden.policy.license"])
}

func TestParse_defaults(t *testing.T) {
	t.Parallel()
	md, err := Parse([]byte(minimalYAML))
	require.NoError(t, err)
	assert.Equal(t, &Metadata{
		Rules: []Rule{{
			APIGroups: []string{""}, APIVersions: []string{"v1"},
			Resources: []string{"pods"}, Operations: []Operation{OperationCreate},
		}},
		BackgroundAudit: true,
		ExecutionMode:   ExecutionModeKubewardenWapc,
		PolicyType:      PolicyTypeKubernetes,
	}, md)
	assert.NoError(t, md.Validate())
}

func TestParse_scalarsBecomeStrings(t *testing.T) {
	t.Parallel()
	// YAML reads 0.1 and true as a number and a bool; annotations are
	// strings, so they are kept as written rather than rejected.
	md, err := Parse([]byte(minimalYAML + "annotations:\n  version: 0.1\n  hidden: true\n  count: 3\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"version": "0.1", "hidden": "true", "count": "3"}, md.Annotations)
}

func TestParse_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{name: "missing mutating", yaml: strings.Replace(minimalYAML, "mutating: false\n", "", 1), want: "mutating: required field is missing"},
		{name: "unknown top-level field", yaml: minimalYAML + "contextAware: false\n", want: `unknown field "contextAware"`},
		{name: "field in another case", yaml: strings.Replace(minimalYAML, "mutating:", "Mutating:", 1), want: "Mutating: unknown field"},
		{name: "unknown rule field", yaml: strings.Replace(minimalYAML, "  operations:", "  scope: Namespaced\n  operations:", 1), want: `unknown field "scope"`},
		{name: "rule field in another case", yaml: strings.Replace(minimalYAML, "apiGroups", "APIGroups", 1), want: "rules[0].APIGroups: unknown field"},
		{name: "unknown context-aware field", yaml: minimalYAML + "contextAwareResources:\n- apiVersion: v1\n  Kind: Namespace\n", want: "contextAwareResources[0].Kind: unknown field"},
		{name: "duplicate key", yaml: minimalYAML + "mutating: true\n", want: `key "mutating" already set`},
		{name: "wrong type", yaml: strings.Replace(minimalYAML, "mutating: false", "mutating: sometimes", 1), want: "cannot unmarshal string into Go struct field"},
		{name: "not a mapping", yaml: "- a\n- b\n", want: "cannot unmarshal array"},
		{name: "not yaml", yaml: "rules: [\n", want: "parse metadata"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.yaml))
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func validMetadata() *Metadata {
	return &Metadata{
		Rules: []Rule{{
			APIGroups: []string{""}, APIVersions: []string{"v1"},
			Resources: []string{"pods"}, Operations: []Operation{OperationCreate},
		}},
		BackgroundAudit: true,
		ExecutionMode:   ExecutionModeKubewardenWapc,
		PolicyType:      PolicyTypeKubernetes,
	}
}

func TestMetadata_Validate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*Metadata)
		want   []string // substrings of the error; nil means valid
	}{
		{name: "valid", mutate: func(*Metadata) {}},
		{name: "all wildcards", mutate: func(m *Metadata) {
			m.Rules[0] = Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}, Operations: []Operation{"*"}}
		}},
		{name: "wildcards with subresources", mutate: func(m *Metadata) {
			m.Rules[0].Resources = []string{"*", "a/b", "a/*", "*/b"}
		}, want: []string{`"a/b" is already covered by 'a/*'`, `"a/b" is already covered by '*/b'`}},
		{name: "resource and its subresource wildcard", mutate: func(m *Metadata) {
			m.Rules[0].Resources = []string{"pods", "pods/*"}
		}},
		{name: "plain subresources", mutate: func(m *Metadata) {
			m.Rules[0].Resources = []string{"pods", "pods/status", "*/scale"}
		}},
		{name: "no rules", mutate: func(m *Metadata) { m.Rules = nil }, want: []string{"rules: at least one rule is required"}},
		{name: "empty lists", mutate: func(m *Metadata) { m.Rules[0] = Rule{} }, want: []string{
			"rules[0].apiGroups: must not be empty", "rules[0].apiVersions: must not be empty",
			"rules[0].resources: must not be empty", "rules[0].operations: must not be empty",
		}},
		{name: "star not alone", mutate: func(m *Metadata) {
			m.Rules[0].APIGroups = []string{"", "*"}
			m.Rules[0].APIVersions = []string{"*", "v1"}
			m.Rules[0].Operations = []Operation{"*", "CREATE"}
		}, want: []string{
			"rules[0].apiGroups: if '*' is present", "rules[0].apiVersions: if '*' is present",
			"rules[0].operations: if '*' is present",
		}},
		{name: "star with plain resource", mutate: func(m *Metadata) { m.Rules[0].Resources = []string{"*", "pods"} },
			want: []string{"if '*' is present, no other resource without a subresource"}},
		{name: "double star not alone", mutate: func(m *Metadata) { m.Rules[0].Resources = []string{"*/*", "pods"} },
			want: []string{"if '*/*' is present, it must be the only entry"}},
		{name: "subresource already covered, any order", mutate: func(m *Metadata) { m.Rules[0].Resources = []string{"pods/status", "pods/*"} },
			want: []string{`rules[0].resources[0]: "pods/status" is already covered by 'pods/*'`}},
		{name: "empty entries", mutate: func(m *Metadata) {
			m.Rules[0].APIVersions = []string{""}
			m.Rules[0].Resources = []string{""}
		}, want: []string{"rules[0].apiVersions[0]: must not be empty", "rules[0].resources[0]: must not be empty"}},
		{name: "unknown operation", mutate: func(m *Metadata) { m.Rules[0].Operations = []Operation{"CREATE", "PATCH"} },
			want: []string{`rules[0].operations[1]: unsupported value "PATCH"`}},
		{name: "lower-case operation", mutate: func(m *Metadata) { m.Rules[0].Operations = []Operation{"create"} },
			want: []string{`unsupported value "create"`}},
		{name: "execution mode", mutate: func(m *Metadata) { m.ExecutionMode = "wapc" },
			want: []string{`executionMode: unsupported value "wapc"`}},
		{name: "policy type", mutate: func(m *Metadata) { m.PolicyType = "Kubernetes" },
			want: []string{`policyType: unsupported value "Kubernetes"`}},
		{name: "protocol version", mutate: func(m *Metadata) { m.ProtocolVersion = "v2" },
			want: []string{`protocolVersion: unsupported value "v2"`}},
		{name: "protocol version of a rego policy is not checked", mutate: func(m *Metadata) {
			m.ExecutionMode = ExecutionModeOpa
			m.ProtocolVersion = "Unknown"
		}},
		{name: "severity", mutate: func(m *Metadata) { m.Annotations = map[string]string{AnnotationSeverity: "High"} },
			want: []string{`annotations[io.kubewarden.policy.severity]: unsupported value "High"`}},
		{name: "valid severity", mutate: func(m *Metadata) { m.Annotations = map[string]string{AnnotationSeverity: "critical"} }},
		{name: "context-aware resource", mutate: func(m *Metadata) { m.ContextAwareResources = []ContextAwareResource{{}} },
			want: []string{"contextAwareResources[0].apiVersion: must not be empty", "contextAwareResources[0].kind: must not be empty"}},
		{name: "host capability", mutate: func(m *Metadata) { m.HostCapabilities = []string{"oci/*", ""} },
			want: []string{"hostCapabilities[1]: must not be empty"}},
		{name: "minimum version", mutate: func(m *Metadata) { m.MinimumKubewardenVersion = "v1.10" },
			want: []string{`minimumKubewardenVersion: "v1.10" is not a semantic version`}},
		{name: "valid minimum version", mutate: func(m *Metadata) { m.MinimumKubewardenVersion = "1.10.0-rc.1+build.5" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			md := validMetadata()
			tc.mutate(md)
			err := md.Validate()
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestMetadata_MarshalJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		md   *Metadata
		want string
	}{
		{
			name: "minimal",
			md:   validMetadata(),
			want: `{"rules":[{"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"],"operations":["CREATE"]}],` +
				`"mutating":false,"backgroundAudit":true,"executionMode":"kubewarden-wapc","policyType":"kubernetes","contextAwareResources":[]}`,
		},
		{
			name: "everything, in kwctl's field order, sets sorted",
			md: &Metadata{
				ProtocolVersion: "v1",
				Rules:           []Rule{{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}, Operations: []Operation{"UPDATE"}}},
				Annotations:     map[string]string{"z": "last", "a": "<first> & co"},
				Mutating:        true,
				ExecutionMode:   ExecutionModeKubewardenWapc,
				PolicyType:      PolicyTypeRaw,
				ContextAwareResources: []ContextAwareResource{
					{APIVersion: "v1", Kind: "Pod"}, {APIVersion: "apps/v1", Kind: "Deployment"}, {APIVersion: "v1", Kind: "Namespace"}, {APIVersion: "v1", Kind: "Pod"},
				},
				HostCapabilities:         []string{"oci/*", "net/v1/dns_lookup_host", "oci/*"},
				MinimumKubewardenVersion: "1.10.0",
			},
			want: `{"protocolVersion":"v1",` +
				`"rules":[{"apiGroups":["apps"],"apiVersions":["v1"],"resources":["deployments"],"operations":["UPDATE"]}],` +
				`"annotations":{"a":"<first> & co","z":"last"},"mutating":true,"backgroundAudit":false,` +
				`"executionMode":"kubewarden-wapc","policyType":"raw",` +
				`"contextAwareResources":[{"apiVersion":"apps/v1","kind":"Deployment"},{"apiVersion":"v1","kind":"Namespace"},{"apiVersion":"v1","kind":"Pod"}],` +
				`"hostCapabilities":["net/v1/dns_lookup_host","oci/*"],"minimumKubewardenVersion":"1.10.0"}`,
		},
		{
			name: "empty but present sets and annotations are kept",
			md: &Metadata{
				Rules: []Rule{{}}, Annotations: map[string]string{}, HostCapabilities: []string{},
			},
			want: `{"rules":[{"apiGroups":[],"apiVersions":[],"resources":[],"operations":[]}],"annotations":{},` +
				`"mutating":false,"backgroundAudit":false,"executionMode":"kubewarden-wapc","policyType":"kubernetes",` +
				`"contextAwareResources":[],"hostCapabilities":[]}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.md.MarshalJSON()
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	t.Run("round trip", func(t *testing.T) {
		t.Parallel()
		md := validMetadata()
		md.ProtocolVersion = ProtocolV1
		md.Annotations = map[string]string{"a": "b"}
		md.ContextAwareResources = []ContextAwareResource{}
		data, err := md.MarshalJSON()
		require.NoError(t, err)
		back, err := Decode(data)
		require.NoError(t, err)
		assert.Equal(t, md, back)
	})
	t.Run("unknown fields from newer kwctl are ignored", func(t *testing.T) {
		t.Parallel()
		md, err := Decode([]byte(`{"protocolVersion":"v1","rules":[],"mutating":true,"futureField":1,"contextAware":true}`))
		require.NoError(t, err)
		assert.True(t, md.Mutating)
		assert.True(t, md.BackgroundAudit, "default applies")
	})
	t.Run("mutating is required", func(t *testing.T) {
		t.Parallel()
		_, err := Decode([]byte(`{"rules":[]}`))
		assert.ErrorContains(t, err, "mutating: required field is missing")
	})
	t.Run("not json", func(t *testing.T) {
		t.Parallel()
		_, err := Decode([]byte(`rules: []`))
		assert.ErrorContains(t, err, "decode metadata section")
	})
}
