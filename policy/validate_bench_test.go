package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// BenchmarkEvaluate times the policy compiled natively on the benchmark
// fixtures. host/conformance times the same fixtures through the built
// .wasm (impl=wasm); benchstat and perfkit pair them by name.
func BenchmarkEvaluate(b *testing.B) {
	names, err := fixtures.BenchFixtures()
	require.NoError(b, err)
	require.NotEmpty(b, names)
	for _, name := range names {
		payload, err := fixtures.BenchPayload(name)
		require.NoError(b, err)
		b.Run("fixture="+name+"/impl=native", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				if _, err := validate(payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
