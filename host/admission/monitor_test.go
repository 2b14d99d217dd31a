package admission

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestMonitor_refusalBecomesAdmission(t *testing.T) {
	patchType := PatchTypeJSONPatch
	refused := &Response{
		UID: "u", Allowed: false, Status: &Status{Code: 403, Message: "user alice is not allowed"},
		// A policy could answer a refusal with a mutation: it must not be applied.
		PatchType: &patchType, Patch: []byte(`[{"op":"add","path":"/x","value":1}]`),
		Warnings:         []string{"queue check skipped: x"},
		AuditAnnotations: map[string]string{"rule": "update: changed", "claimed": `{"user":"bob"}`},
	}
	out, changed := Monitor(refused)
	assert.True(t, changed)
	assert.Equal(t, &Response{
		UID: "u", Allowed: true,
		Warnings: []string{"queue check skipped: x", "monitor mode: would be refused: user alice is not allowed (code 403)"},
		AuditAnnotations: map[string]string{"rule": "update: changed", "claimed": `{"user":"bob"}`,
			AuditMonitor: AuditMonitorWouldRefuse},
	}, out)
	assert.False(t, refused.Allowed, "the policy's response is not changed")
	assert.NotContains(t, refused.AuditAnnotations, AuditMonitor)
	assert.Len(t, refused.Warnings, 1)
}

func TestMonitor_acceptedUnchanged(t *testing.T) {
	patchType := PatchTypeJSONPatch
	for _, resp := range []*Response{
		{UID: "u", Allowed: true},
		{UID: "u", Allowed: true, PatchType: &patchType, Patch: []byte(`[]`), Warnings: []string{"w"},
			AuditAnnotations: map[string]string{"rule": "create: absent, inject"}},
	} {
		out, changed := Monitor(resp)
		assert.False(t, changed)
		assert.Same(t, resp, out, "an accepted answer, its patch included, is sent as it is")
	}
}

func TestMonitor_errorsAndBounds(t *testing.T) {
	out, _ := Monitor(Errored("u", CodeEvaluationFailed, nil))
	assert.Equal(t, []string{"monitor mode: would be refused: the policy refused the request (code 500)"}, out.Warnings)

	huge := strings.Repeat("ü", 5000)
	out, _ = Monitor(&Response{UID: "u", Status: &Status{Message: huge}})
	w := out.Warnings[0]
	assert.Less(t, len(w), maxMonitorMessage+64)
	assert.True(t, utf8.ValidString(w))
	assert.True(t, strings.HasSuffix(w, "... (10000 bytes)"), w[len(w)-30:])
}
