package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	policiesv1 "github.com/kubewarden/adm-controller/api/policies/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/test/manifests/internal/chartrender"
)

// settingsFixture is one case of testdata/settings.json: settings and the
// policy's verdict on them. The policy is held to these verdicts natively
// (policy TestValidateSettings_fixtures) and in the built module's
// validate_settings (host/conformance TestOurHost_settings).
type settingsFixture struct {
	Name     string          `json:"name"`
	Settings json.RawMessage `json:"settings"`
	// SettingsText: a document no encoder writes (duplicate keys); values
	// are a map, so such settings never come out of the chart.
	SettingsText string `json:"settingsText"`
	Valid        bool   `json:"valid"`
	Message      string `json:"message"`
}

// settingsFixtures reads testdata/settings.json.
func settingsFixtures(t *testing.T) []settingsFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "settings.json"))
	require.NoError(t, err)
	var cases []settingsFixture
	require.NoError(t, json.Unmarshal(raw, &cases))
	return cases
}

// chartSettingsExceptions are the fixtures whose settings the chart cannot
// hand to the policy as written, and why that is no crash loop.
var chartSettingsExceptions = map[string]string{
	// The nesting bound is the module's stack, not Go's regexp: Helm
	// compiles the pattern natively and accepts it, and the webhook then
	// refuses the settings at start with the policy's message rather than
	// trapping. A known crash loop, named by its log line.
	"a pattern nested past what the module can compile": "the nesting bound is the Wasm module's stack; Helm compiles natively",
	// Helm deletes a key whose value is null: the rendered settings do not
	// have it, and the policy takes its default.
	"null list": "helm drops null values",
	// settings: null deletes the chart's defaults too; the chart refuses to
	// render without them. Stricter than the policy, not a crash loop.
	"null means defaults": "helm drops null values",
	// The chart gives validateOnly to the validating twin only and refuses
	// it in values. Stricter than the policy, not a crash loop.
	"validateOnly": "the chart sets validateOnly itself",
	// The chart routes a custom kind to the policy by its version and
	// resource, which the policy does not need; it refuses the entry
	// without them. Stricter than the policy, not a crash loop.
	"workloads: presets and a custom kind": "the chart needs version and resource",
}

// TestChart_settingsFixtures: settings that `helm install` accepts never
// crash-loop the webhook. Every settings fixture the policy refuses is
// refused by the chart too (values.schema.json, or the chart's own checks
// with the policy's words where the schema cannot say it), with and
// without schema validation where the chart's checks apply; every
// fixture the policy accepts renders.
func TestChart_settingsFixtures(t *testing.T) {
	t.Parallel()
	cases := settingsFixtures(t)
	require.Greater(t, len(cases), 50)
	index := regexp.MustCompile(`\[\d+\]`)
	sameWords := 0
	for _, c := range cases {
		if c.SettingsText != "" {
			continue
		}
		if why, ok := chartSettingsExceptions[c.Name]; ok {
			t.Logf("%s: not compared (%s)", c.Name, why)
			continue
		}
		var s any
		require.NoError(t, json.Unmarshal(c.Settings, &s), c.Name)
		for _, mode := range []string{"standalone", "kubewarden"} {
			v := map[string]any{"mode": mode, "settings": s}
			_, err := render(t, v, "yunikorn-userinfo", "yunikorn-userinfo")
			if c.Valid {
				assert.NoError(t, err, "%s (%s): the policy accepts %s", c.Name, mode, c.Settings)
				continue
			}
			if !assert.Error(t, err, "%s (%s): the policy refuses %s (%s); the chart must too", c.Name, mode, c.Settings, c.Message) {
				continue
			}
			// The chart's own checks use the policy's words (less an
			// array index the string form has no way to know).
			_, own := renderWith(t, v, "yunikorn-userinfo", "yunikorn-userinfo", chartrender.Options{Upgrade: true, SkipSchema: true})
			if own != nil && (regexp.MustCompile(`empty pattern|comma-separated list|must not be empty`).MatchString(c.Message)) {
				want := c.Message
				if m := regexp.MustCompile(`^(.*?): (empty pattern \(between commas\).*)$`).FindStringSubmatch(want); m != nil {
					want = index.ReplaceAllString(m[1], "") + ": " + m[2]
				}
				if m := regexp.MustCompile(`^(.*? is a comma-separated list in one array entry: .*? its own entry)`).FindStringSubmatch(want); m != nil {
					want = m[1]
				}
				assert.Contains(t, own.Error(), want, "%s (%s)", c.Name, mode)
				sameWords++
			}
		}
	}
	assert.GreaterOrEqual(t, sameWords, 12, "the chart's checks give the policy's words")
}

// TestChart_settingsReadBack: the settings the webhook and policy-server
// read are the settings given. For every settings fixture the chart
// renders, in modes standalone and kubewarden, each key given comes back
// with its value (a map given merges over the chart's defaults, so its
// keys are checked one by one): from the settings ConfigMap as serve
// parses it, and from both ClusterAdmissionPolicies. Among the fixtures are
// patterns holding U+0085, U+2028, U+2029 and U+FEFF, which Helm's YAML
// writer does not write back as they were.
func TestChart_settingsReadBack(t *testing.T) {
	t.Parallel()
	cases := settingsFixtures(t)
	checked, special := 0, 0
	for _, c := range cases {
		if !c.Valid || c.SettingsText != "" || chartSettingsExceptions[c.Name] != "" {
			continue
		}
		var given map[string]any
		if json.Unmarshal(c.Settings, &given) != nil || given == nil {
			continue
		}
		if regexp.MustCompile("[\u0085\u2028\u2029\ufeff]").Match(c.Settings) || regexp.MustCompile(`\\u(0085|2028|2029|feff)`).Match(c.Settings) {
			special++
		}
		for _, mode := range []string{"standalone", "kubewarden"} {
			ms, err := render(t, map[string]any{"mode": mode, "settings": given}, "yunikorn-userinfo", "yunikorn-userinfo")
			require.NoError(t, err, "%s (%s)", c.Name, mode)
			read := 0
			for _, m := range ms {
				var doc []byte
				switch o := m.obj.(type) {
				case *corev1.ConfigMap:
					if s, ok := o.Data[settingsKey]; ok {
						doc, err = yaml.YAMLToJSONStrict([]byte(s))
						require.NoError(t, err, "%s (%s): settings.yaml", c.Name, mode)
					}
				case *policiesv1.ClusterAdmissionPolicy:
					doc = o.Spec.Settings.Raw
				}
				if doc == nil {
					continue
				}
				var got map[string]any
				require.NoError(t, json.Unmarshal(doc, &got), "%s (%s)", c.Name, mode)
				assertHolds(t, given, got, c.Name+" ("+mode+")")
				read++
			}
			assert.NotZero(t, read, "%s (%s): settings found", c.Name, mode)
		}
		checked++
	}
	assert.Greater(t, checked, 30)
	assert.NotZero(t, special, "a fixture holds the characters YAML breaks lines at")
}

// assertHolds: every key of want is in got with want's value; maps are
// compared key by key (Helm merges them over the defaults), null is
// dropped (Helm deletes the key).
func assertHolds(t *testing.T, want, got map[string]any, where string) {
	t.Helper()
	for k, v := range want {
		switch w := v.(type) {
		case nil:
		case map[string]any:
			g, ok := got[k].(map[string]any)
			if assert.True(t, ok, "%s: %s is a map", where, k) {
				assertHolds(t, w, g, where+": "+k)
			}
		default:
			assert.Equal(t, v, got[k], "%s: %s", where, k)
		}
	}
}
