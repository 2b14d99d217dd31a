package engine_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

// TestEngine_tinyGoCommand runs a guest built with wapc-guest-tinygo in
// TinyGo's default build mode, whose _start ends with proc_exit(0): the
// shape of stock Kubewarden policies. One engine serves all steps because
// compiling a TinyGo module is the slow part.
func TestEngine_tinyGoCommand(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	e := newEngine(t, "tinygo-command", engine.Options{Logger: slog.New(rec)})

	version, err := e.ProtocolVersion(t.Context())
	require.NoError(t, err)
	assert.Equal(t, engine.ProtocolV1, version)

	settings, err := e.ValidateSettings(t.Context(), []byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, engine.SettingsValidation{Valid: true}, settings)

	got, err := e.Invoke(t.Context(), "echo", []byte("hi"))
	require.NoError(t, err)
	assert.Equal(t, "hi", string(got))

	got, err = e.Invoke(t.Context(), "log", []byte(`{"level":"info","message":"from tinygo"}`))
	require.NoError(t, err)
	assert.Equal(t, "ok", string(got))

	_, err = e.Invoke(t.Context(), "missing", nil)
	var guestErr *engine.GuestError
	require.ErrorAs(t, err, &guestErr)
	assert.Equal(t, &engine.GuestError{Operation: "missing", Message: `Could not find function "missing"`}, guestErr)

	assert.Equal(t, []record{
		{
			Level:   slog.LevelDebug,
			Message: "guest output",
			Attrs:   map[string]any{"source": "policy", "stream": "stdout", "text": "echo: hi"},
		},
		{
			Level:   slog.LevelInfo,
			Message: "from tinygo",
			Attrs:   map[string]any{"source": "policy"},
		},
	}, rec.Records())
	assert.Equal(t, engine.Stats{Instances: 1, Idle: 1}, e.Stats())
}
