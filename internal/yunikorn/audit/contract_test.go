package audit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// ParseUserInfo agrees with the policy on the contract's own cases
// (testdata/cases.json): every value the policy refuses as invalid from a
// trusted submitter is invalid here, and every value it lets a trusted
// submitter supply unchanged (format checks on, no bypassAuth) is valid.
func TestParseUserInfo_contract(t *testing.T) {
	cases, err := fixtures.Load()
	require.NoError(t, err)
	invalid, valid := 0, 0
	for _, c := range cases {
		if c.Kind != "pod" || gjson.GetBytes(c.Request, "operation").String() != "CREATE" {
			continue
		}
		v := gjson.GetBytes(c.Request, "object.metadata.annotations").Get(gjson.Escape(AnnotationKey))
		if !v.Exists() {
			continue
		}
		_, perr := ParseUserInfo(v.String())
		switch {
		case !c.Expect.Allowed && strings.Contains(c.Expect.Message+c.Expect.MessageContains, "annotation "+AnnotationKey+" is invalid"):
			invalid++
			assert.Error(t, perr, "%s: %q is invalid to the policy", c.Name, v.String())
		case c.Expect.Allowed && (c.Expect.Annotation == nil || *c.Expect.Annotation == v.String()) &&
			!gjson.GetBytes(c.Settings, "bypassAuth").Bool() && strings.HasPrefix(strings.TrimPrefix(c.Name, c.Kind+"/"), "create/present/"):
			valid++
			assert.NoError(t, perr, "%s: %q is kept by the policy", c.Name, v.String())
		}
	}
	t.Logf("%d invalid and %d valid values of the contract compared", invalid, valid)
	assert.Greater(t, invalid, 15)
	assert.Greater(t, valid, 5)
}
