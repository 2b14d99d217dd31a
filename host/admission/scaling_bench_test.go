package admission_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// BenchmarkScaling times the host's part of an admission of each scaled
// request (the guest's, natively and in Wasm, is timed by the policy's and
// host/conformance's BenchmarkScaling): parsing the review, building the
// guest's payload, reading its answer (the mutated object, as the policy
// writes it), diffing it against the object into a JSON Patch, and
// encoding the AdmissionReview that carries it. The cpu-ns/op and x/decade
// columns are those of the guest's benchmarks: linear is about 10x per
// decade.
func BenchmarkScaling(b *testing.B) {
	for _, s := range fixtures.ScaledShapes() {
		var growth fixtures.Growth
		for _, n := range fixtures.ScaledSizes {
			review := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + string(s.Request(n)) + `}`)
			answer := []byte(`{"accepted":true,"mutated_object":` + string(s.Mutated(n)) + `}`)
			validate := func(context.Context, []byte) ([]byte, error) { return answer, nil }
			name := "shape=" + strings.ReplaceAll(s.Name, "/", "-") + "/n=" + strconv.Itoa(n) + "/impl=host"
			b.Run(name, func(b *testing.B) {
				check, err := admission.ParseReview(review)
				require.NoError(b, err)
				resp, err := admission.Evaluate(b.Context(), validate, check, []byte(s.Settings()))
				require.NoError(b, err)
				require.True(b, resp.Allowed)
				require.NotEmpty(b, resp.Patch)
				b.ReportAllocs()
				b.SetBytes(int64(len(review)))
				start := fixtures.CPUTime()
				for b.Loop() {
					req, err := admission.ParseReview(review)
					if err != nil {
						b.Fatal(err)
					}
					resp, err := admission.Evaluate(b.Context(), validate, req, []byte(s.Settings()))
					if err != nil {
						b.Fatal(err)
					}
					if _, err := admission.Review(resp); err != nil {
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
