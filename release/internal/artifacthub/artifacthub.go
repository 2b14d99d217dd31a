package artifacthub

import (
	"errors"
	"fmt"
	"maps"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v2"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/host/metadata"
)

// File names Artifact Hub looks for in a package directory.
const (
	// PackageFile holds one version of one package.
	PackageFile = "artifacthub-pkg.yml"
	// RepositoryFile holds the repository's ID and owners.
	RepositoryFile = "artifacthub-repo.yml"
)

// AnnotationVersion is the metadata annotation that holds the policy's
// version, the default package version.
const AnnotationVersion = "io.kubewarden.policy.version"

// Policy metadata annotations this package reads, as kwctl names them.
const (
	annotationTitle       = "io.kubewarden.policy.title"
	annotationDescription = "io.kubewarden.policy.description"
	annotationAuthor      = "io.kubewarden.policy.author"
	annotationURL         = "io.kubewarden.policy.url"
	annotationSource      = "io.kubewarden.policy.source"
	annotationLicense     = "io.kubewarden.policy.license"
	annotationOCIURL      = "io.kubewarden.policy.ociUrl"
	annotationHiddenUI    = "io.kubewarden.hidden-ui"
	annotationDisplayName = "io.artifacthub.displayName"
	annotationResources   = "io.artifacthub.resources"
	annotationKeywords    = "io.artifacthub.keywords"
)

// Package annotations read by Artifact Hub and Kubewarden's UI.
const (
	pkgAnnotationMutation     = "kubewarden/mutation"
	pkgAnnotationResources    = "kubewarden/resources"
	pkgAnnotationRules        = "kubewarden/rules"
	pkgAnnotationContextAware = "kubewarden/contextAwareResources"
	pkgAnnotationQuestionsUI  = "kubewarden/questions-ui"
	pkgAnnotationHiddenUI     = "kubewarden/hidden-ui"
)

// controllerChartURL is the package every Kubewarden policy recommends: the
// controller that runs it. kwctl writes the same.
const controllerChartURL = "https://artifacthub.io/packages/helm/kubewarden/kubewarden-controller"

// provider is the package provider kwctl writes for every policy.
const provider = "kubewarden"

// Options are the inputs of [Generate] that metadata.yml does not hold.
type Options struct {
	// Version is the package version, a semantic version without a leading
	// "v". Default: the io.kubewarden.policy.version annotation.
	Version string
	// CreatedAt is the package's creation time, written in RFC 3339 in UTC
	// and truncated to the second. Required: Generate never reads the clock,
	// so the caller decides how stable it is.
	CreatedAt time.Time
	// OCIURL is the policy's OCI repository, without scheme or tag, like
	// ghcr.io/org/policies/name; the image is OCIURL:v<Version>.
	// Default: the io.kubewarden.policy.ociUrl annotation.
	OCIURL string
	// Readme is the package documentation (Markdown). Default: the
	// io.kubewarden.policy.usage annotation; empty leaves `readme` out.
	Readme string
	// QuestionsUI is a Rancher questions-ui document, written as the
	// kubewarden/questions-ui annotation. Default: none.
	QuestionsUI string
	// RepositoryID is the ID Artifact Hub gives a registered repository,
	// written to artifacthub-repo.yml. Default: none.
	RepositoryID string
}

func (o *Options) setDefaults(annotations map[string]string) {
	if o.Version == "" {
		o.Version = annotations[AnnotationVersion]
	}
	if o.OCIURL == "" {
		o.OCIURL = annotations[annotationOCIURL]
	}
	if o.Readme == "" {
		o.Readme = annotations[metadata.AnnotationUsage]
	}
	o.CreatedAt = o.CreatedAt.UTC().Truncate(time.Second)
}

// Files are the generated documents.
type Files struct {
	// Package is the content of artifacthub-pkg.yml.
	Package []byte
	// Repository is the content of artifacthub-repo.yml.
	Repository []byte
}

// semverRE is SemVer 2.0.0 (semver.org's expression), which Artifact Hub
// requires of a package version.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// ociRepoRE is a registry host followed by a repository path, with no
// scheme, tag or digest: the tag is added from the version.
var ociRepoRE = regexp.MustCompile(`^[a-zA-Z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+$`)

// maintainer is a name and e-mail address, the shape of both package
// maintainers and repository owners.
type maintainer struct {
	name, email string
}

// Generate derives artifacthub-pkg.yml and artifacthub-repo.yml from policy
// metadata, the way `kwctl scaffold artifacthub` does:
//
//   - name, displayName, description: io.kubewarden.policy.title,
//     io.artifacthub.displayName, io.kubewarden.policy.description (required);
//   - license, homeURL: io.kubewarden.policy.license, io.kubewarden.policy.url;
//   - containersImages and install: OCIURL:v<Version> (required);
//   - keywords: io.artifacthub.keywords, comma-separated;
//   - links: io.kubewarden.policy.source, plus the release's policy.wasm
//     when the source is on github.com;
//   - maintainers (and the repository's owners): io.kubewarden.policy.author,
//     an RFC 5322 address list ("Name <email>, ...");
//   - annotations kubewarden/mutation, kubewarden/rules (the rules as a YAML
//     string), kubewarden/resources (io.artifacthub.resources),
//     kubewarden/contextAwareResources (only when there are some, since
//     Kubewarden's UI takes its presence to mean "context aware"),
//     kubewarden/hidden-ui and kubewarden/questions-ui.
//
// Every problem is reported, each naming the annotation or option at fault.
//
// # Notes
//
// Unlike kwctl, an author annotation with no e-mail address at all (a plain
// name such as "The Foo authors") is not an error: Artifact Hub requires an
// e-mail address for every maintainer, so maintainers and owners are left
// out. kwctl also requires the usage annotation; here the readme is
// optional, because Artifact Hub can take it from a README.md file.
func Generate(md *metadata.Metadata, opts Options) (*Files, error) {
	if md == nil {
		return nil, errors.New("generate artifacthub metadata: no metadata")
	}
	o := opts
	o.setDefaults(md.Annotations)
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	required := func(key string) string {
		v := strings.TrimSpace(md.Annotations[key])
		if v == "" {
			fail("annotation %s: required", key)
		}
		return v
	}
	name := required(annotationTitle)
	displayName := required(annotationDisplayName)
	description := required(annotationDescription)

	switch {
	case o.Version == "":
		fail("version: required (set annotation %s or the version option)", AnnotationVersion)
	case !semverRE.MatchString(o.Version):
		fail("version: %q is not a semantic version like 1.2.3 (no leading v)", o.Version)
	}
	if o.CreatedAt.IsZero() {
		fail("createdAt: required")
	}
	switch {
	case o.OCIURL == "":
		fail("annotation %s: required (or the OCI URL option): the policy's OCI repository, like ghcr.io/org/policies/name", annotationOCIURL)
	case !ociRepoRE.MatchString(o.OCIURL):
		fail("OCI URL %q: want a repository without scheme, tag or digest, like ghcr.io/org/policies/name", o.OCIURL)
	}
	homeURL, err := optionalURL(md.Annotations, annotationURL)
	if err != nil {
		errs = append(errs, err)
	}
	source, err := optionalURL(md.Annotations, annotationSource)
	if err != nil {
		errs = append(errs, err)
	}
	keywords, err := parseKeywords(md.Annotations)
	if err != nil {
		errs = append(errs, err)
	}
	maintainers, err := parseMaintainers(md.Annotations)
	if err != nil {
		errs = append(errs, err)
	}
	annotations, err := packageAnnotations(md, o.QuestionsUI)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("generate artifacthub metadata:\n%w", err)
	}

	image := o.OCIURL + ":v" + o.Version
	pkg := yaml.MapSlice{
		{Key: "version", Value: o.Version},
		{Key: "name", Value: name},
		{Key: "displayName", Value: displayName},
		{Key: "createdAt", Value: o.CreatedAt},
		{Key: "description", Value: description},
	}
	if license := strings.TrimSpace(md.Annotations[annotationLicense]); license != "" {
		pkg = append(pkg, yaml.MapItem{Key: "license", Value: license})
	}
	if homeURL != "" {
		pkg = append(pkg, yaml.MapItem{Key: "homeURL", Value: homeURL})
	}
	pkg = append(pkg, yaml.MapItem{Key: "containersImages", Value: []yaml.MapSlice{
		{{Key: "name", Value: "policy"}, {Key: "image", Value: image}},
	}})
	if len(keywords) > 0 {
		pkg = append(pkg, yaml.MapItem{Key: "keywords", Value: keywords})
	}
	if source != "" {
		pkg = append(pkg, yaml.MapItem{Key: "links", Value: links(source, o.Version)})
	}
	pkg = append(pkg, yaml.MapItem{Key: "install", Value: install(image)})
	if o.Readme != "" {
		pkg = append(pkg, yaml.MapItem{Key: "readme", Value: o.Readme})
	}
	if len(maintainers) > 0 {
		pkg = append(pkg, yaml.MapItem{Key: "maintainers", Value: people(maintainers)})
	}
	pkg = append(pkg,
		yaml.MapItem{Key: "provider", Value: yaml.MapSlice{{Key: "name", Value: provider}}},
		yaml.MapItem{Key: "recommendations", Value: []yaml.MapSlice{{{Key: "url", Value: controllerChartURL}}}},
		yaml.MapItem{Key: "annotations", Value: annotations},
	)

	repo := yaml.MapSlice{}
	if id := strings.TrimSpace(o.RepositoryID); id != "" {
		repo = append(repo, yaml.MapItem{Key: "repositoryID", Value: id})
	}
	repo = append(repo, yaml.MapItem{Key: "owners", Value: people(maintainers)})

	pkgBytes, err := document(packageHeader(name), pkg)
	if err != nil {
		return nil, fmt.Errorf("generate %s: %w", PackageFile, err)
	}
	repoBytes, err := document(repositoryHeader, repo)
	if err != nil {
		return nil, fmt.Errorf("generate %s: %w", RepositoryFile, err)
	}
	return &Files{Package: pkgBytes, Repository: repoBytes}, nil
}

func packageHeader(name string) string {
	return `# Artifact Hub package metadata of the ` + name + ` Kubewarden policy.
# Generated from metadata.yml by ` + "`release/cmd/policymeta`" + `
# (like ` + "`kwctl scaffold artifacthub`" + `): do not edit, change metadata.yml and
# regenerate.
`
}

const repositoryHeader = `# Artifact Hub repository metadata. Generated from metadata.yml by
# ` + "`release/cmd/policymeta`" + ` (like ` + "`kwctl scaffold artifacthub`" + `): do not
# edit. repositoryID is the ID Artifact Hub shows once the repository is
# registered (--repository-id); owners are the io.kubewarden.policy.author
# entries with an e-mail address.
`

func document(header string, v yaml.MapSlice) ([]byte, error) {
	body, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append([]byte(header), body...), nil
}

// optionalURL reads an annotation that, when set, must be an absolute http
// or https URL.
func optionalURL(annotations map[string]string, key string) (string, error) {
	s := strings.TrimSpace(annotations[key])
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("annotation %s: %w", key, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("annotation %s: %q is not an absolute http(s) URL", key, s)
	}
	return s, nil
}

// parseKeywords splits the comma-separated keywords; like kwctl, an empty
// keyword (",," or a trailing comma) is an error.
func parseKeywords(annotations map[string]string) ([]string, error) {
	s, ok := annotations[annotationKeywords]
	if !ok {
		return nil, nil
	}
	var keywords []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			return nil, fmt.Errorf("annotation %s: %q: want comma-separated keywords, none empty", annotationKeywords, s)
		}
		keywords = append(keywords, k)
	}
	return keywords, nil
}

// parseMaintainers reads the author annotation as an address list. A value
// with no "@" anywhere is a plain name: no maintainers, not an error.
func parseMaintainers(annotations map[string]string) ([]maintainer, error) {
	s := strings.TrimSpace(annotations[annotationAuthor])
	if s == "" || !strings.Contains(s, "@") {
		return nil, nil
	}
	list, err := mail.ParseAddressList(s)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %q: want \"Name <email>, ...\": %w", annotationAuthor, s, err)
	}
	out := make([]maintainer, 0, len(list))
	for _, a := range list {
		name := a.Name
		if name == "" {
			name = a.Address
		}
		out = append(out, maintainer{name: name, email: a.Address})
	}
	return out, nil
}

func people(ms []maintainer) []yaml.MapSlice {
	out := make([]yaml.MapSlice, 0, len(ms))
	for _, m := range ms {
		out = append(out, yaml.MapSlice{{Key: "name", Value: m.name}, {Key: "email", Value: m.email}})
	}
	return out
}

// links names the source repository and, for GitHub, the release asset
// kwctl expects there.
func links(source, version string) []yaml.MapSlice {
	var out []yaml.MapSlice
	if u, err := url.Parse(source); err == nil && u.Host == "github.com" {
		wasm := strings.TrimSuffix(source, "/") + "/releases/download/v" + version + "/policy.wasm"
		out = append(out, yaml.MapSlice{{Key: "name", Value: "policy"}, {Key: "url", Value: wasm}})
	}
	return append(out, yaml.MapSlice{{Key: "name", Value: "source"}, {Key: "url", Value: source}})
}

func install(image string) string {
	return "The policy can be obtained with [`kwctl`](https://github.com/kubewarden/kwctl):\n" +
		"```console\n" +
		"kwctl pull " + image + "\n" +
		"```\n" +
		"Then generate a policy manifest and tune it to your liking, for example:\n" +
		"```console\n" +
		"kwctl scaffold manifest -t ClusterAdmissionPolicy registry://" + image + "\n" +
		"```\n"
}

// packageAnnotations builds the kubewarden/* annotations, sorted by key.
func packageAnnotations(md *metadata.Metadata, questionsUI string) (yaml.MapSlice, error) {
	values := map[string]string{
		pkgAnnotationMutation: fmt.Sprint(md.Mutating),
	}
	rules := make([]yaml.MapSlice, 0, len(md.Rules))
	for _, r := range md.Rules {
		rules = append(rules, yaml.MapSlice{
			{Key: "apiGroups", Value: nonNil(r.APIGroups)},
			{Key: "apiVersions", Value: nonNil(r.APIVersions)},
			{Key: "resources", Value: nonNil(r.Resources)},
			{Key: "operations", Value: nonNil(r.Operations)},
		})
	}
	b, err := yaml.Marshal(rules)
	if err != nil {
		return nil, fmt.Errorf("encode rules: %w", err)
	}
	values[pkgAnnotationRules] = string(b)

	if len(md.ContextAwareResources) > 0 {
		resources := slices.Clone(md.ContextAwareResources)
		slices.SortFunc(resources, func(a, b metadata.ContextAwareResource) int {
			return strings.Compare(a.APIVersion+" "+a.Kind, b.APIVersion+" "+b.Kind)
		})
		resources = slices.Compact(resources)
		list := make([]yaml.MapSlice, 0, len(resources))
		for _, r := range resources {
			list = append(list, yaml.MapSlice{{Key: "apiVersion", Value: r.APIVersion}, {Key: "kind", Value: r.Kind}})
		}
		b, err := yaml.Marshal(list)
		if err != nil {
			return nil, fmt.Errorf("encode context aware resources: %w", err)
		}
		values[pkgAnnotationContextAware] = string(b)
	}
	if s := strings.TrimSpace(md.Annotations[annotationResources]); s != "" {
		values[pkgAnnotationResources] = s
	}
	if s, ok := md.Annotations[annotationHiddenUI]; ok {
		switch s {
		case "true", "false":
			values[pkgAnnotationHiddenUI] = s
		default:
			return nil, fmt.Errorf("annotation %s: %q: want true or false", annotationHiddenUI, s)
		}
	}
	if strings.TrimSpace(questionsUI) != "" {
		values[pkgAnnotationQuestionsUI] = questionsUI
	}

	out := make(yaml.MapSlice, 0, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		out = append(out, yaml.MapItem{Key: k, Value: values[k]})
	}
	return out, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ReadStamp reads the version and createdAt of an existing
// artifacthub-pkg.yml, so that regenerating the same version can keep its
// creation time.
func ReadStamp(pkg []byte) (version string, createdAt time.Time, err error) {
	var stamp struct {
		Version   string `json:"version"`
		CreatedAt string `json:"createdAt"`
	}
	if err := sigsyaml.Unmarshal(pkg, &stamp); err != nil {
		return "", time.Time{}, fmt.Errorf("read %s: %w", PackageFile, err)
	}
	if stamp.Version == "" {
		return "", time.Time{}, fmt.Errorf("read %s: no version", PackageFile)
	}
	createdAt, err = time.Parse(time.RFC3339, stamp.CreatedAt)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read %s: createdAt: %w", PackageFile, err)
	}
	return stamp.Version, createdAt, nil
}
