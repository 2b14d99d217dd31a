package acconf

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func look(kv map[string]string) Lookup {
	return func(key string) Entry {
		v, ok := kv[key]
		return Entry{Value: v, Set: ok}
	}
}

// TestSplit: pattern lists as the k8shim's parseRegexes reads them.
func TestSplit(t *testing.T) {
	// deep would overflow the module's stack in regexp.Compile: refused
	// before it gets there.
	deep := strings.Repeat("(", 30) + "a" + strings.Repeat(")", 30)
	for _, tc := range []struct {
		in    string
		want  []string
		empty int
		err   string
	}{
		{"", []string{}, 0, ""},
		{"  ", []string{}, 0, ""},
		{"^a$, ^b$ ,", []string{"^a$", "^b$"}, 1, ""},
		{"^svc-[a-z]{2,8}$", []string{"^svc-[a-z]{2", "8}$"}, 0, ""},
		{"^a$,(", nil, 0, "piece \"(\" (error parsing regexp: missing closing ): `(`)"},
		{"^a$," + deep, nil, 0, "piece \"" + deep + "\" (nests more than 24 levels once its repetitions are expanded)"},
	} {
		p, err := Split(tc.in)
		assert.Equal(t, tc.err, err, tc.in)
		if tc.err == "" {
			assert.Equal(t, tc.want, p.Patterns, tc.in)
			assert.Equal(t, tc.empty, p.Empty, tc.in)
		}
	}
	assert.False(t, Balanced("^svc-[a-z]{2"))
	assert.True(t, Balanced(`^a\[$`))
}

// TestBypassAuth: "true" (any spelling strconv.ParseBool takes) is handed
// over, never Set; "false" is mapped; a typo is invalid with the default.
func TestBypassAuth(t *testing.T) {
	for _, v := range []string{"true", "1", "T", "TRUE"} {
		m := &Mapper{Look: look(map[string]string{KeyBypassAuth: v})}
		f := m.BypassAuth()
		assert.True(t, f.HandedOver, v)
		assert.False(t, f.Set || f.Bool, v)
		assert.Equal(t, []Status{HandedOver}, statuses(m.Notes), v)
	}
	m := &Mapper{Look: look(map[string]string{KeyBypassAuth: "false"})}
	f := m.BypassAuth()
	assert.True(t, f.Set)
	assert.False(t, f.Bool || f.HandedOver || f.Invalid)
	m = &Mapper{Look: look(map[string]string{KeyBypassAuth: "yes"})}
	f = m.BypassAuth()
	assert.True(t, f.Set && f.Invalid)
	assert.False(t, f.Bool, "YuniKorn's default")
	assert.Equal(t, []Status{Invalid}, statuses(m.Notes))
}

// TestAccessControl: unset keys keep their defaults and are not Set; an
// invalid list is YuniKorn's default; external lists note the stricter
// value check.
func TestAccessControl(t *testing.T) {
	m := &Mapper{Look: look(map[string]string{KeySystemUsers: "^a$,[", KeyExternalGroups: "^ops$", KeyTrustControllers: "0"})}
	fs := m.AccessControl()
	assert.Equal(t, []string{"bypassAuth", "trustControllers", "systemUsers", "externalUsers", "externalGroups"},
		[]string{fs[0].Setting, fs[1].Setting, fs[2].Setting, fs[3].Setting, fs[4].Setting})
	assert.False(t, fs[0].Set)
	assert.True(t, fs[1].Set && !fs[1].Bool)
	assert.True(t, fs[2].Set && fs[2].Invalid)
	assert.Equal(t, []string{DefaultSystemUsers}, fs[2].Patterns)
	assert.False(t, fs[3].Set)
	assert.Equal(t, []string{"^ops$"}, fs[4].Patterns)
	assert.Equal(t, []Status{Mapped, Invalid, Mapped, Differs}, statuses(m.Notes))
}

func statuses(ns []Note) []Status {
	out := make([]Status, len(ns))
	for i, n := range ns {
		out[i] = n.Status
	}
	return out
}
