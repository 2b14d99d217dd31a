package userinfo

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shimUGI has the shape of the user and groups YuniKorn's admission
// controller marshals into the annotation (both fields omitempty).
type shimUGI struct {
	User   string   `json:"user,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// Every problem, with the message the policy's denials show.
func TestCheck(t *testing.T) {
	for value, want := range map[string]struct {
		p   Problem
		msg string
	}{
		"{\"user\":\"a\xff\"}": {NotUTF8, "value is not valid UTF-8"},
		`{"user":"a","groups":[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]}`: {TooDeep, "value nests deeper than 16 levels (a user.info value is an object with a list of groups)"},
		``:                                     {NotJSON, "value is not valid JSON"},
		`{"user":"a"} x`:                       {NotJSON, "value is not valid JSON"},
		`["alice"]`:                            {NotObject, `value must be a JSON object like {"user":"alice","groups":["dev"]}, got array`},
		`null`:                                 {NotObject, `value must be a JSON object like {"user":"alice","groups":["dev"]}, got null`},
		`{"user":"a","\u0075ser":"root"}`:      {DuplicateKey, `duplicate key "user"`},
		`{"user":"a","groups":[],"groups":[]}`: {DuplicateKey, `duplicate key "groups"`},
		`{"user":"a","USER":"root"}`:           {CaseVariantKey, `key "USER" must be written in lower case: keys are case-sensitive here, but YuniKorn would read it as "user"`},
		`{"uſer":"root"}`:                      {CaseVariantKey, `key "uſer" must be written in lower case: keys are case-sensitive here, but YuniKorn would read it as "user"`},
		`{"user":"a","Groups":[]}`:             {CaseVariantKey, `key "Groups" must be written in lower case: keys are case-sensitive here, but YuniKorn would read it as "groups"`},
		`{"user":"a","extra\u0001":1}`:         {UnknownKey, `unknown key "extra\u0001" (only "user" and "groups" are allowed)`},
		`{"groups":["dev"]}`:                   {MissingUser, `key "user" is required`},
		`{"user":7}`:                           {UserNotString, `"user" must be a string, got number`},
		`{"user":""}`:                          {EmptyUser, `"user" must not be empty`},
		`{"user":"a","groups":{}}`:             {GroupsNotArray, `"groups" must be an array of strings, got object`},
		`{"user":"a","groups":["dev",true]}`:   {GroupNotString, `"groups"[1] must be a string, got boolean`},
	} {
		err := Check(value)
		require.NotNil(t, err, "%q", value)
		assert.Equal(t, want.p, err.Problem, "%q", value)
		assert.Equal(t, want.msg, err.Error(), "%q", value)
	}
	err := Check(`{"user":"a","groups":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}`)
	require.NotNil(t, err)
	assert.Equal(t, 31, err.Depth)
	assert.Nil(t, Check(`{"groups":[],"user":"a"}`))
}

// Parse decodes strings as encoding/json does, escapes and all.
func TestParse(t *testing.T) {
	for _, value := range []string{
		`{"user":"alice","groups":["dev","system:authenticated"]}`,
		`{"groups":[],"user":"b\u00e9"}`,
		`{"\u0075ser":"\ud800x","groups":["a\"b","\u003c"]}`,
		`{"user":"a","groups":["dev","dev"]}`,
	} {
		id, err := Parse(value)
		require.NoError(t, err, value)
		var want shimUGI
		require.NoError(t, json.Unmarshal([]byte(value), &want))
		assert.True(t, id.Equal(Identity(want)), "%s: %+v", value, id)
	}
	_, err := Parse(`{"user":"a","USER":"root"}`)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, CaseVariantKey, e.Problem)
}

// Value is what encoding/json writes for the shim's struct, and Parse
// reads it back.
func TestValue(t *testing.T) {
	for _, id := range []Identity{
		{}, {User: "alice"}, {Groups: []string{"dev"}}, {User: "a", Groups: []string{}},
		{User: "a<b>&\u2028\x01\"\\", Groups: []string{"dev", "dev", "\xff", "é"}},
	} {
		want, err := json.Marshal(shimUGI(id))
		require.NoError(t, err)
		assert.Equal(t, string(want), id.Value(), "%+v", id)
		if got, err := json.Marshal(id); assert.NoError(t, err) {
			assert.Equal(t, string(want), string(got), "Identity marshals as the value")
		}
	}
}

func FuzzValue(f *testing.F) {
	f.Add("alice", "dev", "ops")
	f.Add("", "<x>", "\xff\u2029")
	f.Fuzz(func(t *testing.T, user, g1, g2 string) {
		id := Identity{User: user, Groups: []string{g1, g2}}
		want, err := json.Marshal(shimUGI(id))
		require.NoError(t, err)
		assert.Equal(t, string(want), id.Value())
		if user == "" {
			return
		}
		back, err := Parse(id.Value())
		require.NoError(t, err)
		var dec shimUGI
		require.NoError(t, json.Unmarshal(want, &dec))
		assert.Equal(t, Identity(dec), back)
	})
}

func TestOfRecord(t *testing.T) {
	for _, tc := range []struct {
		value    string
		hasValue bool
		label    string
		user     string
		groups   []string
	}{
		{`{"user":"alice","groups":["dev","ops"]}`, true, "bob", "alice", []string{"dev", "ops"}},
		{`{"groups":["dev"]}`, true, "bob", "nobody", []string{"dev"}},
		{`{`, true, "bob", "nobody", nil},
		{``, true, "bob", "bob", nil},
		{``, false, "bob", "bob", nil},
		{``, false, "", "nobody", nil},
	} {
		user, groups := OfRecord(tc.value, tc.hasValue, tc.label)
		assert.Equal(t, tc.user, user, tc.value)
		assert.Equal(t, tc.groups, groups, tc.value)
	}
}
