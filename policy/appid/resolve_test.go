package appid

import (
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
}
