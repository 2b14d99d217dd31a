package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCEL(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "cel", "--kube-version", "1.35", "--settings-json", `{"externalUsers":["^livy$"]}`)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 3, strings.Count(r.stdout, "\nkind: MutatingAdmissionPolicy\n"))
	assert.Equal(t, 4, strings.Count(r.stdout, "\nkind: ValidatingAdmissionPolicy\n"))
	assert.Contains(t, r.stdout, "apiVersion: admissionregistration.k8s.io/v1beta1\nkind: MutatingAdmissionPolicy")
	assert.Contains(t, r.stdout, `"^livy$"`)
}

func TestCEL_refusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"settings the module refuses", []string{"--settings-json", `{"bypassAuth":"yes"}`}, "settings.bypassAuth: must be a boolean"},
		{"context rules", []string{"--settings-json", `{"queueCheck":"enforce"}`}, "cannot express settings.queueCheck (reads YuniKorn's configuration): these rules need the webhook"},
		{"old API server", []string{"--kube-version", "1.33"}, "MutatingAdmissionPolicy is beta from Kubernetes 1.34"},
		{"static before 1.36", []string{"--kube-version", "1.35", "--static", t.TempDir()}, "static manifests load only admissionregistration.k8s.io/v1"},
		{"static relative", []string{"--static", "rel/dir"}, "must be an absolute path"},
	} {
		r := runCLI(t, "", append([]string{"cel"}, tc.args...)...)
		assert.NotEqual(t, 0, r.code, tc.name)
		assert.Contains(t, r.stderr, tc.want, tc.name)
		assert.Empty(t, r.stdout, tc.name)
	}
}

func TestCEL_static(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runCLI(t, "", "cel", "--kube-version", "1.37", "--static", dir)
	require.Equal(t, 0, r.code, r.stderr)
	for _, name := range []string{"admission-configuration.yaml", "mutating/yunikorn-userinfo.yaml", "validating/yunikorn-userinfo.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		if name != "admission-configuration.yaml" {
			assert.Contains(t, string(data), "name: yunikorn-userinfo-pods.static.k8s.io")
			assert.Contains(t, string(data), "policyName: yunikorn-userinfo-pods.static.k8s.io")
		}
	}
}
