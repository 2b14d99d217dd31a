package manifests

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	kustomize "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// fileKind claims YAML files by path and checks them.
type fileKind struct {
	name  string
	match func(rel string) bool
	check func(t *testing.T, rel string, data []byte)
}

// fileKinds are all the YAML files the repository may hold. A file that no
// kind matches, or that two kinds match, fails TestYAMLFiles.
var fileKinds = []fileKind{
	{name: "Kubernetes manifests", match: under("deploy/"), check: checkManifestFile},
	{name: "Kubewarden policy metadata", match: equals("metadata.yml"), check: checkPolicyMetadata},
	{
		name: "Artifact Hub package",
		match: anyOf(equals("artifacthub/artifacthub-pkg.yml"),
			glob("release/internal/artifacthub/testdata/*.pkg.golden.yml")),
		check: checkArtifacthubPackage,
	},
	{
		name: "Artifact Hub repository",
		match: anyOf(equals("artifacthub/artifacthub-repo.yml"),
			glob("release/internal/artifacthub/testdata/*.repo.golden.yml")),
		check: checkArtifacthubRepository,
	},
	{name: "Helm chart", match: under("charts/"), check: checkChartFile},
	{name: "Kubernetes objects a host-capability replay answers from", match: anyOf(under("host/kubecap/testdata/"), under("testdata/cluster/")), check: checkReplayObjects},
	{name: "GitHub Actions workflow", match: anyOf(glob(".github/workflows/*.yml"), glob(".github/workflows/*.yaml")), check: checkWorkflow},
	{name: "Helm values of an end-to-end rendering", match: glob("e2e/*/values.yaml"), check: checkE2EValues},
	{name: "YuniKorn ConfigMaps that migrate converts", match: under("internal/yunikorn/ykconfig/testdata/"), check: checkYuniKornConfigMaps},
	{name: "Object manifests run --object reads", match: under("testdata/objects/"), check: checkObjectManifest},
}

// checkObjectManifest: one object with apiVersion, kind and a name, as
// run --object reads it.
func checkObjectManifest(t *testing.T, rel string, data []byte) {
	docs, err := documents(data)
	require.NoError(t, err)
	require.Len(t, docs, 1, "%s: run --object reads one object", rel)
	checkReplayObjects(t, rel, data)
}

// checkYuniKornConfigMaps: each document is a v1 ConfigMap, or a v1 List of
// them, named as YuniKorn names its configuration, with string data only (a
// value YAML reads as a boolean or number would not be a ConfigMap's).
func checkYuniKornConfigMaps(t *testing.T, rel string, data []byte) {
	docs, err := documents(data)
	require.NoError(t, err)
	require.NotEmpty(t, docs, "%s: no document", rel)
	type configMap struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name        string            `json:"name"`
			Namespace   string            `json:"namespace,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"metadata"`
		Data       map[string]string `json:"data,omitempty"`
		BinaryData map[string][]byte `json:"binaryData,omitempty"`
	}
	check := func(where string, cm configMap) {
		assert.Equal(t, "v1", cm.APIVersion, "%s: apiVersion", where)
		assert.Equal(t, "ConfigMap", cm.Kind, "%s: kind", where)
		assert.Contains(t, []string{"yunikorn-configs", "yunikorn-defaults"}, cm.Metadata.Name, "%s: metadata.name", where)
	}
	for i, doc := range docs {
		where := fmt.Sprintf("%s: document %d", rel, i)
		var list struct {
			APIVersion string      `json:"apiVersion"`
			Kind       string      `json:"kind"`
			Items      []configMap `json:"items"`
		}
		if require.NoError(t, yaml.Unmarshal(doc, &list), where); list.Kind == "List" {
			require.NoError(t, yaml.UnmarshalStrict(doc, &list), where)
			assert.Equal(t, "v1", list.APIVersion, "%s: apiVersion", where)
			for j, cm := range list.Items {
				check(fmt.Sprintf("%s: items[%d]", where, j), cm)
			}
			continue
		}
		var cm configMap
		require.NoError(t, yaml.UnmarshalStrict(doc, &cm), where)
		check(where, cm)
	}
}

// checkE2EValues renders the chart with values an end-to-end scenario
// installs (make chart-render), so a change to the chart or the policy's
// settings that breaks them fails here rather than in the cluster.
func checkE2EValues(t *testing.T, _ string, data []byte) {
	var values map[string]any
	require.NoError(t, yaml.UnmarshalStrict(data, &values))
	ms := mustRender(t, values, "yunikorn-userinfo", webhookNamespace)
	assert.NotEmpty(t, ms)
}

// skippedDirs (relative to the repository root) are never walked: VCS
// data, build outputs, and this package's own fixtures, which may be invalid
// on purpose. Neither is any node_modules directory.
var skippedDirs = []string{".git", "build", "test/manifests/testdata"}

func under(prefix string) func(string) bool {
	return func(rel string) bool { return strings.HasPrefix(rel, prefix) }
}

func equals(want string) func(string) bool {
	return func(rel string) bool { return rel == want }
}

func glob(pattern string) func(string) bool {
	return func(rel string) bool { ok, _ := path.Match(pattern, rel); return ok }
}

func anyOf(fns ...func(string) bool) func(string) bool {
	return func(rel string) bool {
		return slices.ContainsFunc(fns, func(f func(string) bool) bool { return f(rel) })
	}
}

// yamlFiles lists every *.yaml and *.yml file of the repository.
func yamlFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := relPath(p)
		if d.IsDir() {
			if slices.Contains(skippedDirs, rel) || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if isYAML(p) {
			files = append(files, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// TestYAMLFiles checks every YAML file of the repository with the one
// validator that claims it.
func TestYAMLFiles(t *testing.T) {
	t.Parallel()
	files := yamlFiles(t)
	require.Contains(t, files, "metadata.yml", "the walk starts at the repository root")
	for _, rel := range files {
		var claims []fileKind
		for _, k := range fileKinds {
			if k.match(rel) {
				claims = append(claims, k)
			}
		}
		switch len(claims) {
		case 0:
			t.Errorf("%s: no validator claims this YAML file: add one to fileKinds in test/manifests/files_test.go", rel)
		case 1:
			k := claims[0]
			t.Run(rel, func(t *testing.T) {
				t.Parallel()
				k.check(t, rel, readRepoFile(t, rel))
			})
		default:
			t.Errorf("%s: claimed by %d validators, want one", rel, len(claims))
		}
	}
}

// TestYAMLFiles_claims makes sure the file walk and the claims do what
// TestYAMLFiles relies on.
func TestYAMLFiles_claims(t *testing.T) {
	t.Parallel()
	claimed := func(rel string) int {
		n := 0
		for _, k := range fileKinds {
			if k.match(rel) {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name string
		rel  string
		want int
	}{
		{name: "manifest", rel: "deploy/webhook/deployment.yaml", want: 1},
		{name: "nested manifest", rel: "deploy/webhook/cert-manager/issuer-ca.yaml", want: 1},
		{name: "metadata", rel: "metadata.yml", want: 1},
		{name: "package", rel: "artifacthub/artifacthub-pkg.yml", want: 1},
		{name: "golden package", rel: "release/internal/artifacthub/testdata/full.pkg.golden.yml", want: 1},
		{name: "repository", rel: "artifacthub/artifacthub-repo.yml", want: 1},
		{name: "workflow", rel: ".github/workflows/ci.yml", want: 1},
		{name: "chart template", rel: "charts/yunikorn-userinfo/templates/deployment.yaml", want: 1},
		{name: "replay objects", rel: "host/kubecap/testdata/cluster/pods.yaml", want: 1},
		{name: "stray file", rel: "policy/testdata/settings.yaml", want: 0},
		{name: "metadata elsewhere", rel: "policy/metadata.yml", want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, claimed(tc.rel))
		})
	}
	files := yamlFiles(t)
	for _, rel := range files {
		assert.False(t, strings.HasPrefix(rel, "build/") || strings.HasPrefix(rel, ".git/"), "%s should be skipped", rel)
	}
}

// checkManifestFile decodes each document strictly; a kustomization must
// list exactly the manifests of its directory.
func checkManifestFile(t *testing.T, rel string, data []byte) {
	ms, err := decodeManifests(rel, data)
	require.NoError(t, err)
	for _, m := range ms {
		if k, ok := m.obj.(*kustomize.Kustomization); ok {
			checkKustomization(t, rel, k)
		}
	}
}

// checkKustomization: every listed resource exists (a file, or a directory
// with its own kustomization), and every other manifest next to it is
// listed, so nothing is silently left out of `kubectl apply -k`.
func checkKustomization(t *testing.T, rel string, k *kustomize.Kustomization) {
	dir := path.Dir(rel)
	assert.Empty(t, k.Bases, "bases is deprecated: use resources")
	listed := map[string]bool{}
	for _, r := range k.Resources {
		assert.False(t, strings.Contains(r, "://") || path.IsAbs(r) || strings.HasPrefix(path.Clean(r), ".."),
			"%s: resource %q: want a path inside the directory", rel, r)
		full := path.Join(dir, r)
		info, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(full)))
		if !assert.NoError(t, err, "%s lists %s", rel, r) {
			continue
		}
		if info.IsDir() {
			_, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(full), "kustomization.yaml"))
			assert.NoError(t, err, "%s lists directory %s, which has no kustomization.yaml", rel, r)
		}
		assert.False(t, listed[full], "%s lists %s twice", rel, r)
		listed[full] = true
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot, filepath.FromSlash(dir)))
	require.NoError(t, err)
	for _, e := range entries {
		name := path.Join(dir, e.Name())
		if e.IsDir() || !isYAML(e.Name()) || name == rel {
			continue
		}
		assert.True(t, listed[name], "%s is not listed in %s", name, rel)
	}
}

// policyRule is a rule of Kubewarden's metadata.yml: a Kubernetes
// RuleWithOperations without scope, which Kubewarden does not accept.
type policyRule struct {
	APIGroups   []string                                `json:"apiGroups"`
	APIVersions []string                                `json:"apiVersions"`
	Resources   []string                                `json:"resources"`
	Operations  []admissionregistrationv1.OperationType `json:"operations"`
}

// policyMetadata is the metadata.yml format of Kubewarden's policy
// evaluator (crates/policy-evaluator/src/policy_metadata.rs).
type policyMetadata struct {
	ProtocolVersion       string            `json:"protocolVersion,omitempty"`
	Rules                 []policyRule      `json:"rules"`
	Annotations           map[string]string `json:"annotations,omitempty"`
	Mutating              *bool             `json:"mutating"`
	BackgroundAudit       *bool             `json:"backgroundAudit,omitempty"`
	ExecutionMode         string            `json:"executionMode,omitempty"`
	PolicyType            string            `json:"policyType,omitempty"`
	ContextAwareResources []struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	} `json:"contextAwareResources,omitempty"`
	HostCapabilities         []string `json:"hostCapabilities,omitempty"`
	MinimumKubewardenVersion string   `json:"minimumKubewardenVersion,omitempty"`
}

// knownAnnotations are the io.kubewarden.* and io.artifacthub.* annotations
// kwctl and Kubewarden's UI read; another key with those prefixes is a typo.
var knownAnnotations = []string{
	"io.kubewarden.policy.title", "io.kubewarden.policy.version", "io.kubewarden.policy.description",
	"io.kubewarden.policy.author", "io.kubewarden.policy.url", "io.kubewarden.policy.source",
	"io.kubewarden.policy.license", "io.kubewarden.policy.ociUrl", "io.kubewarden.policy.severity",
	"io.kubewarden.policy.category", "io.kubewarden.policy.usage", "io.kubewarden.hidden-ui",
	"io.kubewarden.kwctl", "io.artifacthub.displayName", "io.artifacthub.resources", "io.artifacthub.keywords",
}

// semverRE is SemVer 2.0.0, as semver.org gives it.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

func parsePolicyMetadata(data []byte) (*policyMetadata, error) {
	var md policyMetadata
	if err := decodeStrict(data, &md); err != nil {
		return nil, err
	}
	var errs []error
	if md.Mutating == nil {
		errs = append(errs, errors.New("mutating: required"))
	}
	if len(md.Rules) == 0 {
		errs = append(errs, errors.New("rules: at least one is required"))
	}
	if !slices.Contains([]string{"", "kubewarden-wapc", "opa", "gatekeeper", "wasi"}, md.ExecutionMode) {
		errs = append(errs, fmt.Errorf("executionMode: %q is not a Kubewarden execution mode", md.ExecutionMode))
	}
	if !slices.Contains([]string{"", "kubernetes", "raw"}, md.PolicyType) {
		errs = append(errs, fmt.Errorf("policyType: %q is not a Kubewarden policy type", md.PolicyType))
	}
	for key, value := range md.Annotations {
		if (strings.HasPrefix(key, "io.kubewarden.") || strings.HasPrefix(key, "io.artifacthub.")) && !slices.Contains(knownAnnotations, key) {
			errs = append(errs, fmt.Errorf("annotations: %s is not an annotation Kubewarden knows", key))
		}
		if key == "io.kubewarden.policy.severity" && !slices.Contains([]string{"info", "low", "medium", "high", "critical"}, value) {
			errs = append(errs, fmt.Errorf("annotations: %s: %q is not a severity", key, value))
		}
	}
	if v, ok := md.Annotations["io.kubewarden.policy.version"]; ok && !semverRE.MatchString(v) {
		errs = append(errs, fmt.Errorf("annotations: io.kubewarden.policy.version: %q is not a semantic version", v))
	}
	return &md, errors.Join(errs...)
}

// metadataRules reads the rules of the repository's metadata.yml as
// Kubernetes rules.
func metadataRules(t *testing.T) []admissionregistrationv1.RuleWithOperations {
	t.Helper()
	md, err := parsePolicyMetadata(readRepoFile(t, "metadata.yml"))
	require.NoError(t, err)
	return toRules(md.Rules)
}

func toRules(in []policyRule) []admissionregistrationv1.RuleWithOperations {
	out := make([]admissionregistrationv1.RuleWithOperations, 0, len(in))
	for _, r := range in {
		out = append(out, admissionregistrationv1.RuleWithOperations{
			Operations: r.Operations,
			Rule:       admissionregistrationv1.Rule{APIGroups: r.APIGroups, APIVersions: r.APIVersions, Resources: r.Resources},
		})
	}
	return out
}

func checkPolicyMetadata(t *testing.T, _ string, data []byte) {
	md, err := parsePolicyMetadata(data)
	require.NoError(t, err)
	for _, key := range []string{"io.kubewarden.policy.title", "io.kubewarden.policy.version",
		"io.kubewarden.policy.description", "io.artifacthub.displayName"} {
		assert.NotEmpty(t, md.Annotations[key], "annotation %s is needed for Artifact Hub", key)
	}
	for i, r := range md.Rules {
		assert.NotEmpty(t, r.APIGroups, "rules[%d].apiGroups", i)
		assert.NotEmpty(t, r.APIVersions, "rules[%d].apiVersions", i)
		assert.NotEmpty(t, r.Resources, "rules[%d].resources", i)
		assert.NotEmpty(t, r.Operations, "rules[%d].operations", i)
	}
}

// artifacthubPackage is the artifacthub-pkg.yml format
// (https://github.com/artifacthub/hub/blob/master/docs/metadata/artifacthub-pkg.yml).
type artifacthubPackage struct {
	Version                 string           `json:"version"`
	Name                    string           `json:"name"`
	DisplayName             string           `json:"displayName"`
	CreatedAt               string           `json:"createdAt"`
	Description             string           `json:"description"`
	LogoPath                string           `json:"logoPath,omitempty"`
	LogoURL                 string           `json:"logoURL,omitempty"`
	Digest                  string           `json:"digest,omitempty"`
	License                 string           `json:"license,omitempty"`
	HomeURL                 string           `json:"homeURL,omitempty"`
	AppVersion              string           `json:"appVersion,omitempty"`
	ContainersImages        []containerImage `json:"containersImages,omitempty"`
	ContainsSecurityUpdates bool             `json:"containsSecurityUpdates,omitempty"`
	Operator                bool             `json:"operator,omitempty"`
	Deprecated              bool             `json:"deprecated,omitempty"`
	Prerelease              bool             `json:"prerelease,omitempty"`
	Keywords                []string         `json:"keywords,omitempty"`
	Links                   []link           `json:"links,omitempty"`
	Readme                  string           `json:"readme,omitempty"`
	Install                 string           `json:"install,omitempty"`
	Changes                 []any            `json:"changes,omitempty"`
	Maintainers             []person         `json:"maintainers,omitempty"`
	Provider                *struct {
		Name string `json:"name"`
	} `json:"provider,omitempty"`
	Recommendations []struct {
		URL string `json:"url"`
	} `json:"recommendations,omitempty"`
	Screenshots []struct {
		Title string `json:"title"`
		URL   string `json:"url"`
	} `json:"screenshots,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type containerImage struct {
	Name        string   `json:"name"`
	Image       string   `json:"image"`
	Whitelisted bool     `json:"whitelisted,omitempty"`
	Platforms   []string `json:"platforms,omitempty"`
}

type link struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

type person struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

func parseArtifacthubPackage(t *testing.T, data []byte) *artifacthubPackage {
	t.Helper()
	var pkg artifacthubPackage
	require.NoError(t, decodeStrict(data, &pkg))
	return &pkg
}

func checkArtifacthubPackage(t *testing.T, rel string, data []byte) {
	pkg := parseArtifacthubPackage(t, data)
	assert.Regexp(t, semverRE, pkg.Version, "version")
	assert.Regexp(t, `^[a-z0-9]+(-[a-z0-9]+)*$`, pkg.Name, "name")
	assert.NotEmpty(t, pkg.DisplayName, "displayName")
	assert.NotEmpty(t, pkg.Description, "description")
	_, err := time.Parse(time.RFC3339, pkg.CreatedAt)
	assert.NoError(t, err, "createdAt")
	for _, u := range append([]string{pkg.HomeURL}, urls(pkg)...) {
		if u != "" {
			parsed, err := url.Parse(u)
			if assert.NoError(t, err) {
				assert.True(t, parsed.IsAbs(), "%q is not an absolute URL", u)
			}
		}
	}
	for _, m := range pkg.Maintainers {
		assert.NotEmpty(t, m.Name, "maintainers: name")
		assert.Contains(t, m.Email, "@", "maintainers: email")
	}
	require.Len(t, pkg.ContainersImages, 1, "containersImages: the policy")
	assert.Equal(t, "policy", pkg.ContainersImages[0].Name)
	assert.True(t, strings.HasSuffix(pkg.ContainersImages[0].Image, ":v"+pkg.Version), "the image is tagged v<version>")

	// Kubewarden's annotations.
	assert.Contains(t, []string{"true", "false"}, pkg.Annotations["kubewarden/mutation"], "kubewarden/mutation")
	var rules []policyRule
	require.NoError(t, decodeStrict([]byte(pkg.Annotations["kubewarden/rules"]), &rules), "kubewarden/rules")
	require.NotEmpty(t, rules, "kubewarden/rules")
	if car, ok := pkg.Annotations["kubewarden/contextAwareResources"]; ok {
		var resources []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		require.NoError(t, decodeStrict([]byte(car), &resources), "kubewarden/contextAwareResources")
		assert.NotEmpty(t, resources, "kubewarden/contextAwareResources: present means context aware")
	}
	if hidden, ok := pkg.Annotations["kubewarden/hidden-ui"]; ok {
		assert.Contains(t, []string{"true", "false"}, hidden, "kubewarden/hidden-ui")
	}

	if rel != "artifacthub/artifacthub-pkg.yml" {
		return
	}
	// The committed package describes the policy of metadata.yml.
	md, err := parsePolicyMetadata(readRepoFile(t, "metadata.yml"))
	require.NoError(t, err)
	assert.Equal(t, md.Rules, rules, "kubewarden/rules: run make artifacthub")
	assert.Equal(t, fmt.Sprint(*md.Mutating), pkg.Annotations["kubewarden/mutation"], "kubewarden/mutation: run make artifacthub")
	assert.Equal(t, md.Annotations["io.kubewarden.policy.version"], pkg.Version, "version: run make artifacthub")
	assert.Equal(t, md.Annotations["io.kubewarden.policy.title"], pkg.Name, "name: run make artifacthub")
}

func urls(pkg *artifacthubPackage) []string {
	var out []string
	for _, l := range pkg.Links {
		out = append(out, l.URL)
	}
	for _, r := range pkg.Recommendations {
		out = append(out, r.URL)
	}
	return out
}

// artifacthubRepository is the artifacthub-repo.yml format
// (https://github.com/artifacthub/hub/blob/master/docs/metadata/artifacthub-repo.yml).
type artifacthubRepository struct {
	RepositoryID string   `json:"repositoryID,omitempty"`
	Owners       []person `json:"owners,omitempty"`
	Ignore       []struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	} `json:"ignore,omitempty"`
}

func checkArtifacthubRepository(t *testing.T, _ string, data []byte) {
	var repo artifacthubRepository
	require.NoError(t, decodeStrict(data, &repo))
	if repo.RepositoryID != "" {
		assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, repo.RepositoryID, "repositoryID")
	}
	for _, o := range repo.Owners {
		assert.NotEmpty(t, o.Name, "owners: name")
		assert.Contains(t, o.Email, "@", "owners: email")
	}
}

// checkWorkflow is a structural check of a GitHub Actions workflow: no
// schema of it is published as Go types.
func checkWorkflow(t *testing.T, _ string, data []byte) {
	var wf map[string]any
	require.NoError(t, yaml.UnmarshalStrict(data, &wf))
	// YAML 1.1 reads the key `on` as true.
	_, on := wf["on"]
	_, onTrue := wf["true"]
	assert.True(t, on || onTrue, "a workflow needs `on`")
	jobs, ok := wf["jobs"].(map[string]any)
	require.True(t, ok, "a workflow needs a `jobs` mapping")
	assert.NotEmpty(t, jobs)
	for name, job := range jobs {
		j, ok := job.(map[string]any)
		require.True(t, ok, "jobs.%s: want a mapping", name)
		_, steps := j["steps"]
		_, uses := j["uses"]
		assert.True(t, steps || uses, "jobs.%s: needs steps or uses", name)
	}
}

// checkReplayObjects: every document is a Kubernetes object with
// apiVersion, kind and (but for SubjectAccessReviews and Lists) a name.
func checkReplayObjects(t *testing.T, rel string, data []byte) {
	docs, err := documents(data)
	require.NoError(t, err)
	require.NotEmpty(t, docs, "%s: no document", rel)
	for i, doc := range docs {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal(doc, &obj), "%s: document %d", rel, i)
		assert.NotEmpty(t, obj.APIVersion, "%s: document %d: apiVersion", rel, i)
		assert.NotEmpty(t, obj.Kind, "%s: document %d: kind", rel, i)
		if obj.Kind != "SubjectAccessReview" && !strings.HasSuffix(obj.Kind, "List") {
			assert.NotEmpty(t, obj.Metadata.Name, "%s: document %d: metadata.name", rel, i)
		}
	}
}
