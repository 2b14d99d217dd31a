package settings

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "JSON kept byte for byte", in: " {\"b\": 1, \"a\": [2]}\n", want: `{"b": 1, "a": [2]}`},
		{name: "YAML converted", in: "externalUsers:\n  - front-end\nbypassAuth: false\n", want: `{"bypassAuth":false,"externalUsers":["front-end"]}`},
		{name: "empty", in: "", want: `{}`},
		{name: "comments only", in: "# nothing yet\n", want: `{}`},
		{name: "YAML list", in: "- a\n", wantErr: "read settings f: settings must be a JSON object, got an array"},
		{name: "JSON string", in: `"x"`, wantErr: "settings must be a JSON object, got a string"},
		{name: "duplicate YAML key", in: "a: 1\na: 2\n", wantErr: "read settings f: neither JSON nor YAML"},
		{name: "bad YAML", in: "a: [\n", wantErr: "neither JSON nor YAML"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decode("f", []byte(tc.in))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

func TestJSONObject(t *testing.T) {
	t.Parallel()
	_, err := JSONObject("--settings-json", []byte("a: 1"))
	assert.ErrorContains(t, err, "read settings --settings-json: invalid JSON")
	_, err = JSONObject("--settings-json", []byte("null"))
	assert.EqualError(t, err, "read settings --settings-json: settings must be a JSON object, got null")
	got, err := JSONObject("x", []byte(` {"a":1} `))
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(got))
}

// fakePolicy accepts settings unless they contain "bad", and fails the call
// when they contain "crash".
type fakePolicy struct{ calls atomic.Int32 }

func (p *fakePolicy) validate(_ context.Context, s json.RawMessage) (bool, string, error) {
	p.calls.Add(1)
	switch {
	case strings.Contains(string(s), "crash"):
		return false, "", errors.New("guest trapped")
	case strings.Contains(string(s), "bad"):
		return false, "field mode: bad is not a mode", nil
	}
	return true, "", nil
}

func TestStore_Reload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o600)) }
	write("mode: one\n")
	initial, err := ReadFile(path)
	require.NoError(t, err)

	p := &fakePolicy{}
	var outcomes []string
	s, err := NewStore(initial, Options{Path: path, Validate: p.validate, OnReload: func(o string) { outcomes = append(outcomes, o) }})
	require.NoError(t, err)
	ctx := t.Context()

	require.NoError(t, s.Reload(ctx))
	assert.Equal(t, `{"mode":"one"}`, string(s.Current()))
	assert.Zero(t, p.calls.Load(), "the initial content is not validated again")

	write("mode: two\n")
	require.NoError(t, s.Reload(ctx))
	assert.Equal(t, `{"mode":"two"}`, string(s.Current()))

	write("mode: bad\n")
	err = s.Reload(ctx)
	var invalid *InvalidError
	require.ErrorAs(t, err, &invalid)
	assert.Equal(t, "field mode: bad is not a mode", invalid.Message)
	assert.Equal(t, `{"mode":"two"}`, string(s.Current()), "invalid settings are ignored")
	calls := p.calls.Load()
	require.NoError(t, s.Reload(ctx), "an unchanged bad file is reported once")
	assert.Equal(t, calls, p.calls.Load())

	write("mode: [\n")
	assert.ErrorContains(t, s.Reload(ctx), "neither JSON nor YAML")
	assert.Equal(t, `{"mode":"two"}`, string(s.Current()))

	write("mode: crash\n")
	assert.ErrorContains(t, s.Reload(ctx), "validate settings: guest trapped")
	assert.ErrorContains(t, s.Reload(ctx), "guest trapped", "a failed call is retried at the next poll")

	require.NoError(t, os.Remove(path))
	assert.ErrorContains(t, s.Reload(ctx), "read settings")
	assert.Equal(t, `{"mode":"two"}`, string(s.Current()))

	write("mode: three\n")
	require.NoError(t, s.Reload(ctx))
	assert.Equal(t, `{"mode":"three"}`, string(s.Current()))

	assert.Equal(t, []string{
		ReloadApplied, ReloadInvalid, ReloadFailed, ReloadFailed, ReloadFailed, ReloadFailed, ReloadApplied,
	}, outcomes)
}

func TestStore_withoutFile(t *testing.T) {
	t.Parallel()
	s, err := NewStore(nil, Options{})
	require.NoError(t, err)
	assert.Equal(t, "{}", string(s.Current()))
	s.Run(t.Context()) // returns at once without a file
	require.NoError(t, s.Reload(t.Context()))

	_, err = NewStore(nil, Options{Path: "x"})
	assert.ErrorContains(t, err, "a Validate function is required")
}

func TestOverlay(t *testing.T) {
	got, err := Overlay(json.RawMessage(`{"b":1,"validateOnly":false,"a":[1]}`), json.RawMessage(`{"validateOnly":true}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":[1],"b":1,"validateOnly":true}`, string(got))
	got, err = Overlay(json.RawMessage(`null`), json.RawMessage(`{"x":"y"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"x":"y"}`, string(got))
	_, err = Overlay(json.RawMessage(`{}`), json.RawMessage(`[1]`))
	assert.ErrorContains(t, err, "the overlay must be a JSON object")
	_, err = Overlay(json.RawMessage(`{}`), json.RawMessage(`null`))
	assert.ErrorContains(t, err, "the overlay must be a JSON object")
	_, err = Overlay(json.RawMessage(`[]`), json.RawMessage(`{}`))
	assert.ErrorContains(t, err, "the settings are not a JSON object")
}

// TestNewRefusedStore: a store started on refused settings holds none
// until the file holds settings the policy accepts; the unchanged file is
// not validated again.
func TestNewRefusedStore(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "settings.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o600)) }
	write("mode: bad\n")
	refused, err := ReadFile(path)
	require.NoError(t, err)
	p := &fakePolicy{}
	var outcomes []string
	s, err := NewRefusedStore(refused, Options{Path: path, Validate: p.validate, OnReload: func(o string) { outcomes = append(outcomes, o) }})
	require.NoError(t, err)
	ctx := t.Context()
	assert.Nil(t, s.Current())

	require.NoError(t, s.Reload(ctx))
	assert.Zero(t, p.calls.Load(), "the refused content is not validated again")
	assert.Nil(t, s.Current())

	write("mode: [\n")
	assert.ErrorContains(t, s.Reload(ctx), "neither JSON nor YAML")
	assert.Nil(t, s.Current())

	write("mode: good\n")
	require.NoError(t, s.Reload(ctx))
	assert.Equal(t, `{"mode":"good"}`, string(s.Current()))
	assert.Equal(t, []string{ReloadFailed, ReloadApplied}, outcomes)

	// Unreadable at start (nil): every content is new.
	s, err = NewRefusedStore(nil, Options{Path: path, Validate: p.validate})
	require.NoError(t, err)
	require.NoError(t, s.Reload(ctx))
	assert.Equal(t, `{"mode":"good"}`, string(s.Current()))

	_, err = NewRefusedStore(nil, Options{})
	assert.ErrorContains(t, err, "a settings file and a Validate function")
}

func TestSplitRemark(t *testing.T) {
	t.Parallel()
	w, n := SplitRemark("warning: a; b\nnote: c")
	assert.Equal(t, "warning: a; b", w)
	assert.Equal(t, "note: c", n)
	w, n = SplitRemark("note: c")
	assert.Empty(t, w)
	assert.Equal(t, "note: c", n)
	w, n = SplitRemark("another policy's words")
	assert.Equal(t, "another policy's words", w)
	assert.Empty(t, n)
}
