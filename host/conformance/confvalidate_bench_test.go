package conformance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

// BenchmarkConfigValidation is the cost of configValidation's cases in the
// pooled engine, capabilities answered from the fixtures' cluster
// directory: a ConfigMap with the check off, one that is not YuniKorn's
// (nothing read), and YuniKorn's maps checked (one get_resource, the
// merge, the parse and core's validation).
//
//	go test ./host/conformance -run '^$' -bench ConfigValidation
func BenchmarkConfigValidation(b *testing.B) {
	wasm := policyWasm(b)
	e, err := engine.New(b.Context(), wasm, engine.Options{MaxInstances: 1, HostCalls: fixturecheck.ClusterHostCalls(b, nil)})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	cases, err := fixtures.Load()
	require.NoError(b, err)
	byName := map[string]fixtures.Case{}
	for _, c := range cases {
		byName[c.Name] = c
	}
	for _, name := range []string{
		"pass/configmap",
		"config-validation/pass/other-name",
		"config-validation/valid/create",
		"config-validation/refused/types",
		"config-validation/refused/limit-hierarchy",
		"config-validation/gz/invalid",
		"config-validation/defaults/overridden",
	} {
		c, ok := byName[name]
		require.True(b, ok, name)
		payload := c.Payload()
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Validate(b.Context(), payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
