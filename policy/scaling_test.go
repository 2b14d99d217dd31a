package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// TestScaled_answers checks the answer to every scaled request (every
// workload preset kind, the built-in Pod and Deployment growing in each
// dimension) up to 10,000 templates: admitted, and the object returned
// byte for byte as sent but for the annotation added to every template.
// How long the answers take is BenchmarkScaling's to show.
func TestScaled_answers(t *testing.T) {
	const key = `"` + AnnotationKey + `":`
	for _, s := range fixtures.ScaledShapes() {
		for _, n := range []int{0, 1, 2, 3, 10, 10000} {
			if n == 0 && s.Unit != "worker groups" {
				continue // the head group's template is there at any size
			}
			t.Run(s.Name+"/n="+strconv.Itoa(n), func(t *testing.T) {
				obj, want := s.Object(n), s.Mutated(n)
				require.NotContains(t, string(obj), key, "the request carries no annotation")
				require.Equal(t, s.Templates(n), strings.Count(string(want), key), "the expected object has one per template")
				out, err := validate(s.Payload(n))
				require.NoError(t, err)
				resp := gjson.ParseBytes(out)
				require.True(t, resp.Get("accepted").Bool(), "answer: %.300s", out)
				got := resp.Get("mutated_object").Raw
				if got != string(want) {
					i := firstDiff(got, string(want))
					require.Failf(t, "mutated object differs", "at byte %d of %d: got %.200q, want %.200q",
						i, len(want), got[min(i, len(got)):], want[min(i, len(want)):])
				}
			})
		}
	}
}

// firstDiff is the offset of the first byte where a and b differ.
func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
