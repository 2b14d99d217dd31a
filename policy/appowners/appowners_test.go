package appowners

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
