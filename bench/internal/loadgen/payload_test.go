package loadgen

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

func TestNewPayload(t *testing.T) {
	t.Parallel()
	const newUID = "00000000-0000-4000-8000-00000000002a"
	tests := []struct {
		name    string
		doc     string
		want    string // the body with newUID
		wantErr string
	}{
		{
			name: "bare request is wrapped",
			doc:  ` {"uid": "old", "kind":{"kind":"Pod"},"object":{"uid":"not this one"}}` + "\n",
			want: `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid": "` + newUID + `", "kind":{"kind":"Pod"},"object":{"uid":"not this one"}}}`,
		},
		{
			name: "review is kept byte for byte",
			doc:  `{ "apiVersion" : "admission.k8s.io/v1", "kind":"AdmissionReview", "request" : {"object":{}, "uid":"old"} }`,
			want: `{ "apiVersion" : "admission.k8s.io/v1", "kind":"AdmissionReview", "request" : {"object":{}, "uid":"` + newUID + `"} }`,
		},
		{
			name: "duplicate keys survive",
			doc:  `{"uid":"u","object":{"metadata":{"name":"a","name":"b"}}}`,
			want: `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"` + newUID + `","object":{"metadata":{"name":"a","name":"b"}}}}`,
		},
		{
			name:    "no uid",
			doc:     `{"object":{}}`,
			wantErr: "payload p: request.uid is missing or not a string",
		},
		{
			name:    "uid not a string",
			doc:     `{"uid":42}`,
			wantErr: "payload p: request.uid is missing or not a string",
		},
		{
			name:    "not JSON",
			doc:     `{"uid":"x"`,
			wantErr: "payload p: not valid JSON",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := NewPayload("p", []byte(tc.doc), nil)
			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(p.body([]byte(newUID))))
		})
	}
}

// Every fixture becomes a body that differs from its request only in the
// uid, and carries the case's verdict when the case has default settings.
func TestLoadFixtures(t *testing.T) {
	t.Parallel()
	cases, err := fixtures.Load()
	require.NoError(t, err)
	payloads, err := LoadFixtures(nil)
	require.NoError(t, err)
	require.Len(t, payloads, len(cases))

	const uid = "11111111-2222-4333-8444-555555555555"
	for i, c := range cases {
		p := payloads[i]
		assert.Equal(t, c.Name, p.Name)
		body := p.body([]byte(uid))
		assert.Equal(t, uid, gjson.GetBytes(body, "request.uid").String(), c.Name)
		oldUID := gjson.GetBytes(c.Request, "uid").Raw
		want := reviewHeader + string(bytes.Replace(c.Request, []byte(`"uid":`+oldUID), []byte(`"uid":"`+uid+`"`), 1)) + "}"
		assert.Equal(t, want, string(body), c.Name)
		if string(c.Settings) == "{}" {
			require.NotNil(t, p.Expect, c.Name)
			assert.Equal(t, c.Expect.Allowed, *p.Expect, c.Name)
		} else {
			assert.Nil(t, p.Expect, "%s has settings: no verdict check", c.Name)
		}
	}
}

func TestLoadFixtures_match(t *testing.T) {
	t.Parallel()
	payloads, err := LoadFixtures(regexp.MustCompile(`^pod/create/absent/inject$`))
	require.NoError(t, err)
	require.Len(t, payloads, 1)
	assert.Equal(t, "pod/create/absent/inject", payloads[0].Name)

	_, err = LoadFixtures(regexp.MustCompile(`^no such case$`))
	assert.EqualError(t, err, `load fixtures: no case name matches "^no such case$"`)
}

func Test_uidSource(t *testing.T) {
	t.Parallel()
	s, err := newUIDSource()
	require.NoError(t, err)
	shape := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for _, seq := range []uint64{0, 1, 2, 255, 256, 1 << 40, 1<<48 - 1} {
		uid := string(s.appendUID(nil, seq))
		assert.Len(t, uid, uidLen)
		assert.Regexp(t, shape, uid)
		assert.False(t, seen[uid], "uid %s repeated", uid)
		seen[uid] = true
	}
	// The sequence number is the last 12 hex digits.
	assert.Equal(t, "0000000000ff", string(s.appendUID(nil, 255))[24:])

	other, err := newUIDSource()
	require.NoError(t, err)
	assert.NotEqual(t, string(s.appendUID(nil, 0)), string(other.appendUID(nil, 0)), "runs have their own uids")
}

// A body built for the wire stays valid JSON: the uid needs no escaping.
func TestPayload_bodyIsJSON(t *testing.T) {
	t.Parallel()
	p, err := NewPayload("p", []byte(`{"uid":"x","object":{}}`), nil)
	require.NoError(t, err)
	s, err := newUIDSource()
	require.NoError(t, err)
	var v struct {
		Request struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	uid := s.appendUID(nil, 7)
	require.NoError(t, json.Unmarshal(p.body(uid), &v))
	assert.Equal(t, string(uid), v.Request.UID)
}
