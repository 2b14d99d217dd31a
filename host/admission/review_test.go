package admission

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// podRequest is a bare AdmissionRequest with odd spacing, non-sorted keys and
// an integer beyond float64 precision, to show that bytes are kept verbatim.
const podRequest = `{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002", "kind":{"group":"","version":"v1","kind":"Pod"},
  "operation":"CREATE","namespace":"team-a","name":"sleep","subResource":"",
  "userInfo":{"username":"alice","groups":["devs","system:authenticated"]},
  "object":{"metadata":{"name":"sleep",  "annotations":{"z":"1","a":"2"}},"spec":{"big":12345678901234567890}},
  "oldObject":null,"dryRun":false}`

// podObject is the request.object inside podRequest, byte for byte.
const podObject = `{"metadata":{"name":"sleep",  "annotations":{"z":"1","a":"2"}},"spec":{"big":12345678901234567890}}`

func TestParseRequest(t *testing.T) {
	t.Parallel()
	podWant := &Request{
		Raw:       json.RawMessage(podRequest),
		UID:       "705ab4f5-6393-11e8-b7cc-42010a800002",
		Object:    json.RawMessage(podObject),
		Kind:      GroupVersionKind{Group: "", Version: "v1", Kind: "Pod"},
		Operation: "CREATE",
		Namespace: "team-a",
		Name:      "sleep",
		UserName:  "alice",
	}
	tests := []struct {
		name    string
		input   string
		want    *Request
		wantErr string
	}{
		{
			name:  "bare request",
			input: podRequest,
			want:  podWant,
		},
		{
			name:  "bare request with surrounding whitespace",
			input: "\n  " + podRequest + "\n",
			want:  podWant,
		},
		{
			name: "full review",
			input: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` +
				podRequest + `}`,
			want: podWant,
		},
		{
			name:  "review with request first and spaces",
			input: `{ "request" : ` + podRequest + ` , "kind" : "AdmissionReview" }`,
			want:  podWant,
		},
		{
			name:  "request without uid",
			input: `{"operation":"CREATE","object":{"a":1}}`,
			want: &Request{
				Raw:       json.RawMessage(`{"operation":"CREATE","object":{"a":1}}`),
				Object:    json.RawMessage(`{"a":1}`),
				Operation: "CREATE",
			},
		},
		{
			name:  "null uid",
			input: `{"uid":null}`,
			want:  &Request{Raw: json.RawMessage(`{"uid":null}`)},
		},
		{
			name:  "delete request with null object",
			input: `{"uid":"u","operation":"DELETE","object":null,"oldObject":{"a":1}}`,
			want: &Request{
				Raw:       json.RawMessage(`{"uid":"u","operation":"DELETE","object":null,"oldObject":{"a":1}}`),
				UID:       "u",
				Operation: "DELETE",
			},
		},
		{
			name:  "keys are case sensitive",
			input: `{"UID":"u","Object":{}}`,
			want:  &Request{Raw: json.RawMessage(`{"UID":"u","Object":{}}`)},
		},
		{
			name:  "malformed log fields are ignored",
			input: `{"uid":"u","kind":"Pod","operation":7,"userInfo":[]}`,
			want: &Request{
				Raw: json.RawMessage(`{"uid":"u","kind":"Pod","operation":7,"userInfo":[]}`),
				UID: "u",
			},
		},
		{
			name:    "review without request",
			input:   `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
			wantErr: "decode admission review: field request is missing",
		},
		{
			name:    "review with null request",
			input:   `{"kind":"AdmissionReview","request":null}`,
			wantErr: "decode admission review: field request is missing",
		},
		{
			name:    "review with non-object request",
			input:   `{"kind":"AdmissionReview","request":[1]}`,
			wantErr: "decode admission review: field request: must be a JSON object, got array",
		},
		{
			name:    "array",
			input:   `[{"uid":"u"}]`,
			wantErr: "decode admission input: must be a JSON object, got array",
		},
		{
			name:    "string",
			input:   `"AdmissionReview"`,
			wantErr: "decode admission input: must be a JSON object, got string",
		},
		{
			name:    "null",
			input:   `null`,
			wantErr: "decode admission input: must be a JSON object, got null",
		},
		{
			name:    "invalid JSON",
			input:   `{"uid":"u",`,
			wantErr: "decode admission input: unexpected end of JSON input",
		},
		{
			name:    "trailing data",
			input:   `{"uid":"u"} {}`,
			wantErr: "decode admission input: invalid character '{' after top-level value",
		},
		{
			name:    "empty",
			input:   "  \n",
			wantErr: "decode admission input: unexpected end of JSON input",
		},
		{
			name:    "uid not a string",
			input:   `{"uid":42}`,
			wantErr: "decode admission request: field uid must be a string",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRequest([]byte(tc.input))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.True(t, got.Object == nil || sameSlice(got.Object, got.validObject), "the object is marked as validated")
			got.validObject, got.doc = nil, nil
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestValidationPayload(t *testing.T) {
	t.Parallel()
	req := &Request{Raw: json.RawMessage(`{"uid":"u", "n":12345678901234567890}`)}
	tests := []struct {
		name     string
		settings json.RawMessage
		want     string
	}{
		{
			name:     "nil settings",
			settings: nil,
			want:     `{"request":{"uid":"u", "n":12345678901234567890},"settings":{}}`,
		},
		{
			name:     "blank settings",
			settings: json.RawMessage(" \n"),
			want:     `{"request":{"uid":"u", "n":12345678901234567890},"settings":{}}`,
		},
		{
			name:     "null settings",
			settings: json.RawMessage("null"),
			want:     `{"request":{"uid":"u", "n":12345678901234567890},"settings":{}}`,
		},
		{
			name:     "settings kept verbatim",
			settings: json.RawMessage("\n{\"b\": 1, \"a\": [true]}\n"),
			want:     `{"request":{"uid":"u", "n":12345678901234567890},"settings":{"b": 1, "a": [true]}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ValidationPayload(req, tc.settings)
			assert.Equal(t, tc.want, string(got))
			assert.True(t, json.Valid(got))
		})
	}
}

func TestValidationPayload_fromParsedReview(t *testing.T) {
	t.Parallel()
	req, err := ParseRequest([]byte(`{"kind":"AdmissionReview","request":` + podRequest + `}`))
	require.NoError(t, err)
	got := ValidationPayload(req, json.RawMessage(`{"key":"value"}`))
	assert.Equal(t, `{"request":`+podRequest+`,"settings":{"key":"value"}}`, string(got))
}

func TestReview(t *testing.T) {
	t.Parallel()
	got, err := Review(&Response{UID: "abc", Allowed: false, Status: &Status{Message: "a < b & c", Code: 403}})
	require.NoError(t, err)
	assert.Equal(t,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":`+
			`{"uid":"abc","allowed":false,"status":{"message":"a < b & c","code":403},"auditAnnotations":null,"warnings":null}}`,
		string(got))
}
