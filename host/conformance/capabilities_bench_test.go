package conformance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

// BenchmarkCapabilities is the added cost of the settings that ask the
// host (trustRBAC's can_i, queueCheck's get_resource and placement) against
// the same Pod without them, in the pooled engine with the capabilities
// answered from the fixtures' cluster directory (the cost of the module
// and the host, without an API server's).
//
//	go test ./host/conformance -run '^$' -bench Capabilities
func BenchmarkCapabilities(b *testing.B) {
	benchFixtureCases(b,
		"pod/create/absent/inject",
		"pod/queue/other-scheduler",
		"pod/queue/enforce/placed",
		"pod/queue/enforce/refused",
		"pod/create/present/external-user",
		"pod/create/present/rbac/granted",
		"pod/provenance/owner/pod-copies-raycluster",
		"pod/provenance/owner/pod-inherits-raycluster",
		"pod/provenance/pod-token/executor-of-driver",
		"workloads/kuberay/create-stamps-every-template",
	)
}

// benchFixtureCases runs each named fixture case as a sub-benchmark in one
// pooled engine whose capabilities are answered from the fixtures' cluster
// directory.
func benchFixtureCases(b *testing.B, names ...string) {
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
	for _, name := range names {
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
