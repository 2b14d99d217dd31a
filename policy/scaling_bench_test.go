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
// through the built module. Each size after the first also reports
// x/decade, its ns/op over the previous size's: about 10 where the cost is
// linear, about 100 where it is quadratic (docs/PERFORMANCE.md).
func BenchmarkScaling(b *testing.B) {
	for _, s := range fixtures.ScaledShapes() {
		prev := 0.0
		for _, n := range fixtures.ScaledSizes {
			payload := s.Payload(n)
			name := "shape=" + strings.ReplaceAll(s.Name, "/", "-") + "/n=" + strconv.Itoa(n) + "/impl=native"
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				for b.Loop() {
					if _, err := validate(payload); err != nil {
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
