package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	policiesv1 "github.com/kubewarden/adm-controller/api/policies/v1"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	kustomize "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// kind is a Kubernetes resource type a manifest may hold.
type kind struct {
	// new returns a pointer to an empty object of the Go type.
	new func() any
	// namespaced resources must name their namespace: `kubectl apply -k`
	// would otherwise put them in whatever namespace is current.
	namespaced bool
}

// kinds are the resource types allowed in deploy/. Each is decoded into the
// Go type its own project publishes, so an unknown or misspelt field (or
// one in the wrong case) fails, as the API server's strict field validation
// would.
var kinds = map[schema.GroupVersionKind]kind{
	corev1.SchemeGroupVersion.WithKind("Namespace"):                                            {new: func() any { return &corev1.Namespace{} }},
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"):                                       {new: func() any { return &corev1.ServiceAccount{} }, namespaced: true},
	corev1.SchemeGroupVersion.WithKind("ConfigMap"):                                            {new: func() any { return &corev1.ConfigMap{} }, namespaced: true},
	corev1.SchemeGroupVersion.WithKind("Service"):                                              {new: func() any { return &corev1.Service{} }, namespaced: true},
	appsv1.SchemeGroupVersion.WithKind("Deployment"):                                           {new: func() any { return &appsv1.Deployment{} }, namespaced: true},
	batchv1.SchemeGroupVersion.WithKind("Job"):                                                 {new: func() any { return &batchv1.Job{} }, namespaced: true},
	batchv1.SchemeGroupVersion.WithKind("CronJob"):                                             {new: func() any { return &batchv1.CronJob{} }, namespaced: true},
	networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"):                                  {new: func() any { return &networkingv1.NetworkPolicy{} }, namespaced: true},
	policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"):                                {new: func() any { return &policyv1.PodDisruptionBudget{} }, namespaced: true},
	admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"):        {new: func() any { return &admissionregistrationv1.MutatingWebhookConfiguration{} }},
	admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"):      {new: func() any { return &admissionregistrationv1.ValidatingWebhookConfiguration{} }},
	admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicy"):             {new: func() any { return &admissionregistrationv1.MutatingAdmissionPolicy{} }},
	admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicyBinding"):      {new: func() any { return &admissionregistrationv1.MutatingAdmissionPolicyBinding{} }},
	admissionregistrationv1beta1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicy"):        {new: func() any { return &admissionregistrationv1beta1.MutatingAdmissionPolicy{} }},
	admissionregistrationv1beta1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicyBinding"): {new: func() any { return &admissionregistrationv1beta1.MutatingAdmissionPolicyBinding{} }},
	admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy"):           {new: func() any { return &admissionregistrationv1.ValidatingAdmissionPolicy{} }},
	admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicyBinding"):    {new: func() any { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} }},
	certmanagerv1.SchemeGroupVersion.WithKind("Issuer"):                                        {new: func() any { return &certmanagerv1.Issuer{} }, namespaced: true},
	certmanagerv1.SchemeGroupVersion.WithKind("Certificate"):                                   {new: func() any { return &certmanagerv1.Certificate{} }, namespaced: true},
	policiesv1.GroupVersion.WithKind("ClusterAdmissionPolicy"):                                 {new: func() any { return &policiesv1.ClusterAdmissionPolicy{} }},
	policiesv1.GroupVersion.WithKind("PolicyServer"):                                           {new: func() any { return &policiesv1.PolicyServer{} }},
	rbacv1.SchemeGroupVersion.WithKind("Role"):                                                 {new: func() any { return &rbacv1.Role{} }, namespaced: true},
	rbacv1.SchemeGroupVersion.WithKind("RoleBinding"):                                          {new: func() any { return &rbacv1.RoleBinding{} }, namespaced: true},
	rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):                                          {new: func() any { return &rbacv1.ClusterRole{} }},
	rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"):                                   {new: func() any { return &rbacv1.ClusterRoleBinding{} }},
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}:                    {new: func() any { return &serviceMonitor{} }, namespaced: true},
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}:                    {new: func() any { return &prometheusRule{} }, namespaced: true},
	{Group: "kustomize.config.k8s.io", Version: "v1beta1", Kind: "Kustomization"}:              {new: func() any { return &kustomize.Kustomization{} }},
}

// manifest is one decoded document of a manifest file.
type manifest struct {
	// path is relative to the repository root, with forward slashes.
	path string
	gvk  schema.GroupVersionKind
	// obj points to the typed object.
	obj any
}

// decodeStrict decodes one YAML document into into, failing on duplicate,
// unknown or wrongly cased fields (sigs.k8s.io/json, as the API server
// does; encoding/json would match keys case-insensitively).
func decodeStrict(doc []byte, into any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return fmt.Errorf("parse YAML: %w", err)
	}
	strict, err := kjson.UnmarshalStrict(j, into)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return errors.Join(strict...)
}

// documents splits a YAML stream into its documents, leaving out empty and
// comment-only ones.
func documents(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("split documents: %w", err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("parse YAML: %w", err)
		}
		if string(j) != "null" {
			docs = append(docs, doc)
		}
	}
}

// decodeManifests decodes every document of a manifest file into its type.
func decodeManifests(rel string, data []byte) ([]manifest, error) {
	docs, err := documents(data)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, errors.New("no document")
	}
	var out []manifest
	var errs []error
	for i, doc := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i, err))
			continue
		}
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: apiVersion: %w", i, err))
			continue
		}
		gvk := gv.WithKind(tm.Kind)
		k, ok := kinds[gvk]
		if !ok {
			errs = append(errs, fmt.Errorf("document %d: %s is not a known kind: add it to kinds in test/manifests/decode_test.go", i, gvk))
			continue
		}
		obj := k.new()
		if err := decodeStrict(doc, obj); err != nil {
			errs = append(errs, fmt.Errorf("document %d (%s): %w", i, gvk.Kind, err))
			continue
		}
		if meta, ok := obj.(metav1.Object); ok {
			if meta.GetName() == "" {
				errs = append(errs, fmt.Errorf("document %d (%s): metadata.name is empty", i, gvk.Kind))
			}
			if k.namespaced != (meta.GetNamespace() != "") {
				errs = append(errs, fmt.Errorf("document %d (%s %s): metadata.namespace %q: namespaced=%t", i, gvk.Kind, meta.GetName(), meta.GetNamespace(), k.namespaced))
			}
		}
		out = append(out, manifest{path: rel, gvk: gvk, obj: obj})
	}
	return out, errors.Join(errs...)
}

// deployManifests decodes every manifest under deploy/ once.
var deployManifests = sync.OnceValues(func() ([]manifest, error) {
	var all []manifest
	err := filepath.WalkDir(filepath.Join(repoRoot, "deploy"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isYAML(path) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel := relPath(path)
		ms, err := decodeManifests(rel, data)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		all = append(all, ms...)
		return nil
	})
	return all, err
})

// object returns the one object of type T in the manifest file rel
// (relative to the repository root).
func object[T any](t *testing.T, rel string) T {
	t.Helper()
	all, err := deployManifests()
	require.NoError(t, err)
	var found []T
	for _, m := range all {
		if o, ok := m.obj.(T); ok && m.path == rel {
			found = append(found, o)
		}
	}
	require.Len(t, found, 1, "%s: want exactly one %T", rel, *new(T))
	return found[0]
}

// objects returns every object of type T under deploy/.
func objects[T any](t *testing.T) []T {
	t.Helper()
	all, err := deployManifests()
	require.NoError(t, err)
	var found []T
	for _, m := range all {
		if o, ok := m.obj.(T); ok {
			found = append(found, o)
		}
	}
	return found
}

func isYAML(path string) bool {
	ext := filepath.Ext(path)
	return ext == ".yaml" || ext == ".yml"
}

// relPath turns a path under repoRoot into a slash-separated path relative
// to the repository root.
func relPath(path string) string {
	rel, err := filepath.Rel(repoRoot, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(rel)
}

// readRepoFile reads a file given relative to the repository root.
func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	require.NoError(t, err)
	return data
}
