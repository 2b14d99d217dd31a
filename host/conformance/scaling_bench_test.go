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
// natively (impl=native), with the same cpu-ns/op and x/decade columns. The deadline and
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
		var growth fixtures.Growth
		for _, n := range fixtures.ScaledSizes {
			payload := s.Payload(n)
			name := "shape=" + strings.ReplaceAll(s.Name, "/", "-") + "/n=" + strconv.Itoa(n) + "/impl=wasm"
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
