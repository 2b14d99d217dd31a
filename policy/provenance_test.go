package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// stepSettings: a custom kind Step, whose operator creates Steps and Pods
// for Steps.
const stepSettings = `{"workloads":[{"group":"example.com","kind":"Step","paths":["spec.template.metadata.annotations"],` +
	`"operators":["^system:serviceaccount:steps:operator$"]}]}`

// stepPod is a Pod that the Step operator creates, owned by Step name.
func stepPod(name, uid string) string {
	return `{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"e2e",` +
		`"userInfo":{"username":"system:serviceaccount:steps:operator","groups":["system:authenticated"]},` +
		`"object":{"metadata":{"name":"p","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Step","name":"` + name +
		`","uid":"` + uid + `","controller":true}]},"spec":{}}}`
}

func decideWith(t *testing.T, settings, request string) decision {
	t.Helper()
	s, err := parseSettings(gjson.Parse(settings))
	require.NoError(t, err)
	return decide(gjson.Parse(request), s)
}

// TestOwnerProof_unreadable: an owner that cannot be read proves nothing,
// and the operator's object is refused rather than charged to the
// operator; its controller retries.
func TestOwnerProof_unreadable(t *testing.T) {
	withHost(t, func(_, _, operation string, _ []byte) ([]byte, error) {
		require.Equal(t, "get_resource", operation)
		return nil, errors.New("Get \"https://10.0.0.1/apis/example.com/v1\": connect: connection refused")
	})
	d := decideWith(t, stepSettings, stepPod("s0", "uid-0"))
	assert.False(t, d.accepted)
	assert.Equal(t, codeForbidden, d.code)
	assert.Equal(t, "the submitter of this object cannot be proven, and it is not charged to system:serviceaccount:steps:operator, "+
		"which creates it for its owner: owner proof failed: Step e2e/s0 could not be read: "+
		"Get \"https://10.0.0.1/apis/example.com/v1\": connect: connection refused", d.message)
}

// steps answers get_resource with a chain of n Steps, s0 owned by s1 and so
// on, each created a second after its owner; only the top one (s(n-1))
// records alice when recorded is set.
func steps(t *testing.T, n int, recorded bool) *int {
	reads := 0
	withHost(t, func(_, _, _ string, payload []byte) ([]byte, error) {
		reads++
		name := gjson.GetBytes(payload, "name").String()
		var i int
		if _, err := fmt.Sscanf(name, "s%d", &i); err != nil || i >= n {
			return nil, errors.New("Cannot find example.com/v1, Kind=Step " + name)
		}
		owner, ann := "", ""
		if i+1 < n {
			owner = fmt.Sprintf(`,"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Step","name":"s%d","uid":"uid-%d","controller":true}]`, i+1, i+1)
		} else if recorded {
			ann = `,"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"alice\"}"}`
		}
		return fmt.Appendf(nil, `{"metadata":{"name":"%s","uid":"uid-%d","creationTimestamp":"2026-03-02T10:00:%02dZ"%s%s}}`,
			name, i, 59-i, owner, ann), nil
	})
	return &reads
}

// TestOwnerProof_chain: the proof walks up the controller owners while
// they record no one, to at most maxOwnerChain owners.
func TestOwnerProof_chain(t *testing.T) {
	t.Run("top within the bound", func(t *testing.T) {
		reads := steps(t, maxOwnerChain, true)
		d := decideWith(t, stepSettings, stepPod("s0", "uid-0"))
		require.True(t, d.accepted, d.message)
		assert.Equal(t, "create: absent, inherited by owner proof", d.rule)
		assert.Equal(t, maxOwnerChain, *reads)
	})
	t.Run("top beyond the bound", func(t *testing.T) {
		reads := steps(t, maxOwnerChain+1, true)
		d := decideWith(t, stepSettings, stepPod("s0", "uid-0"))
		assert.False(t, d.accepted)
		assert.Contains(t, d.message, "owner proof failed: Step e2e/s0 records no submitter, nor do the owners above it (Step e2e/s1, Step e2e/s2, Step e2e/s3) "+
			"(the owners above are not read: at most 4 are); re-create Step e2e/s3")
		assert.Equal(t, maxOwnerChain, *reads)
	})
	t.Run("nobody records", func(t *testing.T) {
		steps(t, 2, false)
		d := decideWith(t, stepSettings, stepPod("s0", "uid-0"))
		assert.False(t, d.accepted)
		assert.Contains(t, d.message, "owner proof failed: Step e2e/s0 records no submitter, nor do the owners above it (Step e2e/s1); re-create Step e2e/s1 ")
	})
	t.Run("owner above is gone", func(t *testing.T) {
		// s0 names s1, which does not exist.
		withHost(t, func(_, _, _ string, payload []byte) ([]byte, error) {
			if gjson.GetBytes(payload, "name").String() == "s0" {
				return []byte(`{"metadata":{"name":"s0","uid":"uid-0","creationTimestamp":"2026-03-02T10:00:00Z",` +
					`"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Step","name":"s1","uid":"uid-1","controller":true}]}}`), nil
			}
			return nil, errors.New("Cannot find example.com/v1, Kind=Step s1")
		})
		d := decideWith(t, stepSettings, stepPod("s0", "uid-0"))
		assert.False(t, d.accepted)
		assert.Contains(t, d.message, "owner proof failed: Step e2e/s0 records no submitter; Step e2e/s1 does not exist")
		assert.NotContains(t, d.message, "re-create", "nothing to re-create: the owner is gone")
	})
}
