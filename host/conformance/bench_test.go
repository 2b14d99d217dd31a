package conformance

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// BenchmarkOurHost_validate times one validate of the built module through
// host/engine, on the requests BenchmarkValidate (policy/) times natively.
func BenchmarkOurHost_validate(b *testing.B) {
	wasm := policyWasm(b)
	e, err := engine.New(b.Context(), wasm, engine.Options{MaxInstances: 1})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	for _, name := range fixtures.BenchRequests {
		payload, err := fixtures.BenchPayload(name)
		require.NoError(b, err)
		b.Run(filepath.Base(name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Validate(b.Context(), payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
