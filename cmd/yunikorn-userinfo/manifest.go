package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/pflag"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// manifestFlags build the request from an object manifest and a submitter,
// as the API server would send it, instead of reading an AdmissionReview
// with -r.
type manifestFlags struct {
	objectPath    string
	oldObjectPath string
	user          string
	groups        []string
	operation     string
	subresource   string
	namespace     string
	dryRun        bool
}

// manifestFlagNames are the flags that go with --object, never with -r.
var manifestFlagNames = []string{"old-object", "user", "group", "operation", "subresource", "namespace", "dry-run"}

func (f *manifestFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.objectPath, "object", "", "build the request from this object manifest (YAML or JSON) instead of -r; with --operation DELETE, the object deleted")
	fs.StringVar(&f.oldObjectPath, "old-object", "", "with --object and --operation UPDATE: the object as stored before the update (required for UPDATE)")
	fs.StringVar(&f.user, "user", "", "with --object: the submitter's user name (required)")
	fs.StringArrayVar(&f.groups, "group", nil, "with --object: a group of the submitter (repeatable); system:authenticated, and a service account's groups, are added as the API server adds them")
	fs.StringVar(&f.operation, "operation", "CREATE", "with --object: CREATE, UPDATE or DELETE")
	fs.StringVar(&f.subresource, "subresource", "", "with --object: the subresource written, such as status or ephemeralcontainers (a Binding or an Eviction names its own)")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "with --object: the namespace of the request (default: the object's metadata.namespace, else default)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "with --object: a dry-run request (dryRun: true)")
}

// checkSource checks that exactly one of -r and --object names the
// request, and that no flag of --object comes with -r.
func (f *evalFlags) checkSource(fs *pflag.FlagSet) error {
	m := &f.manifest
	switch {
	case f.requestPath != "" && m.objectPath != "":
		return errors.New("-r and --object exclude each other: -r reads a whole AdmissionReview, --object builds one")
	case f.requestPath == "" && m.objectPath == "":
		return errors.New("want -r REQUEST (an AdmissionRequest or AdmissionReview) or --object FILE --user USER (a manifest and its submitter)")
	case f.requestPath != "":
		for _, name := range manifestFlagNames {
			if fs.Changed(name) {
				return fmt.Errorf("--%s goes with --object, not with -r: the review given with -r says it", name)
			}
		}
		return nil
	}
	if m.user == "" {
		return errors.New("--object needs --user USER: the submitter the API server authenticated")
	}
	switch m.operation = strings.ToUpper(m.operation); m.operation {
	case "CREATE", "DELETE":
		if m.oldObjectPath != "" {
			return fmt.Errorf("--old-object goes with --operation UPDATE, not %s", m.operation)
		}
	case "UPDATE":
		if m.oldObjectPath == "" {
			return errors.New("--operation UPDATE needs --old-object FILE: the object as stored before the update")
		}
	default:
		return fmt.Errorf("invalid --operation %q: want CREATE, UPDATE or DELETE", m.operation)
	}
	return nil
}

// subresourceKinds are the kinds that are written as a subresource of
// another resource: the API server sends the parent's resource with them.
var subresourceKinds = map[schema.GroupVersionKind]struct {
	resource    schema.GroupVersionResource
	subresource string
}{
	{Version: "v1", Kind: "Binding"}:                   {schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "binding"},
	{Group: "policy", Version: "v1", Kind: "Eviction"}: {schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "eviction"},
}

// manifestReview builds the AdmissionReview the API server sends a
// webhook for f's manifest and submitter: kind and resource from the
// object's apiVersion and kind, the namespace filled in as the API server
// fills it, the groups its authenticators add, the options of the
// operation, a fresh uid. The object is taken as written: the API server's
// defaulting and built-in admission plugins (service account volumes,
// tolerations) are not applied.
func manifestReview(f *manifestFlags) (*admissionv1.AdmissionReview, error) {
	object, err := readManifest("--object", f.objectPath)
	if err != nil {
		return nil, err
	}
	gvk, err := object.groupVersionKind("--object")
	if err != nil {
		return nil, err
	}
	namespace := f.namespace
	if namespace == "" {
		namespace = object.namespace()
	}
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	if err := object.setNamespace("--object", namespace); err != nil {
		return nil, err
	}

	resource, _ := meta.UnsafeGuessKindToResource(gvk)
	subresource := f.subresource
	if parent, ok := subresourceKinds[gvk]; ok {
		if subresource != "" && subresource != parent.subresource {
			return nil, fmt.Errorf("--subresource %s: a %s is written as the %s/%s subresource", subresource, gvk.Kind, parent.resource.Resource, parent.subresource)
		}
		resource, subresource = parent.resource, parent.subresource
	} else if gvk.Group == "autoscaling" && gvk.Kind == "Scale" {
		return nil, errors.New("--object: a Scale does not say which resource it scales (deployments, replicasets, statefulsets, ...): write the AdmissionReview and pass it with -r")
	}

	raw, err := json.Marshal(object)
	if err != nil {
		return nil, fmt.Errorf("--object %s: %w", f.objectPath, err)
	}
	req := &admissionv1.AdmissionRequest{
		UID:                types.UID(uuid.NewString()), // fresh, as the API server gives every request
		Kind:               metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:           metav1.GroupVersionResource{Group: resource.Group, Version: resource.Version, Resource: resource.Resource},
		SubResource:        subresource,
		RequestKind:        &metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		RequestResource:    &metav1.GroupVersionResource{Group: resource.Group, Version: resource.Version, Resource: resource.Resource},
		RequestSubResource: subresource,
		Name:               object.name(),
		Namespace:          namespace,
		Operation:          admissionv1.Operation(f.operation),
		UserInfo:           authenticationv1.UserInfo{Username: f.user, Groups: authenticatedGroups(f.user, f.groups)},
		DryRun:             &f.dryRun,
	}
	switch f.operation {
	case "CREATE":
		req.Object = runtime.RawExtension{Raw: raw}
		req.Options = runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)}
	case "UPDATE":
		old, err := readManifest("--old-object", f.oldObjectPath)
		if err != nil {
			return nil, err
		}
		oldGVK, err := old.groupVersionKind("--old-object")
		if err != nil {
			return nil, err
		}
		if oldGVK != gvk {
			return nil, fmt.Errorf("--old-object is %s %s, --object %s %s: an update keeps the kind",
				oldGVK.GroupVersion(), oldGVK.Kind, gvk.GroupVersion(), gvk.Kind)
		}
		if err := old.setNamespace("--old-object", namespace); err != nil {
			return nil, err
		}
		oldRaw, err := json.Marshal(old)
		if err != nil {
			return nil, fmt.Errorf("--old-object %s: %w", f.oldObjectPath, err)
		}
		req.Object = runtime.RawExtension{Raw: raw}
		req.OldObject = runtime.RawExtension{Raw: oldRaw}
		req.Options = runtime.RawExtension{Raw: []byte(`{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1"}`)}
	case "DELETE":
		// The object deleted is the old object; kubectl delete asks for
		// background propagation.
		req.OldObject = runtime.RawExtension{Raw: raw}
		req.Options = runtime.RawExtension{Raw: []byte(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Background"}`)}
	}
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{Kind: "AdmissionReview", APIVersion: admissionv1.SchemeGroupVersion.String()},
		Request:  req,
	}, nil
}

// authenticatedGroups are groups as the API server's authenticators
// complete them: a service account's user also gets system:serviceaccounts
// and system:serviceaccounts:NAMESPACE, and every user but
// system:anonymous gets system:authenticated (system:anonymous gets
// system:unauthenticated), each only when missing.
func authenticatedGroups(user string, groups []string) []string {
	out := slices.Clone(groups)
	add := func(g string) {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if namespace, _, ok := strings.Cut(rest, ":"); ok {
			add("system:serviceaccounts")
			add("system:serviceaccounts:" + namespace)
		}
	}
	if user == "system:anonymous" {
		add("system:unauthenticated")
	} else {
		add("system:authenticated")
	}
	return out
}

// manifestObject is a decoded object manifest; numbers are kept as
// written.
type manifestObject map[string]any

// readManifest reads one object from a YAML or JSON file; flag names the
// flag in errors.
func readManifest(flag, path string) (manifestObject, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", flag, err)
	}
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		if n := yamlDocuments(data); n > 1 {
			return nil, fmt.Errorf("%s %s: %d YAML documents: give one object", flag, path, n)
		}
		if data, err = yaml.YAMLToJSONStrict(data); err != nil {
			return nil, fmt.Errorf("%s %s: neither JSON nor YAML: %w", flag, path, err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj manifestObject
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%s %s: want one object (a mapping with apiVersion and kind)", flag, path)
	}
	return obj, nil
}

// yamlDocuments counts the documents of a YAML stream that hold more than
// comments.
func yamlDocuments(data []byte) int {
	n, content := 0, false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		switch {
		case line == "---" || strings.HasPrefix(line, "--- "):
			if content {
				n++
			}
			content = strings.HasPrefix(line, "--- ")
		case line != "" && !strings.HasPrefix(strings.TrimLeft(line, " \t"), "#"):
			content = true
		}
	}
	if content {
		n++
	}
	return n
}

func (o manifestObject) metadata() map[string]any {
	m, _ := o["metadata"].(map[string]any)
	return m
}

func (o manifestObject) name() string {
	s, _ := o.metadata()["name"].(string)
	return s
}

func (o manifestObject) namespace() string {
	s, _ := o.metadata()["namespace"].(string)
	return s
}

// groupVersionKind reads apiVersion and kind, both required.
func (o manifestObject) groupVersionKind(flag string) (schema.GroupVersionKind, error) {
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	if apiVersion == "" || kind == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("%s: the object needs apiVersion and kind", flag)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("%s: apiVersion %q: %w", flag, apiVersion, err)
	}
	return gv.WithKind(kind), nil
}

// setNamespace fills metadata.namespace in as the API server does before
// admission, refusing an object written for another namespace.
func (o manifestObject) setNamespace(flag, namespace string) error {
	switch got := o.namespace(); got {
	case namespace:
		return nil
	case "":
		m := o.metadata()
		if m == nil {
			m = map[string]any{}
			o["metadata"] = m
		}
		m["namespace"] = namespace
		return nil
	default:
		return fmt.Errorf("%s: the object's metadata.namespace %q is not the request's namespace %q (--namespace)", flag, got, namespace)
	}
}
