package artifacthub_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/host/metadata"
	"github.com/yunikorn-userinfo/userinfo/release/internal/artifacthub"
)

var update = flag.Bool("update", false, "update golden files")

var createdAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fullMetadata uses every input Generate reads.
const fullMetadata = `
rules:
  - apiGroups: ["networking.k8s.io"]
    apiVersions: ["v1"]
    resources: ["ingresses"]
    operations: ["CREATE", "UPDATE"]
mutating: false
contextAwareResources:
  - apiVersion: v1
    kind: Namespace
  - apiVersion: networking.k8s.io/v1
    kind: Ingress
  - apiVersion: v1
    kind: Namespace
annotations:
  io.artifacthub.displayName: Unique Ingress host
  io.artifacthub.resources: Ingress
  io.artifacthub.keywords: " ingress ,kubewarden"
  io.kubewarden.policy.title: ingress-unique-host
  io.kubewarden.policy.version: 1.0.4
  io.kubewarden.policy.description: "Requires all Ingress rule hosts to be unique: no # comment"
  io.kubewarden.policy.author: "Tux Tuxedo <tux@example.com>, pidgin@example.com"
  io.kubewarden.policy.url: https://example.com/ingress
  io.kubewarden.policy.source: https://gitlab.example.com/org/ingress
  io.kubewarden.policy.license: Apache-2.0
  io.kubewarden.policy.ociUrl: registry.example.com:5000/org/policies/ingress-unique-host
  io.kubewarden.policy.usage: "# Unique Ingress host\n\nReadme text.\n"
  io.kubewarden.hidden-ui: "true"
`

// minimalMetadata has only what Generate requires.
const minimalMetadata = `
rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["pods"]
    operations: ["CREATE"]
mutating: true
annotations:
  io.artifacthub.displayName: Minimal
  io.kubewarden.policy.title: minimal
  io.kubewarden.policy.version: 0.1.0
  io.kubewarden.policy.description: A policy
  io.kubewarden.policy.author: The minimal authors
  io.kubewarden.policy.source: https://github.com/org/minimal/
  io.kubewarden.policy.ociUrl: ghcr.io/org/policies/minimal
`

func parse(t *testing.T, doc string) *metadata.Metadata {
	t.Helper()
	md, err := metadata.Parse([]byte(doc))
	require.NoError(t, err)
	return md
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./internal/artifacthub -update in release/ to create it")
	assert.Equal(t, string(want), string(got), "%s differs; review, then go test ./internal/artifacthub -update in release/", path)
}

func TestGenerate_golden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		metadata string
		opts     artifacthub.Options
	}{
		{name: "full", metadata: fullMetadata, opts: artifacthub.Options{
			CreatedAt:    createdAt.Add(999 * time.Millisecond).In(time.FixedZone("CET", 3600)),
			QuestionsUI:  "questions:\n- variable: x\n  type: string\n",
			RepositoryID: "8503a901-5674-4756-a6d8-76b05845a9dd",
		}},
		{name: "minimal", metadata: minimalMetadata, opts: artifacthub.Options{CreatedAt: createdAt}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files, err := artifacthub.Generate(parse(t, tc.metadata), tc.opts)
			require.NoError(t, err)
			golden(t, tc.name+".pkg.golden.yml", files.Package)
			golden(t, tc.name+".repo.golden.yml", files.Repository)
		})
	}
}

// pkg is the part of artifacthub-pkg.yml the tests read back.
type pkg struct {
	Version          string            `json:"version"`
	Name             string            `json:"name"`
	CreatedAt        string            `json:"createdAt"`
	ContainersImages []map[string]any  `json:"containersImages"`
	Links            []map[string]any  `json:"links"`
	Maintainers      []map[string]any  `json:"maintainers"`
	Readme           string            `json:"readme"`
	Annotations      map[string]string `json:"annotations"`
}

func TestGenerate_readsBack(t *testing.T) {
	t.Parallel()
	md := parse(t, fullMetadata)
	files, err := artifacthub.Generate(md, artifacthub.Options{CreatedAt: createdAt})
	require.NoError(t, err)

	var got pkg
	require.NoError(t, yaml.Unmarshal(files.Package, &got))
	var rules []metadata.Rule
	require.NoError(t, yaml.UnmarshalStrict([]byte(got.Annotations["kubewarden/rules"]), &rules))
	assert.Equal(t, md.Rules, rules, "kubewarden/rules holds the metadata rules")
	var car []metadata.ContextAwareResource
	require.NoError(t, yaml.UnmarshalStrict([]byte(got.Annotations["kubewarden/contextAwareResources"]), &car))
	assert.Equal(t, []metadata.ContextAwareResource{
		{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		{APIVersion: "v1", Kind: "Namespace"},
	}, car, "sorted and deduplicated")
	assert.Equal(t, "# Unique Ingress host\n\nReadme text.\n", got.Readme, "readme defaults to the usage annotation")
	assert.Equal(t, []map[string]any{
		{"name": "Tux Tuxedo", "email": "tux@example.com"},
		{"name": "pidgin@example.com", "email": "pidgin@example.com"},
	}, got.Maintainers)
	assert.Equal(t, []map[string]any{{"name": "source", "url": "https://gitlab.example.com/org/ingress"}}, got.Links,
		"no release asset link outside GitHub")

	version, stamp, err := artifacthub.ReadStamp(files.Package)
	require.NoError(t, err)
	assert.Equal(t, "1.0.4", version)
	assert.Equal(t, createdAt, stamp)
}

func TestGenerate_options(t *testing.T) {
	t.Parallel()
	md := parse(t, minimalMetadata)
	files, err := artifacthub.Generate(md, artifacthub.Options{
		Version:   "2.0.0-rc.1",
		CreatedAt: createdAt,
		OCIURL:    "ghcr.io/other/policy",
		Readme:    "readme",
	})
	require.NoError(t, err)
	var got pkg
	require.NoError(t, yaml.Unmarshal(files.Package, &got))
	assert.Equal(t, "2.0.0-rc.1", got.Version)
	assert.Equal(t, []map[string]any{{"name": "policy", "image": "ghcr.io/other/policy:v2.0.0-rc.1"}}, got.ContainersImages)
	assert.Equal(t, []map[string]any{
		{"name": "policy", "url": "https://github.com/org/minimal/releases/download/v2.0.0-rc.1/policy.wasm"},
		{"name": "source", "url": "https://github.com/org/minimal/"},
	}, got.Links)
	assert.Equal(t, "readme", got.Readme)
	assert.Empty(t, got.Maintainers, "an author without e-mail address gives no maintainers")
	assert.Equal(t, map[string]string{
		"kubewarden/mutation": "true",
		"kubewarden/rules":    "- apiGroups:\n  - \"\"\n  apiVersions:\n  - v1\n  resources:\n  - pods\n  operations:\n  - CREATE\n",
	}, got.Annotations, "no contextAwareResources annotation when there are none")
}

func TestGenerate_deterministic(t *testing.T) {
	t.Parallel()
	md := parse(t, fullMetadata)
	first, err := artifacthub.Generate(md, artifacthub.Options{CreatedAt: createdAt})
	require.NoError(t, err)
	for range 20 { // map iteration order differs from run to run
		again, err := artifacthub.Generate(parse(t, fullMetadata), artifacthub.Options{CreatedAt: createdAt})
		require.NoError(t, err)
		require.Equal(t, first, again)
	}
}

func TestGenerate_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// edit changes the minimal metadata.
		edit func(md *metadata.Metadata)
		opts artifacthub.Options
		want []string // each must appear in the error
	}{
		{name: "no created at", opts: artifacthub.Options{},
			want: []string{"createdAt: required"}},
		{name: "missing annotations", edit: func(md *metadata.Metadata) {
			delete(md.Annotations, "io.kubewarden.policy.title")
			delete(md.Annotations, "io.artifacthub.displayName")
			delete(md.Annotations, "io.kubewarden.policy.description")
			delete(md.Annotations, "io.kubewarden.policy.version")
			delete(md.Annotations, "io.kubewarden.policy.ociUrl")
		}, want: []string{
			"annotation io.kubewarden.policy.title: required",
			"annotation io.artifacthub.displayName: required",
			"annotation io.kubewarden.policy.description: required",
			"version: required (set annotation io.kubewarden.policy.version or the version option)",
			"annotation io.kubewarden.policy.ociUrl: required",
		}},
		{name: "no annotations at all", edit: func(md *metadata.Metadata) { md.Annotations = nil },
			want: []string{"annotation io.kubewarden.policy.title: required"}},
		{name: "leading v", opts: artifacthub.Options{Version: "v1.0.0"},
			want: []string{`version: "v1.0.0" is not a semantic version like 1.2.3 (no leading v)`}},
		{name: "oci url with tag", opts: artifacthub.Options{OCIURL: "ghcr.io/org/p:v1"},
			want: []string{`OCI URL "ghcr.io/org/p:v1": want a repository without scheme, tag or digest`}},
		{name: "oci url with scheme", opts: artifacthub.Options{OCIURL: "registry://ghcr.io/org/p"},
			want: []string{`OCI URL "registry://ghcr.io/org/p"`}},
		{name: "relative url", edit: func(md *metadata.Metadata) { md.Annotations["io.kubewarden.policy.url"] = "example.com" },
			want: []string{`annotation io.kubewarden.policy.url: "example.com" is not an absolute http(s) URL`}},
		{name: "empty keyword", edit: func(md *metadata.Metadata) { md.Annotations["io.artifacthub.keywords"] = "a,,b" },
			want: []string{`annotation io.artifacthub.keywords: "a,,b": want comma-separated keywords, none empty`}},
		{name: "bad author", edit: func(md *metadata.Metadata) { md.Annotations["io.kubewarden.policy.author"] = "Foo foo@example.com" },
			want: []string{`annotation io.kubewarden.policy.author: "Foo foo@example.com": want "Name <email>, ..."`}},
		{name: "bad hidden-ui", edit: func(md *metadata.Metadata) { md.Annotations["io.kubewarden.hidden-ui"] = "yes" },
			want: []string{`annotation io.kubewarden.hidden-ui: "yes": want true or false`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			md := parse(t, minimalMetadata)
			if tc.edit != nil {
				tc.edit(md)
			}
			opts := tc.opts
			if tc.name != "no created at" {
				opts.CreatedAt = createdAt
			}
			files, err := artifacthub.Generate(md, opts)
			require.Error(t, err)
			assert.Nil(t, files)
			assert.True(t, strings.HasPrefix(err.Error(), "generate artifacthub metadata:\n"), err.Error())
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	_, err := artifacthub.Generate(nil, artifacthub.Options{CreatedAt: createdAt})
	assert.EqualError(t, err, "generate artifacthub metadata: no metadata")
}

func TestReadStamp_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		pkg  string
		want string
	}{
		{name: "not yaml", pkg: "version: [", want: "read artifacthub-pkg.yml: error converting YAML to JSON: yaml: line 1: did not find expected node content"},
		{name: "no version", pkg: "createdAt: 2026-01-02T03:04:05Z\n", want: "read artifacthub-pkg.yml: no version"},
		{name: "bad time", pkg: "version: 1.0.0\ncreatedAt: yesterday\n", want: `read artifacthub-pkg.yml: createdAt: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := artifacthub.ReadStamp([]byte(tc.pkg))
			assert.EqualError(t, err, tc.want)
		})
	}
}
