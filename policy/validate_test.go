package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

// TestValidate_fixtures runs the shared case table (testdata/cases.json)
// against the policy compiled natively.
func TestValidate_fixtures(t *testing.T) {
	answerFromFixtureCluster(t)
	cases, err := fixtures.Load()
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			out, err := validate(c.Payload())
			require.NoError(t, err)
			fixturecheck.CheckValidationResponse(t, c, out)
		})
	}
}

// TestValidate_fixturesThroughTheCache runs the case table with every
// object the policy reads as serve's watch caches keep it (the fields
// metadata.yml's cache declaration names): each answer must be the same,
// so that the declaration keeps every field the policy reads of a listed
// or cached object.
func TestValidate_fixturesThroughTheCache(t *testing.T) {
	freshInstance(t)
	h := fixturecheck.CachedClusterHostCalls(t, nil)
	prev := hostCaller
	hostCaller = func(binding, namespace, operation string, payload []byte) ([]byte, error) {
		return h(context.Background(), binding, namespace, operation, payload)
	}
	t.Cleanup(func() { hostCaller = prev })
	cases, err := fixtures.Load()
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			out, err := validate(c.Payload())
			require.NoError(t, err)
			fixturecheck.CheckValidationResponse(t, c, out)
		})
	}
}

// answerFromFixtureCluster answers the policy's host capability calls from
// the fixtures' cluster directory for the rest of the test, as the .wasm
// runners do.
func answerFromFixtureCluster(t *testing.T) {
	t.Helper()
	freshInstance(t)
	h := fixturecheck.ClusterHostCalls(t, nil)
	prev := hostCaller
	hostCaller = func(binding, namespace, operation string, payload []byte) ([]byte, error) {
		return h(context.Background(), binding, namespace, operation, payload)
	}
	t.Cleanup(func() { hostCaller = prev })
}
