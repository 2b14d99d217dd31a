package loadgen

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// sequence returns 1..n (as durations), shuffled so summarize must sort.
func sequence(n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = time.Duration(i + 1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(n, func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

func Test_summarize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		samples []time.Duration
		want    Latency
	}{
		{
			name: "none",
			want: Latency{},
		},
		{
			name:    "one",
			samples: []time.Duration{7},
			want:    Latency{Samples: 1, Min: 7, Mean: 7, P50: 7, P90: 7, P99: 7, P999: 7, Max: 7},
		},
		{
			name:    "ten",
			samples: sequence(10),
			// Nearest rank: p50 is the 5th of 10, p90 the 9th, p99 and
			// p99.9 the 10th. Mean 5.5 truncates to 5.
			want: Latency{Samples: 10, Min: 1, Mean: 5, P50: 5, P90: 9, P99: 10, P999: 10, Max: 10},
		},
		{
			name:    "thousand",
			samples: sequence(1000),
			want:    Latency{Samples: 1000, Min: 1, Mean: 500, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000},
		},
		{
			name:    "hundred thousand and one",
			samples: sequence(100_001),
			// ceil(0.999 * 100001) = 99901.
			want: Latency{Samples: 100_001, Min: 1, Mean: 50_001, P50: 50_001, P90: 90_001, P99: 99_001, P999: 99_901, Max: 100_001},
		},
		{
			name:    "outlier only in the max",
			samples: append(sequence(999), time.Hour),
			want:    Latency{Samples: 1000, Min: 1, Mean: (499500 + time.Hour) / 1000, P50: 500, P90: 900, P99: 990, P999: 999, Max: time.Hour},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, summarize(tc.samples))
		})
	}
}

func TestErrorCounts_Total(t *testing.T) {
	t.Parallel()
	var e ErrorCounts
	for c := range numClasses {
		e.count(c)
		e.count(c)
	}
	assert.Equal(t, ErrorCounts{Transport: 2, HTTPStatus: 2, BadBody: 2, UIDMismatch: 2, VerdictMismatch: 2, Late: 2}, e)
	assert.Equal(t, int64(12), e.Total())
}
