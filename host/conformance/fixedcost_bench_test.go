package conformance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// BenchmarkFixedCost times what every call through the engine costs
// whatever the request: protocol_version (the waPC round trip and the
// guest's dispatch, no payload), and a DELETE the policy passes through
// after validating its payload (testdata/requests/delete-pod.json). The
// policy's BenchmarkFixedCost times the same DELETE natively.
func BenchmarkFixedCost(b *testing.B) {
	e, err := engine.New(b.Context(), policyWasm(b), engine.Options{MaxInstances: 1})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	b.Run("op=protocol_version/impl=wasm", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Invoke(b.Context(), engine.OperationProtocolVersion, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	payload, err := fixtures.RequestPayload("delete-pod")
	require.NoError(b, err)
	b.Run("op=validate-delete/impl=wasm", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if _, err := e.Validate(b.Context(), payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
