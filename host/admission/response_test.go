package admission

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

func TestParseValidationResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   string
		want    *ValidationResponse
		wantErr string
	}{
		{
			name:  "accept",
			input: `{"accepted":true}`,
			want:  &ValidationResponse{Accepted: true},
		},
		{
			name:  "reject with message and code",
			input: `{"accepted":false,"message":"no user","code":400}`,
			want:  &ValidationResponse{Accepted: false, Message: ptr("no user"), Code: ptr[int32](400)},
		},
		{
			name: "everything",
			input: ` {"accepted":true,"mutated_object":{"b":1,  "a":12345678901234567890},` +
				`"audit_annotations":{"k":"v"},"warnings":["w1","w2"],"extra":{"ignored":true}} `,
			want: &ValidationResponse{
				Accepted:         true,
				MutatedObject:    json.RawMessage(`{"b":1,  "a":12345678901234567890}`),
				AuditAnnotations: map[string]string{"k": "v"},
				Warnings:         []string{"w1", "w2"},
			},
		},
		{
			name:  "nulls are absent",
			input: `{"accepted":true,"message":null,"code":null,"mutated_object":null,"audit_annotations":null,"warnings":null}`,
			want:  &ValidationResponse{Accepted: true},
		},
		{
			name:    "missing accepted",
			input:   `{"message":"x"}`,
			wantErr: "decode validation response: field accepted is missing",
		},
		{
			name:    "accepted is a string",
			input:   `{"accepted":"true"}`,
			wantErr: `decode validation response: field accepted must be a boolean, got "true"`,
		},
		{
			name:    "accepted is null",
			input:   `{"accepted":null}`,
			wantErr: "decode validation response: field accepted must be a boolean, got null",
		},
		{
			name:    "accepted in another case",
			input:   `{"Accepted":true}`,
			wantErr: "decode validation response: field accepted is missing",
		},
		{
			name:    "message is a number",
			input:   `{"accepted":false,"message":1}`,
			wantErr: "decode validation response: field message:",
		},
		{
			name:    "code out of range",
			input:   `{"accepted":false,"code":4294967296}`,
			wantErr: "decode validation response: field code:",
		},
		{
			name:    "warnings not strings",
			input:   `{"accepted":true,"warnings":[1]}`,
			wantErr: "decode validation response: field warnings:",
		},
		{
			name:    "array",
			input:   `[true]`,
			wantErr: "decode validation response: must be a JSON object, got array",
		},
		{
			name:    "invalid JSON",
			input:   `{"accepted":tru}`,
			wantErr: "decode validation response: invalid character",
		},
		{
			name:    "empty",
			input:   ``,
			wantErr: "decode validation response: unexpected end of JSON input",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseValidationResponse([]byte(tc.input))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.True(t, got.MutatedObject == nil || sameSlice(got.MutatedObject, got.validMutated), "the mutated object is marked as validated")
			got.validMutated, got.doc = nil, nil
			assert.Equal(t, tc.want, got)
		})
	}
}

// userInfoPatch is the patch the user.info policy is expected to produce for
// respondPod.
const userInfoPatch = `[{"op":"add","path":"/metadata/annotations/yunikorn.apache.org~1user.info",` +
	`"value":"{\"user\":\"alice\",\"groups\":[\"system:authenticated\"]}"}]`

// respondPod is the request.object used by the Respond tests.
const respondPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"team":"a"}},` +
	`"spec":{"containers":[{"name":"c","image":"busybox"}],"priority":12345678901234567890}}`

func TestRespond(t *testing.T) {
	t.Parallel()
	create := &Request{UID: "uid-1", Object: json.RawMessage(respondPod)}
	del := &Request{UID: "uid-2"}
	mutated := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"team":"a",` +
		`"yunikorn.apache.org/user.info":"{\"user\":\"alice\",\"groups\":[\"system:authenticated\"]}"}},` +
		`"spec":{"containers":[{"name":"c","image":"busybox"}],"priority":12345678901234567890}}`
	// Same object, other key order and spacing: not a change.
	reordered := `{"spec":{"priority":12345678901234567890,"containers":[{"image":"busybox","name":"c"}]},` +
		` "metadata":{"annotations":{"team":"a"},"name":"p"},"kind":"Pod","apiVersion":"v1"}`
	tests := []struct {
		name     string
		req      *Request
		vr       *ValidationResponse
		want     *Response
		wantJSON string
	}{
		{
			name:     "accept",
			req:      create,
			vr:       &ValidationResponse{Accepted: true},
			want:     &Response{UID: "uid-1", Allowed: true},
			wantJSON: `{"uid":"uid-1","allowed":true,"auditAnnotations":null,"warnings":null}`,
		},
		{
			name: "reject with message and code",
			req:  create,
			vr:   &ValidationResponse{Accepted: false, Message: ptr("user not allowed"), Code: ptr[int32](403)},
			want: &Response{UID: "uid-1", Allowed: false, Status: &Status{Message: "user not allowed", Code: 403}},
			wantJSON: `{"uid":"uid-1","allowed":false,"status":{"message":"user not allowed","code":403},` +
				`"auditAnnotations":null,"warnings":null}`,
		},
		{
			name: "reject with message only",
			req:  create,
			vr:   &ValidationResponse{Accepted: false, Message: ptr("no")},
			want: &Response{UID: "uid-1", Allowed: false, Status: &Status{Message: "no"}},
			wantJSON: `{"uid":"uid-1","allowed":false,"status":{"message":"no"},` +
				`"auditAnnotations":null,"warnings":null}`,
		},
		{
			name:     "reject without message or code",
			req:      create,
			vr:       &ValidationResponse{Accepted: false},
			want:     &Response{UID: "uid-1", Allowed: false},
			wantJSON: `{"uid":"uid-1","allowed":false,"auditAnnotations":null,"warnings":null}`,
		},
		{
			name: "accept with message keeps status, as kwctl",
			req:  create,
			vr:   &ValidationResponse{Accepted: true, Message: ptr("fine")},
			want: &Response{UID: "uid-1", Allowed: true, Status: &Status{Message: "fine"}},
			wantJSON: `{"uid":"uid-1","allowed":true,"status":{"message":"fine"},` +
				`"auditAnnotations":null,"warnings":null}`,
		},
		{
			name: "warnings and audit annotations",
			req:  create,
			vr: &ValidationResponse{
				Accepted:         true,
				Warnings:         []string{"deprecated field", "second"},
				AuditAnnotations: map[string]string{"b": "2", "a": "1"},
			},
			want: &Response{
				UID:              "uid-1",
				Allowed:          true,
				Warnings:         []string{"deprecated field", "second"},
				AuditAnnotations: map[string]string{"a": "1", "b": "2"},
			},
			wantJSON: `{"uid":"uid-1","allowed":true,"auditAnnotations":{"a":"1","b":"2"},` +
				`"warnings":["deprecated field","second"]}`,
		},
		{
			name: "mutate",
			req:  create,
			vr:   &ValidationResponse{Accepted: true, MutatedObject: json.RawMessage(mutated)},
			want: &Response{
				UID:       "uid-1",
				Allowed:   true,
				PatchType: ptr("JSONPatch"),
				Patch:     []byte(userInfoPatch),
			},
			wantJSON: `{"uid":"uid-1","allowed":true,"patchType":"JSONPatch","patch":"` +
				base64.StdEncoding.EncodeToString([]byte(userInfoPatch)) +
				`","auditAnnotations":null,"warnings":null}`,
		},
		{
			name:     "mutated object equal to original gives no patch",
			req:      create,
			vr:       &ValidationResponse{Accepted: true, MutatedObject: json.RawMessage(reordered)},
			want:     &Response{UID: "uid-1", Allowed: true},
			wantJSON: `{"uid":"uid-1","allowed":true,"auditAnnotations":null,"warnings":null}`,
		},
		{
			name: "mutate a request without object",
			req:  del,
			vr:   &ValidationResponse{Accepted: true, MutatedObject: json.RawMessage(`{"a":1}`), Warnings: []string{"w"}},
			want: &Response{UID: "uid-2", Allowed: false, Status: &Status{Message: errMutateWithoutObject.Error(), Code: 500}},
			wantJSON: `{"uid":"uid-2","allowed":false,"status":{"message":"` + errMutateWithoutObject.Error() +
				`","code":500},"auditAnnotations":null,"warnings":null}`,
		},
		{
			name: "mutated object with duplicate keys",
			req:  create,
			vr:   &ValidationResponse{Accepted: true, MutatedObject: json.RawMessage(`{"a":1,"a":2}`)},
			want: &Response{UID: "uid-1", Allowed: false, Status: &Status{
				Message: `create patch: decode mutated document: at "": duplicate key "a"`,
				Code:    500,
			}},
			wantJSON: `{"uid":"uid-1","allowed":false,"status":{"message":` +
				`"create patch: decode mutated document: at \"\": duplicate key \"a\"","code":500},` +
				`"auditAnnotations":null,"warnings":null}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Respond(tc.req, tc.vr)
			assert.Equal(t, tc.want, got)
			gotJSON, err := json.Marshal(got)
			require.NoError(t, err)
			assert.Equal(t, tc.wantJSON, string(gotJSON))
		})
	}
}

func TestRespond_patchDecodes(t *testing.T) {
	t.Parallel()
	vr, err := ParseValidationResponse([]byte(`{"accepted":true,"mutated_object":{"spec":{"replicas":3,"big":12345678901234567890}}}`))
	require.NoError(t, err)
	req := &Request{UID: "u", Object: json.RawMessage(`{"spec":{"replicas":1,"big":12345678901234567890}}`)}

	out, err := json.Marshal(Respond(req, vr))
	require.NoError(t, err)
	var wire struct {
		PatchType string `json:"patchType"`
		Patch     string `json:"patch"`
	}
	require.NoError(t, json.Unmarshal(out, &wire))
	patch, err := base64.StdEncoding.DecodeString(wire.Patch)
	require.NoError(t, err)
	assert.Equal(t, "JSONPatch", wire.PatchType)
	assert.JSONEq(t, `[{"op":"replace","path":"/spec/replicas","value":3}]`, string(patch))
}

func TestErrored(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		uid      string
		code     int32
		err      error
		wantJSON string
	}{
		{
			name: "evaluation failure",
			uid:  "u",
			code: CodeEvaluationFailed,
			err:  errors.New("guest trapped: unreachable"),
			wantJSON: `{"uid":"u","allowed":false,"status":{"message":"guest trapped: unreachable","code":500},` +
				`"auditAnnotations":null,"warnings":null}`,
		},
		{
			name: "stack trace kept out of the response",
			uid:  "u",
			code: CodeEvaluationFailed,
			err:  errors.New("invoke \"validate\": guest trapped: wasm error: unreachable\nwasm stack trace:\n\t.$4(i32,i32) i32"),
			wantJSON: `{"uid":"u","allowed":false,"status":{"message":"invoke \"validate\": guest trapped: wasm error: unreachable","code":500},` +
				`"auditAnnotations":null,"warnings":null}`,
		},
		{
			name:     "nil error",
			uid:      "",
			code:     400,
			err:      nil,
			wantJSON: `{"uid":"","allowed":false,"status":{"code":400},"auditAnnotations":null,"warnings":null}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(Errored(tc.uid, tc.code, tc.err))
			require.NoError(t, err)
			assert.Equal(t, tc.wantJSON, string(got))
		})
	}
}

func TestMarshal(t *testing.T) {
	t.Parallel()
	got, err := Marshal(&Response{UID: "u", Status: &Status{Message: "replicas must be <= 5 & > 0", Code: 400}})
	require.NoError(t, err)
	assert.Equal(t,
		`{"uid":"u","allowed":false,"status":{"message":"replicas must be <= 5 & > 0","code":400},`+
			`"auditAnnotations":null,"warnings":null}`,
		string(got))
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	pod, err := ParseRequest([]byte(`{"uid":"u1","operation":"CREATE","object":{"metadata":{"name":"p"}}}`))
	require.NoError(t, err)
	del, err := ParseRequest([]byte(`{"uid":"u2","operation":"DELETE","object":null}`))
	require.NoError(t, err)
	guestFailed := errors.New("guest trapped")

	tests := []struct {
		name        string
		req         *Request
		answer      string
		callErr     error
		wantAllowed bool
		wantPatch   bool
		wantErr     string
		wantBad     bool
	}{
		{name: "accepted", req: pod, answer: `{"accepted":true}`, wantAllowed: true},
		{name: "mutated", req: pod, answer: `{"accepted":true,"mutated_object":{"metadata":{"name":"q"}}}`,
			wantAllowed: true, wantPatch: true},
		{name: "the call fails", req: pod, callErr: guestFailed, wantErr: "guest trapped"},
		{name: "not a ValidationResponse", req: pod, answer: `{"accepted": tru`, wantErr: "decode validation response", wantBad: true},
		{name: "mutation without object", req: del, answer: `{"accepted":true,"mutated_object":{}}`,
			wantErr: "the policy tried to mutate a request without object", wantBad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var seen []byte
			resp, err := Evaluate(t.Context(), func(_ context.Context, payload []byte) ([]byte, error) {
				seen = payload
				return []byte(tc.answer), tc.callErr
			}, tc.req, json.RawMessage(`{"k":1}`))
			assert.Equal(t, `{"request":`+string(tc.req.Raw)+`,"settings":{"k":1}}`, string(seen))
			require.NotNil(t, resp)
			assert.Equal(t, tc.req.UID, resp.UID)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.wantAllowed, resp.Allowed)
				assert.Equal(t, tc.wantPatch, resp.Patch != nil)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			assert.Equal(t, tc.wantBad, errors.Is(err, ErrBadResponse))
			assert.False(t, resp.Allowed)
			require.NotNil(t, resp.Status)
			assert.Equal(t, CodeEvaluationFailed, resp.Status.Code)
			assert.Equal(t, err.Error(), resp.Status.Message, "the error's text is not changed by the marking")
			if tc.callErr != nil {
				assert.ErrorIs(t, err, guestFailed)
			}
		})
	}
}

// The differ trusts only what the parsers validated: an object swapped in
// after parsing is validated again.
func TestRespond_validatesReplacedObjects(t *testing.T) {
	t.Parallel()
	req, err := ParseRequest([]byte(`{"uid":"u","object":{"a":1}}`))
	require.NoError(t, err)
	vr, err := ParseValidationResponse([]byte(`{"accepted":true,"mutated_object":{"a":2}}`))
	require.NoError(t, err)

	resp, err := respond(context.Background(), req, vr)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"op":"replace","path":"/a","value":2}]`, string(resp.Patch))

	swapped := *req
	swapped.Object = []byte(`{"a":1`)
	_, err = respond(context.Background(), &swapped, vr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "decode original document")

	mutated := *vr
	mutated.MutatedObject = []byte(`{"a":[`)
	_, err = respond(context.Background(), req, &mutated)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "decode mutated document")
}
