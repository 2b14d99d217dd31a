package audit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The values YuniKorn could read as another user than they seem to name,
// or not at all, are refused with what is wrong; well-formed ones parse.
func TestParseUserInfo(t *testing.T) {
	for value, want := range map[string]string{
		``:                                     "not valid JSON",
		`{"user":"a"`:                          "not valid JSON",
		"{\"user\":\"a\xff\"}":                 "not valid UTF-8",
		`"alice"`:                              "must be a JSON object",
		`["alice"]`:                            "must be a JSON object",
		`null`:                                 "must be a JSON object",
		`{}`:                                   `key "user" is required`,
		`{"groups":["dev"]}`:                   `key "user" is required`,
		`{"user":""}`:                          `"user" must not be empty`,
		`{"user":7}`:                           `"user" must be a string, got number`,
		`{"user":null}`:                        `"user" must be a string, got null`,
		`{"user":"a","user":"root"}`:           `duplicate key "user"`,
		`{"user":"a","groups":[],"groups":[]}`: `duplicate key "groups"`,
		`{"User":"root"}`:                      `key "User" must be written in lower case`,
		`{"uſer":"root"}`:                      `must be written in lower case: YuniKorn would read it as "user"`,
		`{"user":"a","GROUPS":["x"]}`:          `YuniKorn would read it as "groups"`,
		`{"user":"a","extra":1}`:               `unknown key "extra"`,
		`{"user":"a","groups":"dev"}`:          `"groups" must be an array of strings, got string`,
		`{"user":"a","groups":["dev",1]}`:      `"groups"[1] must be a string, got number`,
		`{"user":"a","groups":[` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `]}`: "nests 22 levels deep",
	} {
		_, err := ParseUserInfo(value)
		require.Error(t, err, "%s", value)
		assert.Contains(t, err.Error(), want, "%s", value)
	}
	id, err := ParseUserInfo(`{"user":"alice","groups":["dev","system:authenticated"]}`)
	require.NoError(t, err)
	assert.Equal(t, Identity{User: "alice", Groups: []string{"dev", "system:authenticated"}}, id)
	id, err = ParseUserInfo(`{"groups":[],"user":"b\u00e9"}`)
	require.NoError(t, err)
	assert.Equal(t, "bé", id.User)
	assert.True(t, id.Equal(Identity{User: "bé"}))
	assert.False(t, id.Equal(Identity{User: "bé", Groups: []string{"x"}}))
}

// The shim's order of ID sources, and its generated IDs.
func TestAppID(t *testing.T) {
	l := map[string]string{"yunikorn.apache.org/app-id": "a", "applicationId": "b", "spark-app-selector": "c"}
	ann := map[string]string{"yunikorn.apache.org/app-id": "d"}
	assert.Equal(t, "a", AppID("ns", "", l, ann, false))
	delete(l, "yunikorn.apache.org/app-id")
	assert.Equal(t, "d", AppID("ns", "", l, ann, false))
	assert.Equal(t, "b", AppID("ns", "", l, nil, false))
	delete(l, "applicationId")
	assert.Equal(t, "c", AppID("ns", "", l, nil, false))
	assert.Equal(t, "", AppID("ns", "", map[string]string{"applicationId": "x-uniqueautogen"}, nil, false))
	assert.Equal(t, "yunikorn-ns-autogen", AppID("ns", "", nil, nil, false))
	assert.Equal(t, "yunikorn-default-autogen", AppID("", "", nil, nil, false))
	assert.Equal(t, "", AppID("ns", "", nil, nil, true))
	long := strings.Repeat("n", 60)
	assert.Equal(t, ("yunikorn-" + long + "-autogen")[:63], AppID(long, "", nil, nil, false))
	// With its uid, a Pod's own application is the ID the shim resolves:
	// another Pod labelled with it joins it.
	const uid = "3f2a9c1e-5b7d-4e21-a8c3-6d9f0b2e4a17"
	assert.Equal(t, "x-"+uid, AppID("ns", uid, map[string]string{"applicationId": "x-uniqueautogen"}, nil, false))
	assert.Equal(t, "ns-"+uid, AppID("ns", uid, nil, nil, true))
}
