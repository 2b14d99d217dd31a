package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// adopter matches the username against users and each group against
// groups, unanchored like every list; no adopters means no one.
func TestSettings_adopter(t *testing.T) {
	s, err := parseSettings(gjson.Parse(`{"adopters":{"users":"^system:serviceaccount:platform:adopter$","groups":["^platform-admins$"]}}`))
	require.NoError(t, err)
	id := func(user, groups string) identity {
		i, err := parseIdentity(gjson.Parse(`{"username":"` + user + `","groups":` + groups + `}`))
		require.NoError(t, err)
		return i
	}
	assert.True(t, s.adopter(id("system:serviceaccount:platform:adopter", `[]`)))
	assert.True(t, s.adopter(id("carol", `["dev","platform-admins"]`)))
	assert.False(t, s.adopter(id("system:serviceaccount:platform:adopter2", `["platform-admins2"]`)))
	assert.False(t, s.adopter(id("alice", `["dev"]`)))

	none, err := parseSettings(gjson.Parse(`{"adopters":{"users":[],"groups":""}}`))
	require.NoError(t, err)
	assert.Nil(t, none.Adopters, "empty lists name no one")
	assert.False(t, none.adopter(id("system:serviceaccount:platform:adopter", `[]`)))
}
