package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// BenchmarkScaling times natively each scaled request (every workload
// preset kind, the built-in Pod and Deployment growing in each dimension)
// at 1 to 10,000 units; host/conformance's BenchmarkScaling times the same
// through the built module. Besides ns/op, each size reports cpu-ns/op, the
// processor time per call (which, unlike the clock, does not count the
// time spent waiting for a processor on a shared machine), and each size
// after the first x/decade, its cpu-ns/op over the previous size's: about
// 10 where the cost is linear, about 100 where it is quadratic
// (docs/PERFORMANCE.md).
func BenchmarkScaling(b *testing.B) {
	for _, s := range fixtures.ScaledShapes() {
		var growth fixtures.Growth
		for _, n := range fixtures.ScaledSizes {
			payload := s.Payload(n)
			name := "shape=" + strings.ReplaceAll(s.Name, "/", "-") + "/n=" + strconv.Itoa(n) + "/impl=native"
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				start := fixtures.CPUTime()
				for b.Loop() {
					if _, err := validate(payload); err != nil {
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
