package cel

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestParseSettings_refusesContextRules(t *testing.T) {
	for _, tc := range []struct {
		settings string
		refused  []string
	}{
		{`{"queueCheck":"enforce"}`, []string{"queueCheck"}},
		{`{"queueCheck":{"mode":"warn"}}`, []string{"queueCheck"}},
		{`{"queueCheck":{}}`, []string{"queueCheck"}},
		{`{"trustRBAC":true,"trustPodTokens":true}`, []string{"trustPodTokens", "trustRBAC"}},
		{`{"trustRBAC":{"verb":"impersonate"}}`, []string{"trustRBAC"}},
		{`{"workloads":["kuberay"]}`, []string{"workloads"}},
		{`{"scheduling":{}}`, []string{"scheduling"}},
		{`{"applicationOwnership":"warn","configValidation":"enforce"}`, []string{"applicationOwnership", "configValidation"}},
	} {
		_, err := ParseSettings([]byte(tc.settings))
		var need *ErrNeedsWebhook
		require.True(t, errors.As(err, &need), tc.settings)
		assert.Equal(t, tc.refused, need.Keys)
		for _, k := range tc.refused {
			assert.Contains(t, err.Error(), "settings."+k)
		}
		assert.Contains(t, err.Error(), "need the webhook")
	}
}

func TestParseSettings_offSpellingsAreAccepted(t *testing.T) {
	s, err := ParseSettings([]byte(`{"queueCheck":"off","applicationOwnership":{"mode":"off"},"trustRBAC":false,
		"trustPodTokens":false,"workloads":[],"scheduling":null,"configValidation":"off"}`))
	require.NoError(t, err)
	assert.True(t, s.TrustControllers)
	assert.Equal(t, defaultSystemUsers, s.SystemUsers)
}

func TestParseSettings_lists(t *testing.T) {
	s, err := ParseSettings([]byte(`{"externalUsers":"^a$, ^b{1,2}$ ,[,]x","externalGroups":["^g$"],"systemUsers":"",
		"recordedGroups":{"exclude":"^system:"},"bypassAuth":true,"userLabelKey":"l"}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"^a$", "^b{1,2}$", "[,]x"}, s.ExternalUsers)
	assert.Equal(t, []string{"^g$"}, s.ExternalGroups)
	assert.Empty(t, s.SystemUsers)
	assert.Equal(t, []string{"^system:"}, s.RecordedGroups.Exclude)
	assert.True(t, s.BypassAuth)
	assert.Equal(t, "l", s.UserLabelKey)
}

func TestMAPVersion(t *testing.T) {
	for in, want := range map[string]string{
		"1.34": "admissionregistration.k8s.io/v1beta1", "v1.35.2": "admissionregistration.k8s.io/v1beta1",
		"1.36": "admissionregistration.k8s.io/v1", "1.37.1": "admissionregistration.k8s.io/v1",
	} {
		got, err := MAPVersion(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"1.33", "2.0", "", "one"} {
		_, err := MAPVersion(bad)
		assert.Error(t, err, bad)
	}
}

func TestGenerate(t *testing.T) {
	s, err := ParseSettings([]byte(`{}`))
	require.NoError(t, err)
	out, err := Generate(s, Options{KubeVersion: "1.35"})
	require.NoError(t, err)
	var kinds []string
	for _, doc := range strings.Split(string(out), "\n---\n")[1:] {
		var o struct{ APIVersion, Kind string }
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o))
		kinds = append(kinds, o.APIVersion+" "+o.Kind)
	}
	// Three mutating policies (Pods, templates, CronJobs), four
	// validating ones (and Bindings), each with its binding.
	assert.Len(t, kinds, 14)
	assert.Contains(t, kinds, "admissionregistration.k8s.io/v1beta1 MutatingAdmissionPolicy")
	assert.Contains(t, kinds, "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding")

	s.ValidateOnly = true
	out, err = Generate(s, Options{KubeVersion: "1.36"})
	require.NoError(t, err)
	assert.NotContains(t, string(out), "MutatingAdmissionPolicy")
}

func TestQuote(t *testing.T) {
	assert.Equal(t, `"a\"b\\c\u0000\u000a\u2028é\U0001f642"`, Quote("a\"b\\c\x00\n\u2028é🙂"))
}
