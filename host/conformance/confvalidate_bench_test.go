package conformance

import "testing"

// BenchmarkConfigValidation is the cost of configValidation's cases in the
// pooled engine, capabilities answered from the fixtures' cluster
// directory: a ConfigMap with the check off, one that is not YuniKorn's
// (nothing read), and YuniKorn's maps checked (one get_resource, the
// merge, the parse and core's validation).
//
//	go test ./host/conformance -run '^$' -bench ConfigValidation
func BenchmarkConfigValidation(b *testing.B) {
	benchFixtureCases(b,
		"pass/configmap",
		"config-validation/pass/other-name",
		"config-validation/valid/create",
		"config-validation/refused/types",
		"config-validation/refused/limit-hierarchy",
		"config-validation/gz/invalid",
		"config-validation/defaults/overridden",
	)
}
