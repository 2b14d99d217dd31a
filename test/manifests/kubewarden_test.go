package manifests

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	policiesv1 "github.com/kubewarden/adm-controller/api/policies/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

func clusterAdmissionPolicy(t *testing.T) *policiesv1.ClusterAdmissionPolicy {
	t.Helper()
	return object[*policiesv1.ClusterAdmissionPolicy](t, policyFile)
}

func TestClusterAdmissionPolicy(t *testing.T) {
	t.Parallel()
	p := clusterAdmissionPolicy(t)
	md, err := parsePolicyMetadata(readRepoFile(t, "metadata.yml"))
	require.NoError(t, err)

	assert.Equal(t, metadataRules(t), p.Spec.Rules, "the policy's rules are metadata.yml's")
	assert.Equal(t, *md.Mutating, p.Spec.Mutating, "mutating as in metadata.yml")
	backgroundAudit := md.BackgroundAudit == nil || *md.BackgroundAudit // Kubewarden's default: true
	assert.Equal(t, backgroundAudit, p.Spec.BackgroundAudit, "backgroundAudit as in metadata.yml")
	assert.Empty(t, p.Spec.ContextAwareResources, "metadata.yml names no context-aware resources")

	// The module is the package Artifact Hub lists, at metadata.yml's version.
	pkg := parseArtifacthubPackage(t, readRepoFile(t, "artifacthub/artifacthub-pkg.yml"))
	require.Len(t, pkg.ContainersImages, 1)
	assert.Equal(t, "registry://"+pkg.ContainersImages[0].Image, p.Spec.Module)
	assert.True(t, strings.HasSuffix(p.Spec.Module, ":v"+md.Annotations["io.kubewarden.policy.version"]), "module tag")

	assert.Equal(t, policiesv1.PolicyMode("protect"), p.Spec.Mode)
	assert.Equal(t, "default", p.Spec.PolicyServer)
	assert.Equal(t, ptrTo(admissionregistrationv1.Fail), p.Spec.FailurePolicy)
	assert.Equal(t, ptrTo(admissionregistrationv1.SideEffectClassNone), p.Spec.SideEffects)
	assert.Equal(t, ptrTo(admissionregistrationv1.Equivalent), p.Spec.MatchPolicy)
	if assert.NotNil(t, p.Spec.TimeoutSeconds) {
		assert.GreaterOrEqual(t, *p.Spec.TimeoutSeconds, int32(2), "Kubewarden's minimum")
		assert.LessOrEqual(t, *p.Spec.TimeoutSeconds, int32(30), "Kubernetes' maximum")
	}
	assert.Nil(t, p.Spec.ObjectSelector, "an object selector would let users opt out by labelling")
	checkNamespaceSelector(t, p.Spec.NamespaceSelector, kubewardenNS)
	assert.NotEmpty(t, p.Spec.Settings.Raw, "settings")

	// Kubewarden's own rule checks (api/policies/v1 policy_validation.go,
	// validateRulesField): operations, apiVersions and resources non-empty,
	// without empty strings. apiGroups may hold "", the core group.
	for i, r := range p.Spec.Rules {
		assert.NotEmpty(t, r.Operations, "rules[%d].operations", i)
		assert.NotEmpty(t, r.APIVersions, "rules[%d].apiVersions", i)
		assert.NotEmpty(t, r.Resources, "rules[%d].resources", i)
		assert.NotContains(t, r.Operations, admissionregistrationv1.OperationType(""), "rules[%d].operations", i)
		assert.NotContains(t, r.APIVersions, "", "rules[%d].apiVersions", i)
		assert.NotContains(t, r.Resources, "", "rules[%d].resources", i)
	}
}

// TestBackgroundAudit_agrees: metadata.yml's backgroundAudit is what every
// ClusterAdmissionPolicy sets (deploy/, the chart with and without the
// configuration check) and what every document of the repository says
// where it names a value.
func TestBackgroundAudit_agrees(t *testing.T) {
	t.Parallel()
	md, err := parsePolicyMetadata(readRepoFile(t, "metadata.yml"))
	require.NoError(t, err)
	want := md.BackgroundAudit == nil || *md.BackgroundAudit

	for _, f := range []string{"deploy/kubewarden/clusteradmissionpolicy.yaml", "deploy/kubewarden/clusteradmissionpolicy-validate.yaml",
		"deploy/kubewarden/config-validation/clusteradmissionpolicy.yaml"} {
		p := object[*policiesv1.ClusterAdmissionPolicy](t, f)
		assert.Equal(t, want, p.Spec.BackgroundAudit, f)
	}
	kw := renderRBAC(t, "mode: kubewarden\nsettings: {configValidation: warn}", kubewardenNS)
	require.Len(t, kw.policies, 3)
	for _, p := range kw.policies {
		assert.Equal(t, want, p.Spec.BackgroundAudit, "chart: %s", p.Name)
	}

	mention := regexp.MustCompile("backgroundAudit:\\s+(true|false)")
	docs := []string{"README.md", "deploy/README.md"}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	for _, m := range more {
		rel, err := filepath.Rel(repoRoot, m)
		require.NoError(t, err)
		docs = append(docs, rel)
	}
	found := 0
	for _, d := range docs {
		for _, m := range mention.FindAllStringSubmatch(string(readRepoFile(t, d)), -1) {
			found++
			assert.Equal(t, strconv.FormatBool(want), m[1], "%s says %q", d, m[0])
		}
	}
	assert.Positive(t, found, "the documents name the value somewhere")
}
