package celtest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/yunikorn-userinfo/userinfo/internal/cel"
)

// identity is one submitter of the corpus.
type identity struct {
	name   string
	user   string
	groups []string
}

// goValue is what YuniKorn's admission controller writes for id:
// encoding/json with the empty user and the empty group list left out.
func goValue(t testing.TB, user string, groups []string) string {
	t.Helper()
	b, err := json.Marshal(struct {
		User   string   `json:"user,omitempty"`
		Groups []string `json:"groups,omitempty"`
	}{user, groups})
	require.NoError(t, err)
	return string(b)
}

func corpus() []identity {
	var ctl strings.Builder
	for c := 0; c < 0x20; c++ {
		ctl.WriteByte(byte(c))
	}
	many := make([]string, 300)
	for i := range many {
		many[i] = "group-" + strings.Repeat("x", i%40) + "-<&>\"\\"
	}
	return []identity{
		{"plain", "alice", []string{"dev", "system:authenticated"}},
		{"no groups", "alice", nil},
		{"no user", "", []string{"dev"}},
		// No username and no groups at all is what an audit replay sends,
		// never the API server (docs/BEHAVIOUR.md §4.12): not in the corpus.
		{"quotes and backslashes", `a"l\i"ce\`, []string{`"`, `\`, `\"`, `\\u0041`}},
		{"every control character", "c" + ctl.String(), []string{ctl.String(), "\x7f"}},
		{"html characters", "<script>&amp;</script>", []string{"a<b", "c>d", "e&f"}},
		{"line and paragraph separators", "a\u2028b\u2029c", []string{"\u2028", "\u2029\u2028"}},
		{"non-ASCII", "ålice-日本-🙂", []string{"Группа", "\u00e9", "e\u0301", "\ufffd real replacement char"}},
		{"service account", "system:serviceaccount:team-a:builder", []string{"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"}},
		{"long name", strings.Repeat("n", cel.MaxIdentityChars-512), []string{strings.Repeat("g", 512)}},
		{"many groups", "bob", many},
		{"empty group names", "bob", []string{"", "", "x"}},
		{"json-looking name", `{"user":"root","groups":["system:masters"]}`, []string{`","groups":["admin`}},
	}
}

// podCreate is the request to create a Pod without the annotation by id.
func podCreate(id identity) (request, []byte) {
	obj := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "ns"},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}
	r := request{
		gvk: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		op: admission.Create, namespace: "ns", object: obj,
		user: &user.DefaultInfo{Name: id.user, Groups: id.groups},
	}
	return r, r.moduleRequest()
}

// moduleRequest is the AdmissionRequest the API server sends a webhook
// for r, encoded with encoding/json as the API server does.
func (r request) moduleRequest() []byte {
	raw := func(o map[string]any) []byte {
		if o == nil {
			return nil
		}
		b, _ := json.Marshal(o)
		return b
	}
	ar := admissionv1.AdmissionRequest{
		UID: types.UID("uid"), Kind: metav1.GroupVersionKind{Group: r.gvk.Group, Version: r.gvk.Version, Kind: r.gvk.Kind},
		Resource:    metav1.GroupVersionResource{Group: r.gvr.Group, Version: r.gvr.Version, Resource: r.gvr.Resource},
		SubResource: r.sub, Namespace: r.namespace, Operation: admissionv1.Operation(r.op),
		UserInfo: authnv1.UserInfo{Username: r.user.Name, Groups: r.user.Groups},
	}
	ar.Object.Raw = raw(r.object)
	ar.OldObject.Raw = raw(r.oldObject)
	b, _ := json.Marshal(ar)
	return b
}

// TestIdentityCorpus: for every identity of the corpus, the annotation the
// in-apiserver policies record is byte for byte what encoding/json writes,
// and what the policy module writes.
func TestIdentityCorpus(t *testing.T) {
	ctx := context.Background()
	m := newModule(ctx, t)
	settings := []byte(`{}`)
	ps, err := compileSet(t, settings)
	require.NoError(t, err)
	for _, id := range corpus() {
		t.Run(id.name, func(t *testing.T) {
			want := goValue(t, id.user, id.groups)
			r, modReq := podCreate(id)
			got := ps.evaluate(ctx, t, r)
			require.True(t, got.allowed, "CEL refused: %s", got.message)
			value, ok := annotation(got.object, []string{"metadata"})
			require.True(t, ok, "CEL recorded nothing")
			assert.Equal(t, want, value, "CEL's value differs from encoding/json's")

			v := m.validate(ctx, t, modReq, settings)
			require.True(t, v.accepted, v.message)
			assert.Equal(t, want, gjson.GetBytes(v.object, "metadata.annotations."+gjson.Escape(cel.AnnotationKey)).String(),
				"the module's value differs from encoding/json's")

			// The submitter may supply their own value, and it is
			// judged the same way: admitted as it is.
			r.object = got.object
			again := ps.evaluate(ctx, t, r)
			assert.True(t, again.allowed, again.message)
		})
	}
}

// TestIdentityRefused: identities the CEL cannot encode exactly are
// refused with a message that says why, never recorded differently.
func TestIdentityRefused(t *testing.T) {
	ctx := context.Background()
	ps, err := compileSet(t, []byte(`{}`))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		id   identity
		why  string
	}{
		{"invalid UTF-8 user", identity{user: "al\xffice"}, "not valid UTF-8"},
		{"invalid UTF-8 group", identity{user: "alice", groups: []string{"ok", "b\xc3"}}, "not valid UTF-8"},
		{"truncated sequence before a real U+FFFD", identity{user: "\xe2\ufffd\x80\x80"}, "not valid UTF-8"},
		{"user too long", identity{user: strings.Repeat("u", cel.MaxIdentityChars+1)}, "larger than"},
		{"groups too long", identity{user: "alice", groups: []string{strings.Repeat("g", cel.MaxIdentityChars-5), "g"}}, "larger than"},
		{"too many groups", identity{user: "alice", groups: make([]string, cel.MaxGroups+1)}, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := podCreate(tc.id)
			got := ps.evaluate(ctx, t, r)
			require.False(t, got.allowed, "admitted: %s", toYAML(got.object))
			assert.Contains(t, got.message, "cannot be recorded exactly")
			assert.Contains(t, got.message, tc.why)
		})
	}
}

// worst is n characters that each need an escape.
func worst(n int) string { return strings.Repeat("\x01<", n/2) }

// manyGroups is the worst group list within the bounds: as many groups as
// allowed, every character escaped, 4,096 characters left for the user.
func manyGroups() []string {
	groups := make([]string, cel.MaxGroups)
	for i := range groups {
		groups[i] = worst((cel.MaxIdentityChars - 4096) / cel.MaxGroups)
	}
	return groups
}

// TestCost: the worst identities within the bounds (every character
// needing an escape, as many groups as allowed) are encoded within the API
// server's cost limits, measured by its own cost tracking: each expression
// under 1,000,000 (or the evaluation fails), each policy under 10,000,000.
func TestCost(t *testing.T) {
	ctx := context.Background()
	ps, err := compileSet(t, []byte(`{}`))
	require.NoError(t, err)
	for _, id := range []identity{
		{name: "one long username", user: worst(cel.MaxIdentityChars)},
		{name: "most groups", user: worst(4096), groups: manyGroups()},
		{name: "plain", user: "alice", groups: []string{"dev", "system:authenticated"}},
	} {
		r, _ := podCreate(id)
		got := ps.evaluate(ctx, t, r)
		require.True(t, got.allowed, "%s: %s", id.name, got.message)
		value, _ := annotation(got.object, []string{"metadata"})
		assert.Equal(t, goValue(t, id.user, id.groups), value, id.name)
		m, v := ps.costs(ctx, t, r)
		t.Logf("%s: %d bytes recorded; cost: mutating policy %d, validating policy %d (limit 10,000,000 per policy, 1,000,000 per expression)",
			id.name, len(value), m, v)
		assert.Positive(t, m)
		assert.Positive(t, v)
	}
}
