package celtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission/plugin/policy/config"
	"k8s.io/apiserver/pkg/admission/plugin/policy/manifest/loader"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/internal/cel"
)

// TestStatic: the staticManifestsDir form loads with the API server's own
// configuration and manifest loaders (names, kinds, binding references),
// and the loaded policies record the submitter as the API form does.
func TestStatic(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := cel.ParseSettings([]byte(`{}`))
	require.NoError(t, err)
	files, err := cel.StaticFiles(s, cel.Options{KubeVersion: "1.37"}, dir)
	require.NoError(t, err)
	for name, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}

	var ac struct {
		Plugins []struct {
			Name          string         `json:"name"`
			Configuration map[string]any `json:"configuration"`
		} `json:"plugins"`
	}
	require.NoError(t, yaml.Unmarshal(files["admission-configuration.yaml"], &ac))
	dirs := map[string]string{}
	for _, p := range ac.Plugins {
		raw, err := yaml.Marshal(p.Configuration)
		require.NoError(t, err)
		load := config.LoadValidatingConfig
		if p.Name == "MutatingAdmissionPolicy" {
			load = config.LoadMutatingConfig
		}
		cfg, err := load(bytes.NewReader(raw))
		require.NoError(t, err, p.Name)
		dirs[p.Name] = cfg.StaticManifestsDir
	}
	require.Len(t, dirs, 2)

	dec := scheme.Codecs.UniversalDeserializer()
	accept := func(obj runtime.Object) ([]*admv1.MutatingAdmissionPolicy, error) {
		if p, ok := obj.(*admv1.MutatingAdmissionPolicy); ok {
			return []*admv1.MutatingAdmissionPolicy{p}, nil
		}
		return nil, loader.ErrUnrecognizedType
	}
	acceptBinding := func(obj runtime.Object) ([]*admv1.MutatingAdmissionPolicyBinding, error) {
		if b, ok := obj.(*admv1.MutatingAdmissionPolicyBinding); ok {
			return []*admv1.MutatingAdmissionPolicyBinding{b}, nil
		}
		return nil, loader.ErrUnrecognizedType
	}
	maps, mapBindings, _, err := loader.LoadPolicyManifests(dirs["MutatingAdmissionPolicy"], dec, accept, acceptBinding,
		func(b *admv1.MutatingAdmissionPolicyBinding) string { return b.Spec.PolicyName })
	require.NoError(t, err)
	assert.Len(t, maps, 3)
	assert.Len(t, mapBindings, 3)

	vaps, vapBindings, _, err := loader.LoadPolicyManifests(dirs["ValidatingAdmissionPolicy"], dec,
		func(obj runtime.Object) ([]*admv1.ValidatingAdmissionPolicy, error) {
			if p, ok := obj.(*admv1.ValidatingAdmissionPolicy); ok {
				return []*admv1.ValidatingAdmissionPolicy{p}, nil
			}
			return nil, loader.ErrUnrecognizedType
		},
		func(obj runtime.Object) ([]*admv1.ValidatingAdmissionPolicyBinding, error) {
			if b, ok := obj.(*admv1.ValidatingAdmissionPolicyBinding); ok {
				return []*admv1.ValidatingAdmissionPolicyBinding{b}, nil
			}
			return nil, loader.ErrUnrecognizedType
		},
		func(b *admv1.ValidatingAdmissionPolicyBinding) string { return b.Spec.PolicyName })
	require.NoError(t, err)
	assert.Len(t, vaps, 4)
	assert.Len(t, vapBindings, 4)

	ps := &policySet{}
	for _, p := range maps {
		ps.mutating = append(ps.mutating, compileMutating(t, p))
	}
	for _, p := range vaps {
		ps.validating = append(ps.validating, struct {
			policy *admv1.ValidatingAdmissionPolicy
			v      validatingValidator
		}{p, compileValidating(t, p)})
	}
	id := identity{user: `o'brien <ops>`, groups: []string{"dev", "a\u2028b"}}
	r, _ := podCreate(id)
	got := ps.evaluate(ctx, t, r)
	require.True(t, got.allowed, got.message)
	value, _ := annotation(got.object, []string{"metadata"})
	assert.Equal(t, goValue(t, id.user, id.groups), value)
}
