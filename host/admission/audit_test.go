package admission

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The audit annotations decode as json.Unmarshal into a map decodes them,
// errors included, whatever the policy writes.
func TestDecodeAuditAnnotations_agreesWithEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`{}`,
		`{"rule":"create: absent, inject","user":"{\"user\":\"alice\",\"groups\":[\"dev\"]}"}`,
		`{"a":"\u00e9\n\t\\\/","b":"\ud83d\ude00","c":"\ud800","d":"x\\u0041"}`,
		`{"dup":"1","dup":"2"}`,
		`{"k\u0065y":"v"}`,
		`{"a":null,"b":"x"}`,
		`{"a":1}`,
		`{"a":["x"]}`,
		`{"a":{"b":"c"}}`,
		`["a"]`,
		`"s"`,
		`3`,
		"{\"bad\":\"\xff\xfe\"}",
	} {
		t.Run(raw, func(t *testing.T) {
			var want map[string]string
			wantErr := json.Unmarshal([]byte(raw), &want)
			doc, _, err := decodeObject([]byte(`{"audit_annotations":` + raw + `}`))
			require.NoError(t, err)
			top, err := doc.members([]byte(`{"audit_annotations":` + raw + `}`))
			require.NoError(t, err)
			v, _ := top.get("audit_annotations")
			got, err := decodeAuditAnnotations(doc, v)
			if wantErr != nil {
				assert.EqualError(t, err, wantErr.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// A parsed response's annotations do not change when the policy's answer
// buffer is reused.
func TestParseValidationResponse_auditAnnotationsAreCopies(t *testing.T) {
	data := []byte(`{"accepted":true,"audit_annotations":{"rule":"create: absent, inject","user":"{\"user\":\"a\"}"}}`)
	vr, err := ParseValidationResponse(data)
	require.NoError(t, err)
	for i := range data {
		data[i] = 'x'
	}
	assert.Equal(t, map[string]string{"rule": "create: absent, inject", "user": `{"user":"a"}`}, vr.AuditAnnotations)
}
