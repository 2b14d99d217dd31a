package main

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/settings"
	"github.com/yunikorn-userinfo/userinfo/host/webhook"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// TestServe_monitor posts every fixture with the default settings to
// `serve --monitor`: an answer the policy accepts is exactly the one
// without monitor mode (the golden line, patch included); a refusal is an
// admission of the unchanged object, with the policy's warnings and audit
// annotations plus the monitor warning and annotation; each refusal is
// counted and logged. The settings in force are reported by their hash.
func TestServe_monitor(t *testing.T) {
	cases, err := fixtures.Load()
	require.NoError(t, err)
	golden := readGolden(t)
	tlsf := newTLSFiles(t)
	client := tlsf.client(t, nil)
	s := startServe(t, compilationCache(t), true, "--cert-file", tlsf.certFile, "--key-file", tlsf.keyFile, "--monitor")

	refused := 0
	for _, c := range cases {
		if string(c.Settings) != "{}" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			got, enforced := answerAndGolden(t, client, s.url+"/mutate", c, golden)
			if enforced.Allowed {
				assert.Equal(t, enforced, got, "an accepted request is answered as without monitor mode")
				return
			}
			refused++
			want := enforced
			want.Allowed, want.Status, want.Patch, want.PatchType = true, nil, nil, nil
			want.Warnings = append(slices.Clone(enforced.Warnings), "monitor mode: would be refused: "+enforced.Status.Message+
				" (code "+strconv.Itoa(enforced.Status.Code)+")")
			want.AuditAnnotations = maps.Clone(enforced.AuditAnnotations)
			want.AuditAnnotations["monitor"] = "would be refused"
			assert.Equal(t, want, got)
		})
	}
	require.Positive(t, refused, "some fixtures are refused")
	page := scrape(t, s.metrics)
	total := 0
	for _, m := range regexp.MustCompile(`(?m)^yunikorn_userinfo_monitor_would_refuse_total\{rule="([^"]*)",stage="mutate"\} (\d+)$`).FindAllStringSubmatch(page, -1) {
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		total += n
		assert.NotEqual(t, "other", m[1], "every refusal of the policy has its own label")
		assert.NotEqual(t, "unknown", m[1])
	}
	assert.Equal(t, refused, total, "each refusal is counted once")
	assert.Contains(t, page, `yunikorn_userinfo_settings_info{sha256="`+webhook.SettingsHash(settings.Empty)+`"} 1`)
	logs := s.stderr.String()
	assert.Equal(t, refused, strings.Count(logs, `"msg":"monitor mode: would be refused"`), "each refusal is logged")
	assert.Equal(t, 1, strings.Count(logs, `"msg":"settings in force"`), "the settings are logged once")
}
