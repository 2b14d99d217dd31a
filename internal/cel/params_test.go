package cel

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

var updateChart = flag.Bool("update", false, "rewrite the chart's generated CEL policies")

// chartFile is where the Helm chart reads the policies of modes cel and
// hybrid from.
var chartFile = filepath.Join("..", "..", "charts", "yunikorn-userinfo", "files", "cel-policies.json")

// TestChartFile: the chart ships the policies this package writes, byte
// for byte (make generate rewrites the file, make verify fails on drift).
func TestChartFile(t *testing.T) {
	got, err := ChartPolicies()
	require.NoError(t, err)
	if *updateChart {
		require.NoError(t, os.WriteFile(chartFile, got, 0o644))
	}
	want, err := os.ReadFile(chartFile)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "%s differs from internal/cel: run make generate", chartFile)
}

// TestChartPolicies_noSettingsInText: the chart's form carries no setting:
// the text is the same whatever the settings, and every value is read from
// the parameter.
func TestChartPolicies_noSettingsInText(t *testing.T) {
	raw, err := ChartPolicies()
	require.NoError(t, err)
	var f ChartFile
	require.NoError(t, json.Unmarshal(raw, &f))
	got, err := json.Marshal(f.Targets)
	require.NoError(t, err)
	for _, needle := range []string{"^system:", "yunikorn-admin", "system:kube-controller-manager"} {
		assert.NotContains(t, string(got), needle)
	}
	for _, k := range ParamKeys {
		assert.Contains(t, string(got), `\"`+k+`\"`, "the policies read %s", k)
	}
}

func TestParamData(t *testing.T) {
	s, err := ParseSettings([]byte(`{"externalUsers":["^a$","","x\ny"],"systemUsers":[],"bypassAuth":true,
		"recordedGroups":{"exclude":["^system:"]},"userLabelKey":"l"}`))
	require.NoError(t, err)
	d := ParamData(s)
	assert.Equal(t, "^a$\n(?:)\nx\\ny", d["externalUsers"])
	assert.Equal(t, "", d["systemUsers"])
	assert.Equal(t, "true", d["bypassAuth"])
	assert.Equal(t, "true", d["trustControllers"])
	assert.Equal(t, "l", d["userLabelKey"])
	assert.Equal(t, "filter", d["recordedGroups"])
	assert.Equal(t, "^system:", d["recordedGroupsExclude"])
	for k := range d {
		assert.Contains(t, ParamKeys, k)
	}
	s, err = ParseSettings([]byte(`{"recordedGroups":{"omit":true}}`))
	require.NoError(t, err)
	d = ParamData(s)
	assert.Equal(t, "omit", d["recordedGroups"])
	assert.Equal(t, strings.Join(defaultSystemUsers, "\n"), d["systemUsers"])
}

// paramsFile holds, for every settings fixture the policy accepts and the
// CEL mode expresses, the parameter data ParamData writes for it over the
// chart's default settings (values.yaml, which Helm merges under the
// values given): test/manifests holds the chart's ConfigMap to it, so the
// chart's encoding of the settings and this package's have one
// definition.
var paramsFile = filepath.Join("..", "..", "testdata", "cel-params.json")

type paramsExample struct {
	Name     string            `json:"name"`
	Settings json.RawMessage   `json:"settings"`
	Data     map[string]string `json:"data"`
}

func TestParamsFile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "settings.json"))
	require.NoError(t, err)
	var cases []struct {
		Name     string          `json:"name"`
		Settings json.RawMessage `json:"settings"`
		Valid    bool            `json:"valid"`
	}
	require.NoError(t, json.Unmarshal(raw, &cases))
	vraw, err := os.ReadFile(filepath.Join("..", "..", "charts", "yunikorn-userinfo", "values.yaml"))
	require.NoError(t, err)
	var values struct {
		Settings map[string]any `json:"settings"`
	}
	require.NoError(t, yaml.Unmarshal(vraw, &values))
	require.NotEmpty(t, values.Settings)
	out := []paramsExample{}
	for _, c := range cases {
		if !c.Valid || len(c.Settings) == 0 {
			continue
		}
		var given map[string]any
		if json.Unmarshal(c.Settings, &given) != nil || given == nil {
			continue
		}
		merged := map[string]any{}
		for k, v := range values.Settings {
			merged[k] = v
		}
		for k, v := range given {
			if v == nil {
				delete(merged, k) // as Helm does
				continue
			}
			merged[k] = v
		}
		m, err := json.Marshal(merged)
		require.NoError(t, err)
		s, err := ParseSettings(m)
		if err != nil || s.ValidateOnly {
			continue
		}
		out = append(out, paramsExample{Name: c.Name, Settings: c.Settings, Data: ParamData(s)})
	}
	require.Greater(t, len(out), 10)
	got, err := json.MarshalIndent(out, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	if *updateChart {
		require.NoError(t, os.WriteFile(paramsFile, got, 0o644))
	}
	want, err := os.ReadFile(paramsFile)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "%s differs from internal/cel: run make generate", paramsFile)
}
