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

// BenchmarkScaling times through the built module the scaled requests
// that policy's BenchmarkScaling times natively (impl=native), with the
// same cpu-ns/op and x/decade columns: impl=wasm with one reused instance
// (serve's default), impl=wasm-fresh with a fresh instance per call
// (engine.Options.SingleUse). A reused instance whose memory grew past
// RecycleMemoryPages is retired after the call, so at the sizes where that
// happens every call pays for a fresh instance growing its memory from
// nothing, a step in the wasm column that wasm-fresh, paying it at every
// size, does not have. The deadline and the work budget are raised far
// above serve's defaults so that a cost that grows too fast shows as a
// number rather than a failed call; every answer is checked to admit the
// object.
func BenchmarkScaling(b *testing.B) {
	for _, impl := range []struct {
		name      string
		singleUse bool
	}{{"wasm", false}, {"wasm-fresh", true}} {
		e, err := engine.New(b.Context(), policyWasm(b), engine.Options{
			MaxInstances: 1, Timeout: 10 * time.Minute, Budget: 1 << 62, SingleUse: impl.singleUse,
		})
		require.NoError(b, err)
		b.Cleanup(func() { _ = e.Close(context.Background()) })
		for _, s := range fixtures.ScaledShapes() {
			var growth fixtures.Growth
			for _, n := range fixtures.ScaledSizes {
				payload := s.Payload(n)
				name := "shape=" + strings.ReplaceAll(s.Name, "/", "-") + "/n=" + strconv.Itoa(n) + "/impl=" + impl.name
				b.Run(name, func(b *testing.B) {
					out, err := e.Validate(b.Context(), payload)
					require.NoError(b, err)
					require.True(b, gjson.GetBytes(out, "accepted").Bool(), "answer: %.300s", out)
					b.ReportAllocs()
					b.SetBytes(int64(len(payload)))
					start := fixtures.CPUTime()
					for b.Loop() {
						if _, err := e.Validate(b.Context(), payload); err != nil {
							b.Fatal(err)
						}
					}
					cpu := float64(fixtures.CPUTime()-start) / float64(b.N)
					b.ReportMetric(cpu, "cpu-ns/op")
					if r := growth.Next(cpu); r > 0 {
						b.ReportMetric(r, "x/decade")
					}
				})
			}
		}
	}
}
