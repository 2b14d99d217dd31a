package ykconfig

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func readSource(t *testing.T, paths ...string) Source {
	t.Helper()
	var src Source
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join("testdata", p))
		require.NoError(t, err)
		cms, err := ReadConfigMaps(p, data)
		require.NoError(t, err)
		for _, cm := range cms {
			require.NoError(t, src.Add(p, cm))
		}
	}
	return src
}

// statuses is the report as key -> statuses, in order.
func statuses(r *Result) map[string][]Status {
	out := map[string][]Status{}
	for _, n := range r.Notes {
		out[n.Key] = append(out[n.Key], n.Status)
	}
	return out
}

func settingsJSON(t *testing.T, r *Result) map[string]any {
	t.Helper()
	j, err := r.JSON()
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(j, &m), "%s", j)
	return m
}

// TestConvert_examples: each example ConfigMap becomes the settings that
// YuniKorn 1.9's parsing gives (worked out by hand from am_conf.go's
// rules), and every key is reported with what became of it.
func TestConvert_examples(t *testing.T) {
	tests := []struct {
		file     string
		opts     Options
		want     map[string]any
		statuses map[string][]Status
	}{
		{
			file: "frontends.yaml",
			want: map[string]any{
				"bypassAuth": false, "trustControllers": true,
				// "^livy$, ^jupyterhub$": pieces are trimmed.
				"externalUsers":  []any{"^livy$", "^jupyterhub$"},
				"externalGroups": []any{"^platform-admins$"},
				"scheduling": map[string]any{
					"bypassNamespaces": []any{"^kube-system$", "^monitoring$"},
					"labelNamespaces":  []any{"^team-"},
				},
			},
			statuses: map[string][]Status{
				KeyBypassAuth:       {Mapped},
				KeyTrustControllers: {Mapped},
				KeySystemUsers:      {Differs},
				KeyExternalUsers:    {Mapped, Differs},
				KeyExternalGroups:   {Mapped, Differs},
				KeyBypassNamespaces: {Mapped},
				KeyLabelNamespaces:  {Mapped},
				"scheduling":        {Mapped},
				// Not set: every namespace's Pods without an ID share one.
				KeyGenerateUniqueAppID: {Warning},
				KeyHotRefresh:          {NotMapped},
				"log.admission.level":  {NotMapped},
				"(2 other keys)":       {Ignored},
			},
		},
		{
			// --scheduling=false: the filtering keys stay YuniKorn's
			// admission controller's.
			file: "frontends.yaml",
			opts: Options{NoScheduling: true},
			want: map[string]any{
				"bypassAuth": false, "trustControllers": true,
				"externalUsers":  []any{"^livy$", "^jupyterhub$"},
				"externalGroups": []any{"^platform-admins$"},
			},
			statuses: map[string][]Status{
				KeyBypassAuth:          {Mapped},
				KeyTrustControllers:    {Mapped},
				KeySystemUsers:         {Differs},
				KeyExternalUsers:       {Mapped, Differs},
				KeyExternalGroups:      {Mapped, Differs},
				KeyBypassNamespaces:    {NotMapped},
				KeyLabelNamespaces:     {NotMapped},
				KeyGenerateUniqueAppID: {Warning},
				KeyHotRefresh:          {NotMapped},
				"log.admission.level":  {NotMapped},
				"(2 other keys)":       {Ignored},
			},
		},
		{
			file: "layered.yaml",
			opts: Options{QueueCheck: "warn", ApplicationOwnership: "enforce"},
			want: map[string]any{
				// yunikorn-configs overrides trustControllers ("True"
				// parses) and externalUsers (trailing comma skipped);
				// systemUsers comes from yunikorn-defaults.
				"trustControllers": true,
				"systemUsers":      []any{"^system:serviceaccount:kube-system:", "^system:serviceaccount:ray-system:kuberay-operator$"},
				"externalUsers":    []any{"^airflow-scheduler$"},
				"queueCheck":       map[string]any{"mode": "warn", "namespace": "batch-system", "policyGroup": "batch"},
				// "1" is true to strconv.ParseBool.
				"applicationOwnership": map[string]any{"mode": "enforce", "generateUniqueAppIds": true},
				"scheduling":           map[string]any{"generateUniqueAppIds": true},
			},
			statuses: map[string][]Status{
				KeyTrustControllers:    {Mapped},
				KeySystemUsers:         {Mapped},
				KeyExternalUsers:       {Mapped, Differs, Differs},
				"namespace":            {Mapped},
				KeyPolicyGroup:         {Mapped},
				KeyGenerateUniqueAppID: {Mapped},
				"scheduling":           {Mapped},
				"(1 other keys)":       {Ignored},
			},
		},
		{
			file: "mistakes.json",
			want: map[string]any{
				// "yes" is no boolean to YuniKorn: its default, false.
				"bypassAuth": false,
				// "[a-" does not compile: the whole list is YuniKorn's
				// default.
				"systemUsers":    []any{"^system:serviceaccount:kube-system:"},
				"externalGroups": []any{"^data-eng$"},
				// Split at the comma inside {2,8}, as YuniKorn does.
				"externalUsers": []any{"^svc-[a-z]{2", "8}$"},
				// No filtering key: YuniKorn's defaults.
				"scheduling": map[string]any{},
			},
			statuses: map[string][]Status{
				KeyBypassAuth:          {Invalid},
				KeySystemUsers:         {Invalid},
				KeyExternalUsers:       {Mapped, Differs, Differs, Differs},
				KeyExternalGroups:      {Mapped, Differs, Differs},
				KeyAMServiceName:       {NotMapped},
				KeySchedulerAddress:    {NotMapped},
				KeyHotRefresh:          {Differs},
				"scheduling":           {Mapped},
				KeyGenerateUniqueAppID: {Warning},
				"admissionController.accessControl.externalUser": {Ignored},
			},
		},
		{
			file: "open.yaml",
			opts: Options{QueueCheck: "enforce", Namespace: "yk"},
			want: map[string]any{
				// bypassAuth "true" is not carried over: the policy
				// enforces (the hand-over, or a YuniKorn that checks
				// nothing).
				"bypassAuth":  false,
				"systemUsers": []any{},
				"queueCheck":  map[string]any{"mode": "enforce", "namespace": "yk"},
				"scheduling": map[string]any{
					"processNamespaces": []any{"^spark-", "^ml-"},
					"noLabelNamespaces": []any{"^ml-legacy$"},
				},
			},
			statuses: map[string][]Status{
				KeyBypassAuth:          {HandedOver},
				KeySystemUsers:         {Mapped},
				"namespace":            {Mapped},
				KeyProcessNamespaces:   {Mapped},
				KeyNoLabelNamespaces:   {Mapped},
				"scheduling":           {Mapped},
				KeyGenerateUniqueAppID: {Warning},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			r, err := Convert(readSource(t, tc.file), tc.opts)
			require.NoError(t, err)
			assert.Equal(t, tc.want, settingsJSON(t, r))
			assert.Equal(t, tc.statuses, statuses(r))
			for _, n := range r.Notes {
				assert.NotEmpty(t, n.Text, "%s", n.Key)
			}
			// YAML and JSON say the same.
			y, err := r.YAML("header")
			require.NoError(t, err)
			j, err := yaml.YAMLToJSON(y)
			require.NoError(t, err)
			var fromYAML map[string]any
			require.NoError(t, json.Unmarshal(j, &fromYAML))
			assert.Equal(t, tc.want, fromYAML, "%s", y)
		})
	}
}

// TestConvert_explicit writes YuniKorn's defaults for the access control (and filtering)
// keys that are not set, in the policy's order.
func TestConvert_explicit(t *testing.T) {
	r, err := Convert(Source{Configs: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName},
		Data: map[string]string{KeyExternalGroups: "^ops$"}}}, Options{Explicit: true})
	require.NoError(t, err)
	j, err := r.JSON()
	require.NoError(t, err)
	assert.Equal(t, `{
  "bypassAuth": false,
  "trustControllers": true,
  "systemUsers": ["^system:serviceaccount:kube-system:"],
  "externalUsers": [],
  "externalGroups": ["^ops$"],
  "scheduling": {
    "processNamespaces": [],
    "bypassNamespaces": ["^kube-system$"],
    "labelNamespaces": [],
    "noLabelNamespaces": [],
    "generateUniqueAppIds": false
  }
}
`, string(j))
	assert.Equal(t, map[string][]Status{KeySystemUsers: {Differs}, KeyExternalGroups: {Mapped, Differs}, "scheduling": {Mapped},
		KeyGenerateUniqueAppID: {Warning}}, statuses(r))
}

// TestFlatten_binaryData: binaryData keys lose their last part; .gz values
// are gunzipped, others are empty, as in the k8shim; configs override
// defaults, and binaryData overrides data within one ConfigMap.
func TestFlatten_binaryData(t *testing.T) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, err := w.Write([]byte("^gz-user$"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	src := Source{
		Defaults: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: DefaultsConfigMapName},
			Data: map[string]string{KeyExternalGroups: "^from-defaults$", KeyExternalUsers: "^overridden$"}},
		Configs: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName},
			Data: map[string]string{KeyExternalUsers: "^data$"},
			BinaryData: map[string][]byte{
				KeyExternalUsers + ".gz": gz.Bytes(),
				KeySystemUsers + ".raw":  []byte("^ignored$"),
			}},
	}
	r, err := Convert(src, Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"externalUsers":  []any{"^gz-user$"},
		"externalGroups": []any{"^from-defaults$"},
		"systemUsers":    []any{},
		"scheduling":     map[string]any{},
	}, settingsJSON(t, r))
}

func TestReadConfigMaps_errors(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"not a ConfigMap", "kind: Secret\nmetadata: {name: yunikorn-configs}\n", "read f: document 1: a Secret, not a ConfigMap"},
		{"boolean value", "kind: ConfigMap\ndata:\n  admissionController.accessControl.bypassAuth: true\n",
			`read f: document 1: data.admissionController.accessControl.bypassAuth: must be a string (quote it: "true"), got bool`},
		{"empty", "# nothing\n", "read f: no ConfigMap in it"},
		{"not YAML", "data: [\n", "read f: document 1: ..."},
		{"scalar", "just text\n", "read f: document 1: ..."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadConfigMaps("f", []byte(tc.data))
			require.Error(t, err)
			if prefix, ok := cutSuffix(tc.want, "..."); ok {
				assert.Contains(t, err.Error(), prefix)
				return
			}
			assert.EqualError(t, err, tc.want)
		})
	}
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}

func TestSourceAdd_errors(t *testing.T) {
	cm := func(name, ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	}
	var s Source
	assert.EqualError(t, s.Add("f", cm("other", "")), `f: ConfigMap "other" is neither yunikorn-configs nor yunikorn-defaults, the two YuniKorn reads`)
	require.NoError(t, s.Add("f", cm(ConfigMapName, "yunikorn")))
	assert.EqualError(t, s.Add("g", cm("", "")), "g: ConfigMap yunikorn-configs given twice")
	assert.EqualError(t, s.Add("g", cm(DefaultsConfigMapName, "other")),
		`g: ConfigMap yunikorn-defaults is in namespace "other", the other in "yunikorn": YuniKorn reads both from its own namespace`)
	_, err := Convert(s, Options{QueueCheck: "strict"})
	assert.EqualError(t, err, `queue check mode "strict": want one of enforce, warn, off`)
}

// TestConvert_overrideReported: a key of yunikorn-configs that replaces one
// of yunikorn-defaults says so, and one that only yunikorn-defaults sets
// says where it comes from.
func TestConvert_overrideReported(t *testing.T) {
	r, err := Convert(readSource(t, "layered.yaml"), Options{})
	require.NoError(t, err)
	texts := map[string]string{}
	for _, n := range r.Notes {
		if n.Status == Mapped {
			texts[n.Key] = n.Text
		}
	}
	assert.Equal(t, `"True" -> trustControllers: true (yunikorn-configs, over yunikorn-defaults' "false")`, texts[KeyTrustControllers])
	assert.Equal(t, `"^airflow-scheduler$," -> externalUsers: ["^airflow-scheduler$"] (yunikorn-configs, over yunikorn-defaults' "^old-gateway$")`, texts[KeyExternalUsers])
	assert.True(t, strings.HasSuffix(texts[KeySystemUsers], " (from yunikorn-defaults)"), texts[KeySystemUsers])
}
