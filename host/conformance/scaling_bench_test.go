package conformance

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// BenchmarkScaling times through the built module, with one reused
// instance, the scaled requests that policy's BenchmarkScaling times
// natively (impl=native), with the same x/decade column. The deadline and
// the work budget are raised far above serve's defaults so that a cost
// that grows too fast shows as a number rather than a failed call; every
// answer is checked to admit the object.
func BenchmarkScaling(b *testing.B) {
	e, err := engine.New(b.Context(), policyWasm(b), engine.Options{
		MaxInstances: 1, Timeout: 10 * time.Minute, Budget: 1 << 62,
	})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	for _, s := range fixtures.ScaledShapes() {
		prev := 0.0
		for _, n := range fixtures.ScaledSizes {
			payload := s.Payload(n)
			name := "shape=" + strings.ReplaceAll(s.Name, "/", "-") + "/n=" + strconv.Itoa(n) + "/impl=wasm"
			b.Run(name, func(b *testing.B) {
				out, err := e.Validate(b.Context(), payload)
				require.NoError(b, err)
				require.True(b, gjson.GetBytes(out, "accepted").Bool(), "answer: %.300s", out)
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				for b.Loop() {
					if _, err := e.Validate(b.Context(), payload); err != nil {
						b.Fatal(err)
					}
				}
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if prev > 0 {
					b.ReportMetric(ns/prev, "x/decade")
				}
				prev = ns
			})
		}
	}
}
