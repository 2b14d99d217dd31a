package main

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/settingsdef"
)

// TestSettingsdef_matchesPolicy holds the policy to the one description of
// its settings (policy/settingsdef), from which the reference table and the
// chart's schema are generated: the unknown-key message lists exactly the
// described keys, and each key's Example is a value the policy parses.
func TestSettingsdef_matchesPolicy(t *testing.T) {
	if want := strings.Join(settingsdef.Keys(), ", "); knownKeys != want {
		t.Errorf("policy/settings.go knownKeys and policy/settingsdef disagree:\n knownKeys:   %s\n settingsdef: %s\nadd the key to both (and a case to parseSettings), then run make generate", knownKeys, want)
	}
	for _, s := range settingsdef.All {
		raw := `{"` + s.Key + `": ` + s.Example + `}`
		if _, err := parseSettings(gjson.Parse(raw)); err != nil {
			t.Errorf("settingsdef %s: the policy refuses its Example %s: %v", s.Key, s.Example, err)
		}
	}
	// A described key the policy does not handle falls into the
	// unknown-key branch; make sure that branch is what we think it is.
	if _, err := parseSettings(gjson.Parse(`{"notASetting": true}`)); err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Fatalf("an unknown key is not refused as unknown: %v", err)
	}
}
