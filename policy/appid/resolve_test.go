package appid

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResolve(t *testing.T) {
	const uid = "3f2a9c1e-5b7d-4e21-a8c3-6d9f0b2e4a17"
	m := func(kv ...string) Lookup {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	none := m()
	assert.Equal(t, "job-"+uid, Resolve("ns", uid, m(Label, "job-uniqueautogen"), none, false))
	assert.Equal(t, "", Resolve("ns", "", m(Label, "job-uniqueautogen"), none, false), "no uid yet")
	assert.Equal(t, "job-"+uid, Resolve("ns", uid, none, m(Annotation, "job-uniqueautogen"), false))
	assert.Equal(t, "etl", Resolve("ns", uid, m(Label, "etl"), none, true))
	assert.Equal(t, "yunikorn-ns-autogen", Resolve("ns", uid, none, none, false))
	assert.Equal(t, "ns-"+uid, Resolve("ns", uid, none, none, true))
	assert.Equal(t, "", Resolve("ns", "", none, none, true))
	long := "abcdefghijklmnopqrstuvwxyz0123456789"
	assert.Equal(t, long[:26]+"-"+uid, Resolve(long, uid, none, none, true))
	// The suffix replacement is not cut, as the shim's is not.
	p := long + long
	assert.Equal(t, p+"-"+uid, Resolve("ns", uid, m(LabelCanonical, p+"-uniqueautogen"), none, false))
	// An ID longer than MaxIDBytes, or the cache's marker in its place,
	// resolves to the marker, suffix or not.
	huge := strings.Repeat("x", MaxIDBytes+1)
	assert.Equal(t, TooLongMarker, Resolve("ns", uid, none, m(Annotation, huge), false))
	assert.Equal(t, TooLongMarker, Resolve("ns", uid, m(Label, huge+UniqueAutogenSuffix), none, true))
	assert.Equal(t, TooLongMarker, Resolve("ns", "", none, m(Annotation, TooLongMarker), false))
	atBound := strings.Repeat("x", MaxIDBytes)
	assert.Equal(t, atBound, Resolve("ns", uid, none, m(Annotation, atBound), false))
}

func TestNamed(t *testing.T) {
	m := func(k, v string) Lookup {
		return func(key string) string {
			if key == k {
				return v
			}
			return ""
		}
	}
	none := m("", "")
	for _, c := range []struct {
		label, annotation Lookup
		id, source        string
	}{
		{m(LabelCanonical, "a"), m(Annotation, "b"), "a", "label yunikorn.apache.org/app-id"},
		{m(Label, "a"), m(Annotation, "b"), "b", "annotation yunikorn.apache.org/app-id"},
		{m(Label, "a"), none, "a", "label applicationId"},
		{m(LabelSpark, "a"), none, "a", "label spark-app-selector"},
		{none, none, "", ""},
	} {
		id, source := Named(c.label, c.annotation)
		assert.Equal(t, c.id, id)
		assert.Equal(t, c.source, source)
	}
	assert.True(t, TooLong(TooLongMarker))
	assert.True(t, TooLong(strings.Repeat("x", MaxIDBytes+1)))
	assert.False(t, TooLong(strings.Repeat("x", MaxIDBytes)))
}
