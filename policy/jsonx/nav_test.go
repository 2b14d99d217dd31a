package jsonx

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/tidwall/gjson"
)

func TestJoin(t *testing.T) {
	assert.Equal(t, "spec", Join("", "spec"))
	assert.Equal(t, "spec.template", Join("spec", "template"))
	assert.Equal(t, `metadata.annotations["yunikorn.apache.org/user.info"]`, Join("metadata.annotations", "yunikorn.apache.org/user.info"))
	assert.Equal(t, `a[""]`, Join("a", ""))
	assert.Equal(t, "a[12]", IndexField("a", 12))
}

// Member compares decoded keys and reports a key given twice, escaped
// or not.
func TestMember(t *testing.T) {
	obj := gjson.Parse(`{"a":1,"\u0062":2,"c":3,"c":4,"d":null}`)
	v, dup := Member(obj, "b")
	assert.False(t, dup)
	assert.Equal(t, "2", v.Raw)
	_, dup = Member(obj, "c")
	assert.True(t, dup)
	v, _ = Member(obj, "d")
	assert.True(t, v.Exists())
	assert.False(t, Present(v))
	v, _ = Member(obj, "e")
	assert.False(t, v.Exists())
}

func TestKeySet(t *testing.T) {
	obj := gjson.Parse(`{"a":1,"b":2,"\u0061":3}`)
	var ks KeySet
	var dups []string
	obj.ForEach(func(k, _ gjson.Result) bool {
		if ks.Add(obj, k) {
			dups = append(dups, k.Raw)
		}
		return true
	})
	assert.Equal(t, []string{`"\u0061"`}, dups)
}

func TestDescribe(t *testing.T) {
	assert.Equal(t, "null", Describe(gjson.Parse(`null`)))
	assert.Equal(t, `string "x"`, Describe(gjson.Parse(`"x"`)))
	assert.Equal(t, "array [1]", Describe(gjson.Parse(`[1]`)))
	long := `"` + "0123456789012345678901234567890123456789012345678901234567890123456789" + `"`
	assert.Equal(t, "string "+long[:64]+"...", Describe(gjson.Parse(long)))
}

func TestEachMember(t *testing.T) {
	var problems []string
	var names []string
	EachMember(&problems, "settings.x", gjson.Parse(`{"a":1,"b":2,"a":3}`), func(name, path string, _ gjson.Result) {
		names = append(names, path)
	})
	assert.Equal(t, []string{"settings.x.a", "settings.x.b"}, names)
	assert.Equal(t, []string{"settings.x.a: duplicate key"}, problems)
}
