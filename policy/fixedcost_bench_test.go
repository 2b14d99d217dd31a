package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// BenchmarkFixedCost times natively the DELETE that host/conformance's
// BenchmarkFixedCost times through the built module.
func BenchmarkFixedCost(b *testing.B) {
	payload, err := fixtures.RequestPayload("delete-pod")
	require.NoError(b, err)
	b.Run("op=validate-delete/impl=native", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if _, err := validate(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
