package appid

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestGenerate: the shim's GenerateApplicationID, cuts
// included (fmt's precision counts characters, not bytes).
func TestGenerate(t *testing.T) {
	long := strings.Repeat("n", 60)
	for _, c := range []struct {
		ns     string
		unique bool
		uid    string
		want   string
	}{
		{"e2e", false, "", "yunikorn-e2e-autogen"},
		{"e2e", false, "some-uid", "yunikorn-e2e-autogen"},
		{long, false, "", fmt.Sprintf("%.63s", "yunikorn-"+long+"-autogen")},
		{"e2e", true, "", "e2e-uniqueautogen"},
		{long, true, "", long[:26] + "-uniqueautogen"},
		{"e2e", true, "u-1", "e2e-u-1"},
		{long, true, strings.Repeat("u", 50), fmt.Sprintf("%.63s", long[:26]+"-"+strings.Repeat("u", 50))},
		{"ns", true, strings.Repeat("é", 70), fmt.Sprintf("%.63s", "ns-"+strings.Repeat("é", 70))},
	} {
		got := Generate(c.ns, c.unique, c.uid)
		assert.Equal(t, c.want, got, "%q unique=%v uid=%q", c.ns, c.unique, c.uid)
	}
	for _, s := range []string{"", "abc", "é\xffx", strings.Repeat("日本", 40), "a\xff\xfe\xfdb"} {
		for n := 0; n < 70; n += 7 {
			assert.Equal(t, fmt.Sprintf("%.*s", n, s), Cut(s, n), "%q cut to %d", s, n)
		}
	}
}

// The shim's order of ID sources, and its generated IDs.
func TestOf(t *testing.T) {
	of := func(ns string, labels, annotations map[string]string, unique bool) string {
		id, generated := Of(ns, func(k string) string { return labels[k] }, func(k string) string { return annotations[k] }, unique)
		assert.Equal(t, generated, id != "" && FromPod(func(k string) string { return labels[k] }, func(k string) string { return annotations[k] }) == "")
		return id
	}
	l := map[string]string{"yunikorn.apache.org/app-id": "a", "applicationId": "b", "spark-app-selector": "c"}
	ann := map[string]string{"yunikorn.apache.org/app-id": "d"}
	assert.Equal(t, "a", of("ns", l, ann, false))
	delete(l, "yunikorn.apache.org/app-id")
	assert.Equal(t, "d", of("ns", l, ann, false))
	assert.Equal(t, "b", of("ns", l, nil, false))
	delete(l, "applicationId")
	assert.Equal(t, "c", of("ns", l, nil, false))
	assert.Equal(t, "", of("ns", map[string]string{"applicationId": "x-uniqueautogen"}, nil, false))
	assert.Equal(t, "yunikorn-ns-autogen", of("ns", nil, nil, false))
	assert.Equal(t, "yunikorn-default-autogen", of("", nil, nil, false))
	assert.Equal(t, "", of("ns", nil, nil, true))
	assert.Equal(t, "x", of("ns", map[string]string{"applicationId": "x"}, nil, true))
	long := strings.Repeat("n", 60)
	assert.Equal(t, ("yunikorn-" + long + "-autogen")[:63], of(long, nil, nil, false))
}

// A generated ID names its namespace unless it was cut.
func TestGeneratedNamespace(t *testing.T) {
	for id, ns := range map[string]string{
		"yunikorn-team-a-autogen":          "team-a",
		"yunikorn-default-autogen":         "default",
		"yunikorn--autogen":                "",
		"yunikorn-team-a":                  "",
		"team-a-autogen":                   "",
		Generated(strings.Repeat("n", 60)): "",
	} {
		assert.Equal(t, ns, GeneratedNamespace(id), id)
	}
}

// Label values as the API server validates them.
func TestValidLabelValue(t *testing.T) {
	for s, ok := range map[string]bool{
		"a": true, "yunikorn-ns-autogen": true, "a.b_c-d": true, strings.Repeat("a", 63): true,
		"": false, strings.Repeat("a", 64): false, "-a": false, "a-": false, "a b": false, "é": false, "a/b": false,
	} {
		assert.Equal(t, ok, ValidLabelValue(s), "%q", s)
	}
}
