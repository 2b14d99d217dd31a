package celtest

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomIdentities are identities drawn from the characters that need
// care: every escape, separators, non-ASCII of each UTF-8 length.
func randomIdentities(n int) []identity {
	alphabet := []rune("ab:-_.@ \"\\<>&\x00\x01\x08\x09\x0a\x0c\x0d\x1f\x7f\u00e9\u2028\u2029\ufffd\u65e5\U0001f642/{}[],")
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	out := make([]identity, n)
	for i := range out {
		out[i].user = "u" + word()
		for range r.IntN(5) {
			out[i].groups = append(out[i].groups, word())
		}
	}
	return out
}

// TestRandomIdentities: random identities over the characters that need
// escaping are recorded as encoding/json writes them.
func TestRandomIdentities(t *testing.T) {
	ctx := context.Background()
	ps, err := compileSet(t, []byte(`{}`))
	require.NoError(t, err)
	for _, id := range randomIdentities(400) {
		r, _ := podCreate(id)
		got := ps.evaluate(ctx, t, r)
		require.True(t, got.allowed, "%q: %s", id.user, got.message)
		value, _ := annotation(got.object, []string{"metadata"})
		require.Equal(t, goValue(t, id.user, id.groups), value, "%q %q", id.user, id.groups)
	}
}

// TestAllowedSubmitter: an allowed submitter may supply any identity in
// the form encoding/json writes (the canonical-value expression accepts
// every value of the corpus and of the random identities); a valid value
// in another spelling is the documented difference: the module accepts
// it, CEL refuses it as invalid.
func TestAllowedSubmitter(t *testing.T) {
	ctx := context.Background()
	m := newModule(ctx, t)
	settings := []byte(`{"externalUsers":["^livy$"]}`)
	ps, err := compileSet(t, settings)
	require.NoError(t, err)
	livy := identity{user: "livy", groups: []string{"frontends"}}
	supply := func(value string) (outcome, verdict) {
		r, _ := podCreate(livy)
		r.object["metadata"].(map[string]any)["annotations"] = map[string]any{"yunikorn.apache.org/user.info": value}
		return ps.evaluate(ctx, t, r), m.validate(ctx, t, r.moduleRequest(), settings)
	}
	for _, id := range append(corpus(), randomIdentities(100)...) {
		if id.user == "" {
			continue // the module requires a user in a supplied value
		}
		value := goValue(t, id.user, id.groups)
		got, want := supply(value)
		require.True(t, want.accepted, "module: %s", want.message)
		require.True(t, got.allowed, "CEL refused %q: %s", value, got.message)
		stored, _ := annotation(got.object, []string{"metadata"})
		assert.Equal(t, value, stored)
	}
	for _, value := range []string{
		`{"user": "alice"}`,
		`{"groups":["dev"],"user":"alice"}`,
		`{"user":"\u0061lice"}`,
		`{"user":"a\/b"}`,
		`{"user":"<"}`,
	} {
		got, want := supply(value)
		assert.True(t, want.accepted, "module refused %q: %s", value, want.message)
		assert.False(t, got.allowed, "CEL admitted %q", value)
		assert.Contains(t, got.message, "accepts a supplied value only in the form encoding/json writes")
	}
	for _, value := range []string{`{"user":""}`, `{"USER":"root"}`, `{"user":"a","user":"b"}`, `not json`} {
		got, want := supply(value)
		assert.False(t, want.accepted, "module admitted %q", value)
		assert.False(t, got.allowed, "CEL admitted %q", value)
	}
}

// TestValidatingAlone: when the mutating policy did not run (or a later
// webhook undid its work), the validating policies refuse what the module
// would have changed, with the validating twin's messages, and guard
// UPDATE and Bindings on their own.
func TestValidatingAlone(t *testing.T) {
	ctx := context.Background()
	ps, err := compileSet(t, []byte(`{}`))
	require.NoError(t, err)
	ps.mutating = nil
	alice := identity{user: "alice", groups: []string{"dev"}}
	own := goValue(t, alice.user, alice.groups)

	r, _ := podCreate(alice)
	got := ps.evaluate(ctx, t, r)
	assert.False(t, got.allowed)
	assert.Contains(t, got.message, "is missing: it must record the submitter")

	withValue := func(o map[string]any, v string) map[string]any {
		o = deepCopy(o)
		o["metadata"].(map[string]any)["annotations"] = map[string]any{"yunikorn.apache.org/user.info": v}
		return o
	}
	update := r
	update.op = "UPDATE"
	update.oldObject = withValue(r.object, own)
	got = ps.evaluate(ctx, t, update)
	assert.False(t, got.allowed)
	assert.Contains(t, got.message, "was removed: its previous value must be kept")

	update.object = withValue(r.object, `{"user":"bob"}`)
	got = ps.evaluate(ctx, t, update)
	assert.False(t, got.allowed)
	assert.Equal(t, "user info annotation change is not allowed", got.message)

	update.object = withValue(r.object, own)
	got = ps.evaluate(ctx, t, update)
	assert.True(t, got.allowed, got.message)
}
