package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// withHost makes f answer the policy's host calls for the rest of the test.
func withHost(t *testing.T, f func(binding, namespace, operation string, payload []byte) ([]byte, error)) {
	prev := hostCaller
	hostCaller = f
	t.Cleanup(func() { hostCaller = prev })
}

const rbacRequest = `{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"spark",` +
	`"userInfo":{"username":"livy","groups":["g1","g\"2"]},` +
	`"object":{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"carol\"}"}}}}`

func decideRBAC(t *testing.T, settings string) decision {
	t.Helper()
	s, err := parseSettings(gjson.Parse(settings))
	require.NoError(t, err)
	return decide(gjson.Parse(rbacRequest), s)
}

// TestCanI_payload: the review is written in policy-server's shape, with
// the submitter, its groups, the request's namespace and the claimed user.
func TestCanI_payload(t *testing.T) {
	var got []byte
	withHost(t, func(binding, namespace, operation string, payload []byte) ([]byte, error) {
		assert.Equal(t, []string{"kubewarden", "kubernetes", "can_i"}, []string{binding, namespace, operation})
		got = append([]byte(nil), payload...)
		return []byte(`{"allowed":true}`), nil
	})
	d := decideRBAC(t, `{"trustRBAC":true}`)
	assert.True(t, d.accepted, d.message)
	assert.Equal(t, "create: present, granted by RBAC", d.rule)
	assert.JSONEq(t, `{"subject_access_review":{"groups":["g1","g\"2"],"resource_attributes":{"group":"yunikorn.apache.org",`+
		`"name":"carol","namespace":"spark","resource":"userinfos","verb":"set"},"user":"livy"},"disable_cache":false}`, string(got))
}

// TestCanI_failures: whatever goes wrong with the review, the trust is
// denied, and the message says why.
func TestCanI_failures(t *testing.T) {
	const prefix = `user livy with groups [g1,g"2] is not allowed to set user annotation: `
	const access = `verb "set" on userinfos.yunikorn.apache.org "carol" in namespace "spark"`
	for _, tc := range []struct {
		name   string
		answer string
		err    error
		noHost bool
		want   string
	}{
		{name: "no host", noHost: true, want: prefix + "the RBAC check for " + access + " could not be made: no host answers capability calls"},
		{name: "host error", err: errors.New("kube::Client was not initialized properly"),
			want: prefix + "the RBAC check for " + access + " could not be made: kube::Client was not initialized properly"},
		{name: "host error without a message", err: hostCallError(nil),
			want: prefix + "the RBAC check for " + access + " could not be made: the host failed the call without a message"},
		{name: "not JSON", answer: `allowed`, want: prefix + "the RBAC check for " + access + " could not be made: the can_i answer is invalid: not JSON"},
		{name: "not an object", answer: `[true]`, want: prefix + "the RBAC check for " + access + " could not be made: the can_i answer is invalid: not an object"},
		{name: "allowed as a string", answer: `{"allowed":"true"}`,
			want: prefix + "the RBAC check for " + access + " could not be made: the can_i answer is invalid: allowed is not a boolean"},
		{name: "denied", answer: `{"allowed":false}`, want: prefix + "RBAC does not grant " + access},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.noHost {
				withHost(t, nil)
			} else {
				withHost(t, func(_, _, _ string, _ []byte) ([]byte, error) {
					if tc.err != nil {
						return nil, tc.err
					}
					return []byte(tc.answer), nil
				})
			}
			d := decideRBAC(t, `{"trustRBAC":true}`)
			assert.False(t, d.accepted)
			assert.Equal(t, codeForbidden, d.code)
			assert.Equal(t, tc.want, d.message)
		})
	}
}

// TestCanI_noGroupsAndNoNamespace: no groups are sent as null and a
// request without a namespace asks about all namespaces (""), which only a
// cluster-wide grant allows.
func TestCanI_noGroupsAndNoNamespace(t *testing.T) {
	var got []byte
	withHost(t, func(_, _, _ string, payload []byte) ([]byte, error) {
		got = append([]byte(nil), payload...)
		return []byte(`{"allowed":false,"reason":"nope"}`), nil
	})
	s, err := parseSettings(gjson.Parse(`{"trustRBAC":{"verb":"impersonate","group":"","resource":"users"}}`))
	require.NoError(t, err)
	req := `{"kind":{"group":"","kind":"Pod"},"operation":"CREATE","userInfo":{"username":"x"},` +
		`"object":{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"root\"}"}}}}`
	d := decide(gjson.Parse(req), s)
	assert.False(t, d.accepted)
	assert.Equal(t, `user x with groups [] is not allowed to set user annotation: RBAC does not grant verb "impersonate" on users "root" in namespace "" (nope)`, d.message)
	assert.JSONEq(t, `{"subject_access_review":{"groups":null,"resource_attributes":{"group":"","name":"root","namespace":"",`+
		`"resource":"users","verb":"impersonate"},"user":"x"},"disable_cache":false}`, string(got))
}
