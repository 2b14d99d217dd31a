package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// BenchmarkValidate times the policy compiled natively on the requests that
// host/conformance's BenchmarkOurHost_validate gives the Wasm build.
func BenchmarkValidate(b *testing.B) {
	for _, name := range fixtures.BenchRequests {
		payload, err := fixtures.BenchPayload(name)
		require.NoError(b, err)
		b.Run(filepath.Base(name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := validate(payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
