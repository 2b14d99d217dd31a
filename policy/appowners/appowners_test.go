package appowners

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each parameter changes the index's name: a policy with other settings
// never reads an index kept for these.
func TestIndexName(t *testing.T) {
	base := Options{SchedulerName: "yunikorn", CompletingTimeout: 30 * time.Second, UserLabelKey: "yunikorn.apache.org/username"}
	assert.Equal(t, `application-owners/v1 scheduler="yunikorn" unique=false completing=30000000000 userLabel="yunikorn.apache.org/username"`, base.IndexName())
	seen := map[string]bool{base.IndexName(): true}
	for _, o := range []Options{
		{SchedulerName: "yk", CompletingTimeout: 30 * time.Second, UserLabelKey: "yunikorn.apache.org/username"},
		{SchedulerName: "yunikorn", UniqueAppIDs: true, CompletingTimeout: 30 * time.Second, UserLabelKey: "yunikorn.apache.org/username"},
		{SchedulerName: "yunikorn", CompletingTimeout: time.Minute, UserLabelKey: "yunikorn.apache.org/username"},
		{SchedulerName: "yunikorn", CompletingTimeout: 30 * time.Second, UserLabelKey: "user"},
		{SchedulerName: `yunikorn" unique=true`, CompletingTimeout: 30 * time.Second, UserLabelKey: "yunikorn.apache.org/username"},
	} {
		assert.False(t, seen[o.IndexName()], o.IndexName())
		seen[o.IndexName()] = true
	}
}

func TestHeldUntil(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	o := Options{CompletingTimeout: 30 * time.Second}
	last, known := Latest([]string{"2026-01-01T11:59:40Z", "not a time", "2026-01-01T11:59:50Z", "2026-01-01T11:59:45Z"})
	assert.True(t, known)
	assert.Equal(t, now.Add(-10*time.Second), last)
	assert.Equal(t, 30*time.Second+FinishMargin, o.Window())
	assert.Equal(t, now.Add(20*time.Second+FinishMargin), o.HeldUntil(last, known, now))
	_, known = Latest([]string{"", "x"})
	assert.False(t, known)
	assert.Equal(t, now.Add(o.Window()), o.HeldUntil(time.Time{}, false, now), "no finish time: now")
	assert.Equal(t, now.Add(o.Window()), o.HeldUntil(now.Add(time.Hour), true, now), "in the future: now")
	assert.Zero(t, Options{}.Window(), "completingTimeout 0: finished Pods hold nothing")
	assert.Equal(t, now, Options{}.HeldUntil(last, known, now))
	assert.True(t, Finished("Succeeded"))
	assert.True(t, Finished("Failed"))
	assert.False(t, Finished("Running"))
	assert.False(t, Finished(""))
}

// FromSettings is the one reading of the model's parameters: each way the
// settings give them, and their defaults.
func TestFromSettings(t *testing.T) {
	def := Options{SchedulerName: "yunikorn", CompletingTimeout: 30 * time.Second, UserLabelKey: "yunikorn.apache.org/username"}
	unique := def
	unique.UniqueAppIDs = true
	for _, tc := range []struct {
		settings string
		want     Options
		on       bool
		err      string
	}{
		{`{}`, def, false, ""},
		{``, def, false, ""},
		{`{"applicationOwnership":"off"}`, def, false, ""},
		{`{"applicationOwnership":"warn"}`, def, true, ""},
		{`{"applicationOwnership":{"mode":"enforce","schedulerName":"yk","generateUniqueAppIds":true,"completingTimeout":"1m"},"userLabelKey":"user"}`,
			Options{SchedulerName: "yk", UniqueAppIDs: true, CompletingTimeout: time.Minute, UserLabelKey: "user"}, true, ""},
		{`{"applicationOwnership":{"mode":"off","schedulerName":"yk"}}`, Options{SchedulerName: "yk", CompletingTimeout: 30 * time.Second, UserLabelKey: "yunikorn.apache.org/username"}, false, ""},
		// scheduling's generateUniqueAppIds is the default of applicationOwnership's.
		{`{"applicationOwnership":"enforce","scheduling":{"generateUniqueAppIds":true}}`, unique, true, ""},
		{`{"scheduling":{"generateUniqueAppIds":true},"applicationOwnership":{"mode":"warn"}}`, unique, true, ""},
		{`{"applicationOwnership":{"mode":"warn","generateUniqueAppIds":true},"scheduling":{}}`, unique, true, ""},
		{`{"applicationOwnership":{"mode":"warn","generateUniqueAppIds":false},"scheduling":{"generateUniqueAppIds":true}}`, def, true, ""},
		// YuniKorn's ConfigMaps are no settings of the model.
		{`{"applicationOwnership":"enforce","followYuniKornConfig":true}`, def, true, ""},
		{`{"applicationOwnership":{"mode":"enforce","completingTimeout":"-1s"}}`, def, false, `completingTimeout: "-1s" is not a duration`},
		{`{"applicationOwnership":7}`, def, false, ""},
		{`[`, def, false, "read the settings"},
	} {
		o, on, err := FromSettings(tc.settings)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, tc.settings)
			continue
		}
		require.NoError(t, err, tc.settings)
		assert.Equal(t, tc.want, o, tc.settings)
		assert.Equal(t, tc.on, on, tc.settings)
	}
}
