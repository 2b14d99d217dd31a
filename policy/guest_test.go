package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dispatch is what the Wasm entry point runs; natively it is tested here.
func TestDispatch(t *testing.T) {
	out, err := dispatch([]byte("kept:"), opProtocolVersion, nil)
	require.NoError(t, err)
	assert.Equal(t, `kept:"v1"`, string(out), "the answer is appended to dst")

	out, err = dispatch(nil, opValidateSettings, []byte(`{"bypassAuth":"yes"}`))
	require.NoError(t, err)
	assert.Contains(t, string(out), `"valid":false`)

	out, err = dispatch(nil, opValidate, []byte(`[]`))
	require.NoError(t, err, "a bad payload is an answer, not an error")
	assert.Contains(t, string(out), `"accepted":false`)

	_, err = dispatch(nil, "validate2", nil)
	require.EqualError(t, err, `Could not find function "validate2"`)
}
