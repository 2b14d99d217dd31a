package conformance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// benchFixtures loads the benchmark fixtures' validate payloads.
func benchFixtures(b *testing.B) (names []string, payloads map[string][]byte) {
	b.Helper()
	names, err := fixtures.BenchFixtures()
	require.NoError(b, err)
	require.NotEmpty(b, names)
	payloads = make(map[string][]byte, len(names))
	for _, name := range names {
		payloads[name], err = fixtures.BenchPayload(name)
		require.NoError(b, err)
	}
	return names, payloads
}

// BenchmarkEvaluate times one validate of the built module through
// host/engine, with one reused instance, on the fixtures that policy's
// BenchmarkEvaluate times natively (impl=native).
func BenchmarkEvaluate(b *testing.B) {
	names, payloads := benchFixtures(b)
	e, err := engine.New(b.Context(), policyWasm(b), engine.Options{MaxInstances: 1})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	for _, name := range names {
		payload := payloads[name]
		b.Run("fixture="+name+"/impl=wasm", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				if _, err := e.Validate(b.Context(), payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInstances compares the two instance strategies on the same
// fixtures: a fresh instance for every evaluation (engine.Options.SingleUse,
// what Kubewarden's policy-server does), against reusing one (our default).
// A fresh instance also makes the policy parse its settings again.
func BenchmarkInstances(b *testing.B) {
	names, payloads := benchFixtures(b)
	wasm := policyWasm(b)
	strategies := []struct {
		name      string
		singleUse bool
	}{
		{name: "fresh", singleUse: true},
		{name: "pooled", singleUse: false},
	}
	for _, name := range names {
		payload := payloads[name]
		for _, s := range strategies {
			e, err := engine.New(b.Context(), wasm, engine.Options{MaxInstances: 1, SingleUse: s.singleUse})
			require.NoError(b, err)
			b.Run("fixture="+name+"/strategy="+s.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := e.Validate(b.Context(), payload); err != nil {
						b.Fatal(err)
					}
				}
			})
			require.NoError(b, e.Close(context.Background()))
		}
	}
}
