package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

// TestValidate_fixtures runs the shared case table (testdata/cases.json)
// against the policy compiled natively.
func TestValidate_fixtures(t *testing.T) {
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
