package admission

import "testing"

// BenchmarkParseValidationResponse_audit times the decoding of a refusal
// with and without the audit annotations the policy now writes on every
// answer (rule and claimed), the host's share of their cost.
func BenchmarkParseValidationResponse_audit(b *testing.B) {
	for _, c := range []struct{ name, resp string }{
		{"audit=none", `{"accepted":false,"message":"user alice with groups [dev,system:authenticated] is not allowed to set user annotation","code":403}`},
		{"audit=rule,claimed", `{"accepted":false,"message":"user alice with groups [dev,system:authenticated] is not allowed to set user annotation","code":403,` +
			`"audit_annotations":{"rule":"create: present, submitter not allowed","claimed":"{\"user\":\"bob\",\"groups\":[\"dev\",\"system:authenticated\"]}"}}`},
	} {
		data := []byte(c.resp)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseValidationResponse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
