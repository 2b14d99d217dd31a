package boundedre

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNesting: the depth estimate that keeps deep patterns away from the
// guest's stack.
func TestNesting(t *testing.T) {
	for expr, want := range map[string]int{
		"^a.*$": 0, "^(a|b)$": 1, "^((a))$": 2, "^a{1,64}$": 63, "^a{3}$": 0, "^a{2,}$": 0,
		"^(a{1,10}){2,5}$": 1 + 9 + 3, `^\{1,64\}$`: 0, "^[{1,64}]$": 0, "^a{1,x}$": 0, "^[]{1,9}]$": 0,
	} {
		assert.Equal(t, want, Nesting(expr), "%q", expr)
	}
}

// TestCompile: within the bound a pattern compiles as regexp.Compile
// compiles it; past it, a *TooDeepError; a bad pattern, regexp's error.
func TestCompile(t *testing.T) {
	re, err := Compile("^a{1,24}$")
	require.NoError(t, err)
	assert.True(t, re.MatchString("aaa"))
	deep := strings.Repeat("(", 30) + "a" + strings.Repeat(")", 30)
	_, err = Compile(deep)
	var tooDeep *TooDeepError
	require.ErrorAs(t, err, &tooDeep)
	assert.Equal(t, deep, tooDeep.Pattern)
	assert.Equal(t, "nests more than 24 levels once its repetitions are expanded", err.Error())
	_, err = Compile("(")
	assert.EqualError(t, err, "error parsing regexp: missing closing ): `(`")
}
