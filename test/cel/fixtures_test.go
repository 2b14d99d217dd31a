package celtest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/yunikorn-userinfo/userinfo/internal/cel"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// resources are the guarded built-in kinds, with their resource.
var resources = map[schema.GroupVersionKind]string{
	{Version: "v1", Kind: "Pod"}:                        "pods",
	{Version: "v1", Kind: "ReplicationController"}:      "replicationcontrollers",
	{Group: "apps", Version: "v1", Kind: "Deployment"}:  "deployments",
	{Group: "apps", Version: "v1", Kind: "ReplicaSet"}:  "replicasets",
	{Group: "apps", Version: "v1", Kind: "StatefulSet"}: "statefulsets",
	{Group: "apps", Version: "v1", Kind: "DaemonSet"}:   "daemonsets",
	{Group: "batch", Version: "v1", Kind: "Job"}:        "jobs",
	{Group: "batch", Version: "v1", Kind: "CronJob"}:    "cronjobs",
	{Version: "v1", Kind: "Binding"}:                    "bindings",
}

// apiServerRequest turns a fixture's AdmissionRequest into the request
// the API server would admit: the object decoded into its Go type (what
// a real API server holds: unknown fields dropped, types enforced) and
// back. ok is false for a request the API server never sends: malformed
// input, a kind it does not route here, no authenticated user.
func apiServerRequest(raw []byte) (request, bool) {
	var ar struct {
		Kind        metav1.GroupVersionKind     `json:"kind"`
		Resource    metav1.GroupVersionResource `json:"resource"`
		SubResource string                      `json:"subResource"`
		Operation   string                      `json:"operation"`
		Namespace   string                      `json:"namespace"`
		UserInfo    struct {
			Username string   `json:"username"`
			Groups   []string `json:"groups"`
		} `json:"userInfo"`
		Object    json.RawMessage `json:"object"`
		OldObject json.RawMessage `json:"oldObject"`
	}
	if json.Unmarshal(raw, &ar) != nil || ar.UserInfo.Username == "" {
		return request{}, false
	}
	gvk := schema.GroupVersionKind{Group: ar.Kind.Group, Version: ar.Kind.Version, Kind: ar.Kind.Kind}
	res, guarded := resources[gvk]
	if !guarded || (ar.Operation != "CREATE" && ar.Operation != "UPDATE") {
		return request{}, false
	}
	sub := ar.SubResource
	if gvk.Kind == "Binding" && ar.Resource.Resource == "pods" {
		res, sub = "pods", "binding"
	}
	typed := func(b json.RawMessage) (map[string]any, bool) {
		if len(b) == 0 || string(b) == "null" {
			return nil, true
		}
		o, err := scheme.Scheme.New(gvk)
		if err != nil || json.Unmarshal(b, o) != nil {
			return nil, false
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, false
		}
		u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), gvk.Kind
		return u, true
	}
	obj, ok1 := typed(ar.Object)
	old, ok2 := typed(ar.OldObject)
	if !ok1 || !ok2 || obj == nil || (ar.Operation == "UPDATE" && old == nil) {
		return request{}, false
	}
	return request{gvk: gvk, gvr: schema.GroupVersionResource{Group: gvk.Group, Version: "v1", Resource: res}, sub: sub,
		op: admission.Operation(ar.Operation), namespace: ar.Namespace, object: obj, oldObject: old,
		user: &user.DefaultInfo{Name: ar.UserInfo.Username, Groups: ar.UserInfo.Groups}}, true
}

// metaPath is where the kind keeps the annotation.
func metaPath(kind string) []string {
	switch kind {
	case "Pod", "Binding":
		return []string{"metadata"}
	case "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template", "metadata"}
	}
	return []string{"spec", "template", "metadata"}
}

// TestFixtures replays every fixture of testdata/cases.json and cases.d
// whose settings the in-apiserver mode expresses, as the API server would
// admit it, through the generated policies and through the policy module,
// and compares the verdicts and the recorded annotation. The one
// difference allowed is documented (docs/BEHAVIOUR.md, "In-apiserver
// mode"): an allowed submitter's value that is valid but not in the form
// encoding/json writes is refused by CEL.
func TestFixtures(t *testing.T) {
	ctx := context.Background()
	m := newModule(ctx, t)
	cases, err := fixtures.Load()
	require.NoError(t, err)
	sets := map[string]*policySet{}
	compared, refusedSettings, notSent, differences := 0, 0, 0, 0
	for _, c := range cases {
		key := string(c.Settings)
		ps, seen := sets[key]
		if !seen {
			ps, err = compileSet(t, c.Settings)
			var need *cel.ErrNeedsWebhook
			switch {
			case errors.As(err, &need):
				ps = nil
			case err != nil:
				// Settings the module refuses: the cel command never
				// gets here (validate_settings first).
				ps = nil
			}
			sets[key] = ps
		}
		if ps == nil {
			refusedSettings++
			continue
		}
		r, ok := apiServerRequest(c.Request)
		if !ok {
			notSent++
			continue
		}
		compared++
		t.Run(c.Name, func(t *testing.T) {
			got := ps.evaluate(ctx, t, r)
			want := m.validate(ctx, t, r.moduleRequest(), c.Settings)
			path := metaPath(r.gvk.Kind)
			if want.accepted && !got.allowed {
				// The documented difference, and only it.
				value, _ := annotation(r.object, path)
				require.Contains(t, got.message, "accepts a supplied value only in the form encoding/json writes",
					"CEL refused what the module admits: %s", got.message)
				assert.Equal(t, metav1.StatusReasonInvalid, got.reason)
				// The value is valid, and not what encoding/json writes
				// for what it says.
				var id struct {
					User   string   `json:"user"`
					Groups []string `json:"groups,omitempty"`
				}
				require.True(t, gjson.Valid(value), value)
				require.NoError(t, json.Unmarshal([]byte(value), &id))
				again, err := json.Marshal(id)
				require.NoError(t, err)
				assert.NotEqual(t, value, string(again), "CEL refused a canonical value")
				differences++
				return
			}
			require.Equal(t, want.accepted, got.allowed, "module: %v %q; CEL: %v %q", want.accepted, want.message, got.allowed, got.message)
			if !want.accepted {
				return
			}
			var modObj map[string]any
			require.NoError(t, json.Unmarshal(want.object, &modObj))
			wv, wok := annotation(modObj, path)
			gv, gok := annotation(got.object, path)
			assert.Equal(t, wok, gok, "annotation present: module %v, CEL %v", wok, gok)
			assert.Equal(t, wv, gv, "annotation value")
		})
	}
	t.Logf("%d fixtures compared (%d of them the documented difference); %d with settings that need the webhook; %d requests the API server never sends",
		compared, differences, refusedSettings, notSent)
	require.Greater(t, compared, 150, "too few fixtures compared: the filter is wrong")
}
