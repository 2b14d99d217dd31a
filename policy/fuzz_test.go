package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
	"github.com/yunikorn-userinfo/userinfo/internal/jsonindex"
)

// FuzzAppendJSONString: the annotation bytes must be exactly what Go's
// encoding/json writes, for any string, valid UTF-8 or not.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "alice", `a&b<c>"d\e`, "\u2028\u2029", "\x00\x1f\x7f", "é日本", "\xff\xfe", "\b\f\n\r\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(appendJSONString(nil, s)))
	})
}

// FuzzAnnotationValue: the value is byte-for-byte YuniKorn's, which decodes
// the AdmissionReview's userInfo and marshals its UserGroupInformation
// struct with encoding/json (so a group the API server wrote as "\ufffd"
// is the character U+FFFD to both, written raw).
func FuzzAnnotationValue(f *testing.F) {
	f.Add("alice", "dev", "system:authenticated")
	f.Add("", "", "")
	f.Add("a&b", "<g>", "\u2028")
	f.Add("0", "\xff", "")
	f.Fuzz(func(t *testing.T, user, g1, g2 string) {
		var groups []string
		for _, g := range []string{g1, g2} {
			if g != "" {
				groups = append(groups, g)
			}
		}
		ui := userInfoJSON(t, user, groups)
		var sent struct {
			Username string   `json:"username"`
			Groups   []string `json:"groups"`
		}
		require.NoError(t, json.Unmarshal(ui, &sent))
		type ugi struct {
			User   string   `json:"user,omitempty"`
			Groups []string `json:"groups,omitempty"`
		}
		want, err := json.Marshal(ugi{User: sent.Username, Groups: sent.Groups})
		require.NoError(t, err)
		id, err := parseIdentity(gjson.ParseBytes(ui))
		require.NoError(t, err)
		assert.Equal(t, string(want), id.annotationValue())
	})
}

// userInfoJSON is request.userInfo for user and groups, as the API server
// (encoding/json) writes it.
func userInfoJSON(t *testing.T, user string, groups []string) []byte {
	t.Helper()
	fields := map[string]any{"username": user}
	if groups != nil {
		fields["groups"] = groups
	}
	ui, err := json.Marshal(fields)
	require.NoError(t, err)
	return ui
}

// FuzzCheckSuppliedValue is the security property of the format check: a
// value we accept is read by YuniKorn's shim (Go's encoding/json, case-
// insensitive, last duplicate wins) as exactly the user and groups we read.
func FuzzCheckSuppliedValue(f *testing.F) {
	for _, s := range []string{`{"user":"a"}`, `{"user":"a","USER":"root"}`, `{"\u0075ser":"a"}`, `{"uſer":"x"}`,
		` {"user":"a","groups":["x"]} `, `{"user":"a","groups":null}`, `{"user":"a\ud800"}`, `{"user":"a","user":"b"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		if checkSuppliedValue(value) != "" {
			return
		}
		var shim struct {
			User   string   `json:"user,omitempty"`
			Groups []string `json:"groups,omitempty"`
		}
		require.NoError(t, json.Unmarshal([]byte(value), &shim), "accepted %q but YuniKorn cannot parse it", value)
		v := gjson.Parse(value)
		assert.Equal(t, v.Get("user").String(), shim.User, "user of %q", value)
		assert.NotEmpty(t, shim.User)
		groups := []string{}
		for _, g := range v.Get("groups").Array() {
			groups = append(groups, g.String())
		}
		assert.Equal(t, groups, append([]string{}, shim.Groups...), "groups of %q", value)
	})
}

// FuzzValidate feeds arbitrary payloads, seeded from every fixture, through
// the policy: it must never panic, must always answer a well-formed
// ValidationResponse, must give a reason for every rejection, and a
// mutation must leave every byte but the annotation's in place.
func FuzzValidate(f *testing.F) {
	cases, err := fixtures.Load()
	require.NoError(f, err)
	for _, c := range cases {
		f.Add(c.Payload())
	}
	reqs, _ := filepath.Glob(filepath.Join(fixtures.Dir(), "requests", "*.json"))
	for _, p := range reqs {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add([]byte(`{"request":` + string(b) + `,"settings":{}}`))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"request":null}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		out, err := validate(payload)
		require.NoError(t, err)
		var vr fixturecheck.ValidationResponse
		require.NoError(t, json.Unmarshal(out, &vr), "response is not JSON: %s", out)
		if !vr.Accepted {
			assert.NotEmpty(t, vr.Message, "a rejection gives a reason")
			assert.Contains(t, []int{400, 403}, vr.Code)
		}
		if vr.MutatedObject == nil {
			return
		}
		require.True(t, json.Valid(vr.MutatedObject), "mutated object is not valid JSON: %s", vr.MutatedObject)
		original := []byte(gjson.GetBytes(payload, "request.object").Raw)
		if gjson.GetBytes(payload, "settings.scheduling").IsObject() && gjson.GetBytes(payload, "request.kind.kind").String() == "Pod" {
			// The scheduling jobs change labels, annotations and the
			// scheduler's name, and nothing else.
			fixturecheck.CheckSchedulingEdit(t, original, vr.MutatedObject)
			return
		}
		assert.Contains(t, string(vr.MutatedObject), AnnotationKey)
		if bytes.Count(vr.MutatedObject, []byte(AnnotationKey))-bytes.Count(original, []byte(AnnotationKey)) > 1 {
			// Several pod templates of a workload kind were stamped.
			fixturecheck.CheckInsertionsOnly(t, original, vr.MutatedObject)
			return
		}
		fixturecheck.CheckSingleEdit(t, original, vr.MutatedObject)
	})
}

// FuzzStr: every string the policy compares or writes is decoded exactly as
// encoding/json decodes it, and so as the API server and YuniKorn read it,
// whatever escapes and bytes it holds (gjson alone drops the character
// after a lone surrogate escape, as in "\ud800\u0032").
func FuzzStr(f *testing.F) {
	for _, s := range []string{`"alice"`, `"\ud800\u0032"`, `"\ud83d\ude00"`, `"\udc00"`, `"a\ud800"`, `"\ud800\ud800\udc00"`,
		`"\u00e9\n\t\/\\\""`, "\"\xff\xfe\"", `"\uD800\uDC00"`, `"\ud800\\u0032"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		var want string
		if json.Unmarshal([]byte(lit), &want) != nil || !gjson.Valid(lit) {
			return
		}
		v := gjson.Parse(lit)
		if v.Type != gjson.String {
			return
		}
		assert.Equal(t, want, str(v), "%q", lit)
	})
}

// FuzzTooDeep: the flat depth scan never panics, and on valid JSON agrees
// with the nesting encoding/json sees.
func FuzzTooDeep(f *testing.F) {
	for _, s := range []string{`{}`, `[[[]]]`, `{"a":[{"b":"[[["}]}`, `"\"[["`, `[`, `]]]`, `{"a\\":[1]}`} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = limit%8 + 1
		if limit < 1 {
			limit += 8
		}
		_, deep := tooDeep(s, limit)
		if !json.Valid([]byte(s)) {
			return
		}
		assert.Equal(t, depthOf(t, []byte(s)) > limit, deep, "%q limit %d", s, limit)
	})
}

// depthOf is the nesting of valid JSON, measured with encoding/json's
// tokenizer.
func depthOf(t *testing.T, data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// FuzzIndex: the one-pass index accepts exactly what encoding/json accepts
// within the depth limit, and reading members through it gives what
// gjson's ForEach gives, at every object of the document.
func FuzzIndex(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, ` {"a" : [1, {"b":null}], "c":"\u00e9\"x"} `, `{"a":1,"a":2}`, `[1,]`, `{"a":}`,
		`-0.5e+7`, `01`, `1.`, `"\x01"`, `"\ud800"`, `{"k\"ey":{"x":[[],[{}]]},"z":true}`, `tru`, `[1 2]`, `{"a" 1}`} {
		f.Add(s, 3)
	}
	cases, err := fixtures.Load()
	require.NoError(f, err)
	for _, c := range cases[:min(len(cases), 20)] {
		f.Add(string(c.Payload()), 512)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = limit%600 + 1
		if limit < 1 {
			limit += 600
		}
		var ix jsonindex.Index
		ok := ix.Scan(s, limit)
		valid := json.Valid([]byte(s))
		require.Equal(t, valid && depthOf(t, []byte(s)) <= limit, ok, "%q limit %d", s, limit)
		if !ok {
			return
		}
		indexed.Lock()
		defer indexed.release()
		require.True(t, indexed.index(s, limit))
		var walk func(v gjson.Result)
		walk = func(v gjson.Result) {
			if v.IsObject() {
				type member struct {
					key   string
					raw   string
					index int
				}
				var want []member
				v.ForEach(func(k, e gjson.Result) bool { want = append(want, member{k.Raw, e.Raw, e.Index}); return true })
				all := func(it memberIter) []member {
					var got []member
					for {
						k, raw, at, ok := it.next()
						if !ok {
							return got
						}
						e := it.value(raw, at)
						got = append(got, member{k, e.Raw, e.Index})
					}
				}
				require.Equal(t, want, all(newMemberIter(v)), "members of %s", v.Raw)
				// And the same without the index, as for JSON outside the payload.
				got := all(memberIter{m: jsonindex.NewMembers(v.Raw, nil, 0), index: v.Index})
				require.Equal(t, want, got, "members of %s, not indexed", v.Raw)
			}
			if v.IsObject() || v.IsArray() {
				v.ForEach(func(_, e gjson.Result) bool { walk(e); return true })
			}
		}
		walk(gjson.Parse(trimSpace(s)))
	})
}
