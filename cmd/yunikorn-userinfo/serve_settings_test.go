package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServe_invalidSettingsAtStart: a replica that starts while the
// settings file holds a typo stays up, not ready, and says why (/readyz,
// every review, the log), instead of exiting into a crash loop; once the
// file is fixed it turns ready.
func TestServe_invalidSettingsAtStart(t *testing.T) {
	t.Parallel()
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	settingsFile := filepath.Join(t.TempDir(), "settings.yaml")
	writeAtomically(t, settingsFile, []byte("bypassAuth: \"true\"\n"))
	s := startServe(t, nil, false, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"-s", settingsFile, "--settings-reload-interval", "20ms")
	const reason = `provided settings are not valid: settings.bypassAuth: must be a boolean, got string "true"`

	get := func(path string) (int, string) {
		resp, err := client.Get(s.url + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "not ready: "+reason)
	}, 30*time.Second, 10*time.Millisecond, "not ready with the reason; stderr: %s", s.stderr.String())
	code, _ := get("/healthz")
	assert.Equal(t, http.StatusOK, code, "alive")
	assert.Contains(t, scrape(t, s.metrics), "\nyunikorn_userinfo_ready 0\n")
	assert.NotContains(t, scrape(t, s.metrics), "yunikorn_userinfo_settings_info{", "no settings in force")

	pod := `{"uid":"p1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"operation":"CREATE","namespace":"ns","userInfo":{"username":"alice"},` +
		`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[{"name":"c","image":"i"}]}}}`
	status, body := postReview(t, client, s.url, wrapReview([]byte(pod)))
	require.Equal(t, http.StatusOK, status)
	var r struct {
		Response struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
			Status  struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	require.NoError(t, json.Unmarshal(body, &r))
	assert.Equal(t, "p1", r.Response.UID)
	assert.False(t, r.Response.Allowed)
	assert.Equal(t, http.StatusServiceUnavailable, r.Response.Status.Code)
	assert.Equal(t, "this webhook replica is not ready: "+reason, r.Response.Status.Message)
	assert.Contains(t, s.stderr.String(), "settings refused at start: serving not ready until the settings file holds settings the policy accepts")
	assert.NotContains(t, s.stderr.String(), "webhook ready")

	writeAtomically(t, settingsFile, []byte("bypassAuth: false\n"))
	require.Eventually(t, func() bool { return readyLine.MatchString(scrape(t, s.metrics)) },
		30*time.Second, 10*time.Millisecond, "ready once the file is fixed; stderr: %s", s.stderr.String())
	_, body = postReview(t, client, s.url, wrapReview([]byte(pod)))
	assert.Contains(t, string(body), `"allowed":true`)
	assert.Contains(t, scrape(t, s.metrics), "yunikorn_userinfo_settings_info{")
	s.stop()
	assert.Equal(t, 0, s.wait(t), "clean shutdown; stderr: %s", s.stderr.String())

	// Undecodable too: the same wait, not an exit.
	writeAtomically(t, settingsFile, []byte("bypassAuth: [\n"))
	s = startServe(t, nil, false, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"-s", settingsFile, "--settings-reload-interval", "20ms")
	require.Eventually(t, func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "neither JSON nor YAML")
	}, 30*time.Second, 10*time.Millisecond, "not ready with the reason; stderr: %s", s.stderr.String())
}

// TestServe_settingsConfigMapReview: /settings refuses a write of the
// settings ConfigMap whose text the policy refuses, with its message, and
// admits a good one and every other ConfigMap.
func TestServe_settingsConfigMapReview(t *testing.T) {
	t.Parallel()
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	settingsFile := filepath.Join(t.TempDir(), "settings.yaml")
	writeAtomically(t, settingsFile, []byte("{}\n"))
	s := startServe(t, nil, true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile,
		"-s", settingsFile, "--settings-configmap", "yunikorn-userinfo/yunikorn-userinfo-settings",
		`--validate-overlay={"validateOnly":true}`)
	review := func(name, text string) (bool, string) {
		data, err := json.Marshal(map[string]string{"settings.yaml": text})
		require.NoError(t, err)
		req := `{"uid":"c1","kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},` +
			`"operation":"UPDATE","namespace":"yunikorn-userinfo","name":"` + name + `","userInfo":{"username":"admin"},` +
			`"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"yunikorn-userinfo"},"data":` + string(data) + `}}`
		status, body := postReviewTo(t, client, s.url+"/settings", wrapReview([]byte(req)))
		require.Equal(t, http.StatusOK, status, "%s", body)
		var r struct {
			Response struct {
				Allowed bool `json:"allowed"`
				Status  struct {
					Message string `json:"message"`
				} `json:"status"`
			} `json:"response"`
		}
		require.NoError(t, json.Unmarshal(body, &r))
		return r.Response.Allowed, r.Response.Status.Message
	}
	allowed, msg := review("yunikorn-userinfo-settings", "bypassAuth: \"true\"\n")
	assert.False(t, allowed)
	assert.Equal(t, `data.settings.yaml: provided settings are not valid: settings.bypassAuth: must be a boolean, got string "true" `+
		`(the webhook would keep its settings, and a replica started with these would not be ready)`, msg)
	allowed, msg = review("yunikorn-userinfo-settings", "externalUsers: ['[unclosed']\n")
	assert.False(t, allowed)
	assert.Contains(t, msg, "invalid regular expression")
	allowed, msg = review("yunikorn-userinfo-settings", "bypassAuth: false\nexternalUsers: [\"^livy$\"]\n")
	assert.True(t, allowed, msg)
	allowed, msg = review("another-configmap", "bypassAuth: \"true\"\n")
	assert.True(t, allowed, "not the settings ConfigMap: %s", msg)
}
