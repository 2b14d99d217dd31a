package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// TestValidateSettings_fixtures runs testdata/settings.json natively.
func TestValidateSettings_fixtures(t *testing.T) {
	cases, err := fixtures.LoadSettings()
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			out, err := validateSettings(tc.Document())
			require.NoError(t, err)
			var got struct {
				Valid   bool   `json:"valid"`
				Message string `json:"message"`
			}
			require.NoError(t, json.Unmarshal(out, &got), "%s", out)
			assert.Equal(t, tc.Valid, got.Valid)
			assert.Equal(t, tc.Message, got.Message)
		})
	}
}

func TestParseSettings_defaults(t *testing.T) {
	t.Parallel()
	s, err := parseSettings(gjson.Parse(`{}`))
	require.NoError(t, err)
	assert.False(t, s.BypassAuth)
	assert.True(t, s.TrustControllers)
	assert.Equal(t, DefaultUserLabelKey, s.UserLabelKey)
	assert.Empty(t, s.ExternalUsers)
	assert.Empty(t, s.ExternalGroups)
	var patterns []string
	for _, re := range s.SystemUsers {
		patterns = append(patterns, re.String())
	}
	assert.Equal(t, defaultSystemUsers, patterns)
	assert.True(t, matchAny(s.SystemUsers, "system:serviceaccount:kube-system:replicaset-controller"))
	assert.True(t, matchAny(s.SystemUsers, "system:kube-controller-manager"))
	assert.False(t, matchAny(s.SystemUsers, "system:kube-controller-manager-evil"))
	assert.False(t, matchAny(s.SystemUsers, "alice"))
}

func TestParseSettings_lists(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		settings string
		want     []string
	}{
		{name: "comma string trimmed", settings: `{"externalUsers":" a , b"}`, want: []string{"a", "b"}},
		{name: "empty string is an empty list", settings: `{"externalUsers":""}`, want: nil},
		{name: "blank string is an empty list", settings: `{"externalUsers":"  "}`, want: nil},
		{name: "array kept as given", settings: `{"externalUsers":[" a ","b,c"]}`, want: []string{" a ", "b,c"}},
		{name: "empty array", settings: `{"externalUsers":[]}`, want: nil},
		{name: "repetition survives the split", settings: `{"externalUsers":"^svc-[a-z]{1,8}$,^bob$"}`,
			want: []string{"^svc-[a-z]{1,8}$", "^bob$"}},
		{name: "class, group and escape survive the split", settings: `{"externalGroups":"^[,a]$, ^(x,y)$ ,^a\\,b$"}`,
			want: []string{"^[,a]$", "^(x,y)$", `^a\,b$`}},
		{name: "class with a leading bracket", settings: `{"externalUsers":"^[]a,]$,^b$"}`, want: []string{"^[]a,]$", "^b$"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := parseSettings(gjson.Parse(tc.settings))
			require.NoError(t, err)
			var got []string
			for _, re := range append(s.ExternalUsers, s.ExternalGroups...) {
				got = append(got, re.String())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// Nothing matches everyone by accident: an empty entry, in either form, is
// an error naming it, and a {m,n} repetition is never split.
func TestParseSettings_emptyEntries(t *testing.T) {
	t.Parallel()
	tests := []struct{ settings, want string }{
		{`{"externalUsers":[""]}`, `settings.externalUsers[0]: empty pattern: it would match every name`},
		{`{"systemUsers":["^a$","  "]}`, `settings.systemUsers[1]: empty pattern: it would match every name`},
		{`{"externalGroups":[""]}`, `settings.externalGroups[0]: empty pattern`},
		{`{"externalUsers":"^a$,"}`, `settings.externalUsers[1]: empty pattern (between commas): it would match every name`},
		{`{"externalUsers":"^a$, ,^b$"}`, `settings.externalUsers[1]: empty pattern (between commas)`},
		{`{"externalUsers":",^a$"}`, `settings.externalUsers[0]: empty pattern (between commas)`},
		{`{"externalUsers":["^livy$,"]}`, `settings.externalUsers[0]: pattern "^livy$," is a comma-separated list in one array entry: ` +
			`as one pattern it matches only names with a comma; write each pattern as its own entry: ["^livy$"]`},
		{`{"systemUsers":["^a$", "^b$, ^c$"]}`, `settings.systemUsers[1]: pattern "^b$, ^c$" is a comma-separated list in one array entry`},
		{`{"externalGroups":[",^dev$"]}`, `settings.externalGroups[0]: pattern ",^dev$" is a comma-separated list`},
		{`{"externalUsers":"^svc-[a-z]{1,8$"}`, `settings.externalUsers: cannot split "^svc-[a-z]{1,8$" into patterns: a bracket, brace or parenthesis is not closed`},
	}
	for _, tc := range tests {
		_, err := parseSettings(gjson.Parse(tc.settings))
		require.Error(t, err, tc.settings)
		assert.Contains(t, err.Error(), tc.want, tc.settings)
	}
	// The pattern that the naive split turned into "^svc-[a-z]{1" and "8}$",
	// the second of which matched "mallory8}".
	// A comma inside one pattern is kept: a distinguished name, a class,
	// a repetition.
	s, err := parseSettings(gjson.Parse(`{"externalUsers":["^CN=livy,OU=svc$", "^[,a]$", "^a{1,2}$", "b,c"]}`))
	require.NoError(t, err)
	assert.True(t, matchAny(s.ExternalUsers, "CN=livy,OU=svc"))
	s, err = parseSettings(gjson.Parse(`{"externalUsers":"^svc-[a-z]{1,8}$"}`))
	require.NoError(t, err)
	assert.False(t, matchAny(s.ExternalUsers, "mallory8}"))
	assert.True(t, matchAny(s.ExternalUsers, "svc-build"))
}

func TestValidateSettings_warnings(t *testing.T) {
	t.Parallel()
	tests := []struct{ settings, want string }{
		{`{"externalGroups":"dev"}`, `settings.externalGroups[0]: pattern "dev" is not anchored with ^ or $, so it matches every name that contains a match anywhere`},
		{`{"externalUsers":["a\\$"]}`, `settings.externalUsers[0]: pattern "a\\$" is not anchored`},
		{`{"externalUsers":["a*"]}`, `settings.externalUsers[0]: pattern "a*" matches the empty string, so it may match every name`},
		{`{"systemUsers":["^$"]}`, `settings.systemUsers[0]: pattern "^$" matches the empty string`},
	}
	for _, tc := range tests {
		out, err := validateSettings([]byte(tc.settings))
		require.NoError(t, err)
		var got struct {
			Valid   bool   `json:"valid"`
			Message string `json:"message"`
		}
		require.NoError(t, json.Unmarshal(out, &got))
		assert.True(t, got.Valid, tc.settings)
		assert.Contains(t, got.Message, "warning: "+tc.want, tc.settings)
	}
	// Anchored at both ends, or at one: an exact, a prefix or a suffix
	// match, each meaning what it says; and the defaults.
	for _, quiet := range []string{`{"externalUsers":["^alice$","\\Abob\\z"]}`, `{"systemUsers":["^system:"],"externalUsers":["^a\\$","-bot$"]}`, `{}`} {
		out, err := validateSettings([]byte(quiet))
		require.NoError(t, err)
		assert.JSONEq(t, `{"valid":true}`, string(out), quiet)
	}
}

// A cached parse must never serve one settings object's result for another.
func TestCachedSettings_keyedByContent(t *testing.T) {
	a, err := cachedSettings(gjson.Parse(`{"bypassAuth":true}`))
	require.NoError(t, err)
	b, err := cachedSettings(gjson.Parse(`{"bypassAuth":false}`))
	require.NoError(t, err)
	_, err = cachedSettings(gjson.Parse(`{"bypassAuth":"x"}`))
	require.Error(t, err)
	c, err := cachedSettings(gjson.Parse(`{"bypassAuth":true}`))
	require.NoError(t, err)
	assert.True(t, a.BypassAuth)
	assert.False(t, b.BypassAuth)
	assert.True(t, c.BypassAuth)
}

// The payload is read without copying, so the settings cache must keep its
// own copy of the key: a caller reusing its buffer for different settings
// of the same length must not get the old, cached settings.
func TestCachedSettings_ownsItsKey(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtures.Dir(), "base", "pod.json"))
	require.NoError(t, err)
	buf := []byte(`{"settings":{"bypassAuth":true },"request":` + string(raw) + `}`)
	out, err := validate(buf)
	require.NoError(t, err)
	require.Contains(t, string(out), `"accepted":true`)

	copy(buf, `{"settings":{"bypassAuth":12345}`) // same length, now invalid
	out, err = validate(buf)
	require.NoError(t, err)
	assert.Contains(t, string(out), `settings are not valid: settings.bypassAuth: must be a boolean, got number 12345`)
}

// The Wasm entry point reads every call's payload into one reused buffer,
// and parsed settings hold views of the text they were parsed from: the
// cache must parse its own copy, or the next call overwrites the cached
// settings under the policy's feet.
func TestCachedSettings_ownsItsValues(t *testing.T) {
	buf := []byte(`{"userLabelKey":"owner.example.com/user","bypassAuth":true}`)
	s, err := cachedSettings(gjson.Parse(unsafe.String(unsafe.SliceData(buf), len(buf))))
	require.NoError(t, err)
	for i := range buf {
		buf[i] = 'x'
	}
	assert.Equal(t, "owner.example.com/user", s.UserLabelKey)
	again, err := cachedSettings(gjson.Parse(`{"userLabelKey":"owner.example.com/user","bypassAuth":true}`))
	require.NoError(t, err)
	assert.Same(t, s, again, "the same settings text is a cache hit")
}
