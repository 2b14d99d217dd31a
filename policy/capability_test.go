package main

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// freshInstance forgets what earlier tests left in the caches a guest
// instance keeps across evaluations (the followed rules and the queue
// configuration's resourceVersions), now and when the test ends. Those
// caches are per instance: a test that counts host calls or swaps the
// cluster behind hostCaller starts as a new instance would, whatever order
// the parallel fixture runs before it finished in.
func freshInstance(t *testing.T) {
	t.Helper()
	forget := func() {
		followCache.Lock()
		followCache.base, followCache.version, followCache.eff, followCache.warnings, followCache.good = nil, "", nil, nil, nil
		followCache.Unlock()
		lastQueuesMu.Lock()
		queuesVersion, versionCfg, versionErr = "", nil, nil
		lastQueuesMu.Unlock()
	}
	forget()
	t.Cleanup(forget)
}

// withHost makes f answer the policy's host calls for the rest of the
// test, to an instance that has read nothing yet.
func withHost(t *testing.T, f func(binding, namespace, operation string, payload []byte) ([]byte, error)) {
	freshInstance(t)
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
// the submitter, its groups, the request's namespace and the claimed user;
// once granted, the three wildcard probes follow, each differing from it in
// one attribute.
func TestCanI_payload(t *testing.T) {
	var got []string
	withHost(t, func(binding, namespace, operation string, payload []byte) ([]byte, error) {
		assert.Equal(t, []string{"kubewarden", "kubernetes", "can_i"}, []string{binding, namespace, operation})
		got = append(got, string(payload))
		return []byte(`{"allowed":` + strconv.FormatBool(len(got) == 1) + `}`), nil
	})
	d := decideRBAC(t, `{"trustRBAC":true}`)
	assert.True(t, d.accepted, d.message)
	assert.Equal(t, "create: present, granted by RBAC", d.rule)
	review := func(verb, group, resource string) string {
		return `{"subject_access_review":{"groups":["g1","g\"2"],"resource_attributes":{"group":"` + group + `",` +
			`"name":"carol","namespace":"spark","resource":"` + resource + `","verb":"` + verb + `"},"user":"livy"},"disable_cache":false}`
	}
	want := []string{
		review("set", "yunikorn.apache.org", "userinfos"),
		review(probeVerb, "yunikorn.apache.org", "userinfos"),
		review("set", "yunikorn.apache.org", probeResource),
		review("set", probeGroup, "userinfos"),
	}
	require.Len(t, got, len(want))
	for i := range want {
		assert.JSONEq(t, want[i], got[i], "review %d", i)
	}
}

// rbacHost answers the reviews of a claim from granted, the accesses
// (verb group resource name) allowed; every other review is denied. It
// returns the accesses asked, in order.
func rbacHost(t *testing.T, granted ...string) *[]string {
	var asked []string
	withHost(t, func(_, _, _ string, payload []byte) ([]byte, error) {
		ra := gjson.GetBytes(payload, "subject_access_review.resource_attributes")
		a := ra.Get("verb").String() + " " + ra.Get("group").String() + " " + ra.Get("resource").String() + " " + ra.Get("name").String()
		asked = append(asked, a)
		if slices.Contains(granted, a) {
			return []byte(`{"allowed":true,"reason":"granted to ` + a + `"}`), nil
		}
		return []byte(`{"allowed":false}`), nil
	})
	return &asked
}

// TestRBAC_wildcardProbes: a grant that also grants one probe is a
// wildcard, refused unless the settings accept wildcard grants, in which
// case no probe is asked.
func TestRBAC_wildcardProbes(t *testing.T) {
	const real = "set yunikorn.apache.org userinfos carol"
	for _, tc := range []struct{ name, probe, says string }{
		{"verb", probeVerb + " yunikorn.apache.org userinfos carol", `verb "` + probeVerb + `" on userinfos.yunikorn.apache.org "carol"`},
		{"resource", "set yunikorn.apache.org " + probeResource + " carol", `verb "set" on ` + probeResource + `.yunikorn.apache.org "carol"`},
		{"group", "set " + probeGroup + " userinfos carol", `verb "set" on userinfos.` + probeGroup + ` "carol"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := rbacHost(t, real, tc.probe)
			d := decideRBAC(t, `{"trustRBAC":true}`)
			assert.False(t, d.accepted)
			assert.Equal(t, codeForbidden, d.code)
			assert.Equal(t, "create: present, RBAC grant is a wildcard", d.rule)
			assert.Contains(t, d.message, `: RBAC grants verb "set" on userinfos.yunikorn.apache.org "carol" in namespace "spark" through a wildcard: `+
				"it also grants "+tc.says+", which no rule names (granted to "+tc.probe+"); ")
			assert.Contains(t, d.message, `grant verb "set" on resource "userinfos" in API group "yunikorn.apache.org" by name, or set trustRBAC.acceptWildcardGrants`)
			assert.Equal(t, tc.probe, (*asked)[len(*asked)-1], "the probes stop at the first granted")

			asked = rbacHost(t, real, tc.probe)
			d = decideRBAC(t, `{"trustRBAC":{"acceptWildcardGrants":true}}`)
			assert.True(t, d.accepted, d.message)
			assert.Equal(t, []string{real}, *asked, "no probe when wildcard grants count")
		})
	}
}

// TestRBAC_groups: each claimed group is reviewed, with its probes, on the
// groups resource; the first not granted refuses the claim, and a claim
// with more groups than maxGroups is refused before any review.
func TestRBAC_groups(t *testing.T) {
	request := func(value string) gjson.Result {
		return gjson.Parse(strings.Replace(rbacRequest, `{\"user\":\"carol\"}`, value, 1))
	}
	s, err := parseSettings(gjson.Parse(`{"trustRBAC":{"maxGroups":2}}`))
	require.NoError(t, err)

	asked := rbacHost(t, "set yunikorn.apache.org userinfos carol", "set yunikorn.apache.org usergroups analysts")
	d := decide(request(`{\"user\":\"carol\",\"groups\":[\"analysts\",\"admins\"]}`), s)
	assert.False(t, d.accepted)
	assert.Equal(t, "create: present, group not granted by RBAC", d.rule)
	assert.Equal(t, `user livy with groups [g1,g"2] is not allowed to set user annotation: RBAC does not grant verb "set" on usergroups.yunikorn.apache.org "admins" in namespace "spark"`+livyRecord, d.message)
	assert.Equal(t, []string{"set yunikorn.apache.org userinfos carol", probeVerb + " yunikorn.apache.org userinfos carol",
		"set yunikorn.apache.org " + probeResource + " carol", "set " + probeGroup + " userinfos carol",
		"set yunikorn.apache.org usergroups analysts", probeVerb + " yunikorn.apache.org usergroups analysts",
		"set yunikorn.apache.org " + probeResource + " analysts", "set " + probeGroup + " usergroups analysts",
		"set yunikorn.apache.org usergroups admins"}, *asked)

	asked = rbacHost(t, "set yunikorn.apache.org userinfos carol", "set yunikorn.apache.org usergroups analysts", "set yunikorn.apache.org usergroups admins")
	d = decide(request(`{\"user\":\"carol\",\"groups\":[\"analysts\",\"admins\"]}`), s)
	assert.True(t, d.accepted, d.message)
	assert.Len(t, *asked, 12, "a review and three probes for the user and each group")

	asked = rbacHost(t)
	d = decide(request(`{\"user\":\"carol\",\"groups\":[\"a\",\"b\",\"c\"]}`), s)
	assert.False(t, d.accepted)
	assert.Equal(t, "create: present, too many groups for RBAC", d.rule)
	assert.Equal(t, `user livy with groups [g1,g"2] is not allowed to set user annotation: the value claims 3 groups, and trustRBAC reviews at most 2 (settings trustRBAC.maxGroups)`+livyRecord, d.message)
	assert.Empty(t, *asked)
}

// TestRBAC_probeFails: a probe that cannot be asked denies the trust, as
// the review itself does.
func TestRBAC_probeFails(t *testing.T) {
	calls := 0
	withHost(t, func(_, _, _ string, _ []byte) ([]byte, error) {
		calls++
		if calls == 1 {
			return []byte(`{"allowed":true}`), nil
		}
		return nil, errors.New("timed out")
	})
	d := decideRBAC(t, `{"trustRBAC":true}`)
	assert.False(t, d.accepted)
	assert.Equal(t, `user livy with groups [g1,g"2] is not allowed to set user annotation: the RBAC check for verb "`+probeVerb+
		`" on userinfos.yunikorn.apache.org "carol" in namespace "spark" could not be made: timed out`+livyRecord, d.message)
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
			assert.Equal(t, tc.want+livyRecord, d.message)
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
	assert.Equal(t, `user x with groups [] is not allowed to set user annotation: RBAC does not grant verb "impersonate" on users "root" in namespace "" (nope); the value is not exactly your record; it would be {"user":"x"}`, d.message)
	assert.JSONEq(t, `{"subject_access_review":{"groups":null,"resource_attributes":{"group":"","name":"root","namespace":"",`+
		`"resource":"users","verb":"impersonate"},"user":"x"},"disable_cache":false}`, string(got))
}

// livyRecord ends every refusal of a value livy supplied: the record the
// policy would write for livy.
const livyRecord = `; the value is not exactly your record; it would be {"user":"livy","groups":["g1","g\"2"]}`
