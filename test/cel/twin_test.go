package celtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"encoding/json"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/yunikorn-userinfo/userinfo/internal/cel"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// twinMatcher compiles the twin's match condition as the API server
// compiles a webhook's (k8s.io/apiserver/pkg/admission/plugin/webhook,
// accessors.go GetCompiledMatcher: the base environment, an authorizer,
// no params, failurePolicy Fail).
func twinMatcher(t testing.TB, settings []byte) matchconditions.Matcher {
	t.Helper()
	s, err := cel.ParseSettings(settings)
	require.NoError(t, err)
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	require.NoError(t, err)
	fail := admv1.Fail
	acc := []plugincel.ExpressionAccessor{&matchconditions.MatchCondition{Name: cel.TwinConditionName, Expression: cel.TwinCondition(s)}}
	filter := compiler.CompileCondition(acc, plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
	for _, r := range filter.(interface {
		CompilationErrors() []error
	}).CompilationErrors() {
		require.NoError(t, r, "compile the twin's match condition")
	}
	return matchconditions.NewMatcher(filter, &fail, "webhook", "validating", "workloads.validate.user-info.yunikorn.apache.org")
}

// calls reports whether the API server would call the twin for r with
// obj as the final object; a match condition that errs fails the test
// (with failurePolicy Fail it would refuse the request).
func calls(ctx context.Context, t testing.TB, m matchconditions.Matcher, r request, obj map[string]any) bool {
	t.Helper()
	res := m.Match(ctx, r.attrs(&unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}), nil, nil)
	require.NoError(t, res.Error, "the twin's match condition failed")
	return res.Matches
}

// TestTwinCondition_fixtures: over every fixture whose settings let the
// chart write the twin's match condition, the API server skips the twin
// only for a request the twin (the module with validateOnly) admits, as
// the object the fixture holds and as the module's mutating call leaves
// it. A skipped twin must never be a refusal lost.
func TestTwinCondition_fixtures(t *testing.T) {
	ctx := context.Background()
	m := newModule(ctx, t)
	cases, err := fixtures.Load()
	require.NoError(t, err)
	judged, skipped := 0, 0
	matchers := map[string]matchconditions.Matcher{}
	for _, c := range cases {
		s, err := cel.ParseSettings(c.Settings)
		var need *cel.ErrNeedsWebhook
		if errors.As(err, &need) || err != nil || s.RecordedGroups != nil {
			continue
		}
		match, ok := matchers[string(c.Settings)]
		if !ok {
			match = twinMatcher(t, c.Settings)
			matchers[string(c.Settings)] = match
		}
		r, ok := apiServerRequest(c.Request)
		if !ok {
			continue
		}
		twinSettings := withValidateOnly(t, c.Settings)
		finals := []map[string]any{r.object}
		if v := m.validate(ctx, t, r.moduleRequest(), c.Settings); v.accepted && string(v.object) != "" {
			finals = append(finals, decode(t, v.object))
		}
		for i, obj := range finals {
			judged++
			if calls(ctx, t, match, r, obj) {
				continue
			}
			skipped++
			final := r
			final.object = obj
			v := m.validate(ctx, t, final.moduleRequest(), twinSettings)
			assert.True(t, v.accepted, "%s (final object %d): the twin is skipped but refuses: %s", c.Name, i, v.message)
		}
	}
	t.Logf("%d final objects judged, the twin skipped for %d", judged, skipped)
	require.Greater(t, skipped, 20, "the condition skips almost nothing: the filter or the condition is wrong")
}

// TestTwinCondition_identities: for every identity of the corpus and
// the random ones, a Pod create carrying the module's record of its own
// submitter skips the twin; a changed byte, an empty value, another
// user's record, no record, or an UPDATE calls it. Identities CEL does
// not encode exactly always call it, and the condition never fails.
func TestTwinCondition_identities(t *testing.T) {
	ctx := context.Background()
	m := newModule(ctx, t)
	match := twinMatcher(t, []byte(`{}`))
	other := goValue(t, "mallory", []string{"system:masters"})
	refused := []identity{
		{"invalid UTF-8 user", "al\xffice", []string{"dev"}},
		{"invalid UTF-8 group", "alice", []string{"ok", "b\xc3"}},
		{"user too long", strings.Repeat("u", cel.MaxIdentityChars+1), nil},
		{"too many groups", "bob", make([]string, cel.MaxGroups+1)},
	}
	// The worst identities within the bounds (TestCost): the condition
	// stays within the API server's cost limits and skips.
	encodable := append(append(corpus(), randomIdentities(200)...),
		identity{"worst long username", worst(cel.MaxIdentityChars), nil},
		identity{"worst most groups", worst(4096), manyGroups()})
	skipped := 0
	for i, id := range append(encodable, refused...) {
		encodable := i < len(encodable)
		name := id.name
		if name == "" {
			name = "random"
		}
		t.Run(name, func(t *testing.T) {
			r, modReq := podCreate(id)
			with := func(val *string) map[string]any {
				o := runtime.DeepCopyJSON(r.object)
				if val != nil {
					require.NoError(t, unstructured.SetNestedField(o, *val, "metadata", "annotations", cel.AnnotationKey))
				}
				return o
			}
			v := m.validate(ctx, t, modReq, []byte(`{}`))
			require.True(t, v.accepted, v.message)
			own := annotationOf(t, v.object)
			if encodable && id.user != "" {
				require.Equal(t, goValue(t, id.user, id.groups), own)
				assert.False(t, calls(ctx, t, match, r, with(&own)), "the submitter's own record calls the twin")
				skipped++
			} else {
				assert.True(t, calls(ctx, t, match, r, with(&own)), "a record CEL does not encode skips the twin")
			}
			if own != "" {
				changed := own[:len(own)-1] + " }"
				assert.True(t, calls(ctx, t, match, r, with(&changed)), "a changed record skips the twin")
			}
			empty := ""
			assert.True(t, calls(ctx, t, match, r, with(&empty)), "an empty value skips the twin")
			assert.True(t, calls(ctx, t, match, r, with(&other)), "another user's record skips the twin")
			assert.True(t, calls(ctx, t, match, r, with(nil)), "no record skips the twin")
			upd := r
			upd.op = admission.Update
			upd.oldObject = with(&own)
			assert.True(t, calls(ctx, t, match, upd, with(&own)), "an UPDATE skips the twin")
		})
	}
	require.Greater(t, skipped, 200)
}

// sized is a canonical record of exactly n bytes, every character of
// its user escaped (the costliest to match).
func sized(t testing.TB, n int) string {
	t.Helper()
	v := goValue(t, strings.Repeat("\x01", (n-11)/6), nil)
	v = v[:len(v)-2] + strings.Repeat("a", n-len(v)) + `"}`
	require.Len(t, v, n)
	return v
}

// TestTwinCondition_trustedSubmitters: a Pod a trusted controller creates
// from a template (the defaults' systemUsers) or an allowed front end
// submits carries another user's record; the API server skips the twin
// for it when the value is in the form encoding/json writes, and calls it
// for any other value, for an untrusted submitter, or with
// trustControllers off. Whenever it skips, the twin admits.
func TestTwinCondition_trustedSubmitters(t *testing.T) {
	ctx := context.Background()
	m := newModule(ctx, t)
	alice := goValue(t, "alice", []string{"dev", "system:authenticated"})
	rs := identity{user: "system:serviceaccount:kube-system:replicaset-controller",
		groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	livy := identity{user: "livy", groups: []string{"front-ends", "system:authenticated"}}
	bob := identity{user: "bob", groups: []string{"dev"}}
	for _, tc := range []struct {
		name     string
		settings string
		id       identity
		value    string
		skips    bool
	}{
		{"controller, canonical", `{}`, rs, alice, true},
		{"controller, worst canonical", `{}`, rs, goValue(t, "a\"<\u2028", []string{"\x01&"}), true},
		// The condition's bound on a supplied value is 32 KiB: one at it
		// skips, one past it calls the twin, and neither fails, nor does
		// a value twice as long (the API server's cost limit is past that).
		{"controller, a value at the bound", `{}`, rs, sized(t, 32<<10), true},
		{"controller, a value past the bound", `{}`, rs, sized(t, 32<<10+1), false},
		{"controller, a value of 64 KiB", `{}`, rs, sized(t, 64<<10), false},
		{"controller, a value of 240 KiB", `{}`, rs, sized(t, 240<<10), false},
		{"controller with the most groups", `{}`, identity{user: rs.user, groups: manyGroups()}, alice, true},
		{"controller, spaced", `{}`, rs, `{"user": "alice"}`, false},
		{"controller, groups first", `{}`, rs, `{"groups":["dev"],"user":"alice"}`, false},
		{"controller, not JSON", `{}`, rs, `alice`, false},
		{"controller, trustControllers off", `{"trustControllers":false}`, rs, alice, false},
		{"external user", `{"externalUsers":["^livy$"]}`, livy, alice, true},
		{"external group", `{"externalGroups":["^front-ends$"]}`, livy, alice, true},
		{"untrusted", `{"externalUsers":["^livy$"]}`, bob, alice, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			match := twinMatcher(t, []byte(tc.settings))
			r, _ := podCreate(tc.id)
			require.NoError(t, unstructured.SetNestedField(r.object, tc.value, "metadata", "annotations", cel.AnnotationKey))
			skipped := !calls(ctx, t, match, r, r.object)
			assert.Equal(t, tc.skips, skipped, "skipped")
			if skipped {
				v := m.validate(ctx, t, r.moduleRequest(), withValidateOnly(t, []byte(tc.settings)))
				assert.True(t, v.accepted, "skipped, but the twin refuses: %s", v.message)
			}
		})
	}
}

// withValidateOnly is settings with validateOnly set, as the twin runs.
func withValidateOnly(t testing.TB, settings []byte) []byte {
	t.Helper()
	s := map[string]any{}
	require.NoError(t, json.Unmarshal(settings, &s))
	s["validateOnly"] = true
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return b
}

func decode(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var o map[string]any
	require.NoError(t, json.Unmarshal(b, &o))
	return o
}

// annotationOf reads the record from an object's JSON ("" when none).
func annotationOf(t testing.TB, obj []byte) string {
	t.Helper()
	return gjson.GetBytes(obj, "metadata.annotations."+gjson.Escape(cel.AnnotationKey)).String()
}
