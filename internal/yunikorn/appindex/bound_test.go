package appindex

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/yunikorn-userinfo/userinfo/host/kubecap"
	"github.com/yunikorn-userinfo/userinfo/policy/appid"
	"github.com/yunikorn-userinfo/userinfo/policy/appowners"
)

// The index keys a Pod by its bounded ID: every ID longer than
// appid.MaxIDBytes (or the cache's marker itself, as a Pod read from the
// cache carries it) folds into the one marker entry, which costs the index
// its few bytes whatever the Pod carries, and which the policy never asks
// (it refuses a Pod whose ID is too long). The policy's marker is the
// host's.
func TestEntries_boundedID(t *testing.T) {
	assert.Equal(t, kubecap.TooLongValue, appid.TooLongMarker)
	o := appowners.Options{SchedulerName: "yunikorn", CompletingTimeout: 30 * time.Second, UserLabelKey: "yunikorn.apache.org/username"}
	huge := strings.Repeat("a", 255<<10)
	for name, p := range map[string]map[string]any{
		"annotation":            pod("ns", annotation(appid.Annotation, huge)),
		"label":                 pod("ns", label(appid.Label, strings.Repeat("b", appid.MaxIDBytes+1))),
		"uniqueautogen":         pod("ns", annotation(appid.Annotation, huge+appid.UniqueAutogenSuffix)),
		"the marker":            pod("ns", annotation(appid.Annotation, kubecap.TooLongValue)),
		"the marker, as cached": pod("ns", annotation(appid.Annotation, appid.TooLongMarker)),
	} {
		got := Entries(o, p, now)
		assert.Equal(t, []kubecap.IndexEntry{{Key: appid.TooLongMarker, Value: "alice"}}, got, name)
	}
	atBound := strings.Repeat("c", appid.MaxIDBytes)
	assert.Equal(t, []kubecap.IndexEntry{{Key: atBound, Value: "alice"}}, Entries(o, pod("ns", label(appid.Label, atBound)), now),
		"an ID of MaxIDBytes is kept")
}
