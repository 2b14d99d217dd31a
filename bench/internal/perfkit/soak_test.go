package perfkit

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const metricsText = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_memstats_heap_inuse_bytes 1.2582912e+07
process_resident_memory_bytes 3.3554432e+07 1700000000000
webhook_requests_total{code="200"} 99
go_gc_duration_seconds{quantile="0.5"} NaN
malformed
`

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	m, err := parseMetrics(strings.NewReader(metricsText))
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{
		"go_goroutines":                 42,
		"go_memstats_heap_inuse_bytes":  12 << 20,
		"process_resident_memory_bytes": 32 << 20,
	}, m)
}

// soakSamples makes n samples a minute apart with RSS and goroutines given
// by functions of the sample index.
func soakSamples(n int, rss func(i int) float64, goroutines func(i int) int64) []Sample {
	samples := make([]Sample, n)
	for i := range samples {
		samples[i] = Sample{Elapsed: time.Duration(i) * time.Minute, RSS: int64(rss(i)), HWM: int64(rss(i)),
			Goroutines: goroutines(i), ProcessRSS: -1, HeapInuse: -1}
	}
	return samples
}

func TestSummarizeSoak(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	// Noise of a GC cycle: +-0.5 MiB around 40 MiB, goroutines 40 or 41.
	noisy := func(i int) float64 { return 40*mib + 0.5*mib*math.Sin(float64(i)) }
	steady := func(i int) int64 { return 40 + int64(i%2) }
	tests := []struct {
		name         string
		samples      []Sample
		rssGrowing   bool
		gorGrowing   bool
		noTrends     bool
		noGoroutines bool
	}{
		{name: "flat", samples: soakSamples(21, noisy, steady)},
		{name: "warmup growth in the first half only", samples: soakSamples(21,
			func(i int) float64 { return noisy(i) + float64(min(i, 8))*mib }, steady)},
		{name: "rss leak", samples: soakSamples(21, func(i int) float64 { return noisy(i) + 0.5*mib*float64(i) }, steady),
			rssGrowing: true},
		{name: "goroutine leak", samples: soakSamples(21, noisy, func(i int) int64 { return 40 + int64(i) }),
			gorGrowing: true},
		{name: "no metrics", samples: soakSamples(21, noisy, func(int) int64 { return -1 }), noGoroutines: true},
		{name: "too few samples", samples: soakSamples(3, noisy, steady), noTrends: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sum := SummarizeSoak(tc.samples)
			assert.Equal(t, len(tc.samples), sum.Samples)
			if tc.noTrends {
				assert.Nil(t, sum.RSS)
				assert.Nil(t, sum.Goroutines)
				return
			}
			require.NotNil(t, sum.RSS)
			assert.Equal(t, tc.rssGrowing, sum.RSS.Growing)
			if tc.noGoroutines {
				assert.Nil(t, sum.Goroutines)
			} else {
				require.NotNil(t, sum.Goroutines)
				assert.Equal(t, tc.gorGrowing, sum.Goroutines.Growing)
			}
			assert.Equal(t, tc.rssGrowing || tc.gorGrowing, sum.Growing())
			assert.Equal(t, 10*time.Minute, sum.From)
			assert.Equal(t, 20*time.Minute, sum.To)
		})
	}
}

func TestSummarizeSoak_slope(t *testing.T) {
	t.Parallel()
	// 1 MiB a minute exactly: 60 MiB/h, 10 MiB over the second half.
	sum := SummarizeSoak(soakSamples(21, func(i int) float64 { return float64(i) * (1 << 20) }, func(int) int64 { return 5 }))
	require.NotNil(t, sum.RSS)
	assert.InDelta(t, 60*(1<<20), sum.RSS.PerHour, 1)
	assert.InDelta(t, 10*(1<<20), sum.RSS.Change, 1)
	assert.InDelta(t, 10*(1<<20), sum.RSS.Intercept, 1)
	assert.Equal(t, int64(20<<20), sum.Max.RSS)
	require.NotNil(t, sum.Goroutines)
	assert.InDelta(t, 0, sum.Goroutines.PerHour, 1e-9)
}

func TestWriteSoakText(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	require.NoError(t, WriteSoakText(&b, SummarizeSoak(soakSamples(21,
		func(i int) float64 { return float64(i) * (1 << 20) }, func(int) int64 { return 5 }))))
	assert.Contains(t, b.String(), "rss        +60.00 MiB/h, +10.00 MiB over the window")
	assert.Contains(t, b.String(), "verdict: GROWTH")
}

func TestSoak(t *testing.T) {
	t.Parallel()
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(metricsText))
	}))
	t.Cleanup(metrics.Close)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)

	tests := []struct {
		name       string
		url        string
		goroutines int64
		scrapeErr  bool
	}{
		{name: "with metrics", url: metrics.URL, goroutines: 42},
		{name: "proc only", url: "", goroutines: -1},
		{name: "failing scrape", url: broken.URL, goroutines: -1, scrapeErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var recorded int
			const duration = 30 * time.Millisecond
			samples, err := Soak(t.Context(), SoakOptions{
				PID: os.Getpid(), MetricsURL: tc.url, Interval: 10 * time.Millisecond, Duration: duration,
				// The default timeout is the interval (10 ms), which a busy
				// machine misses now and then: the scrape must not be what
				// this test measures.
				Client:   &http.Client{Timeout: 10 * time.Second},
				OnSample: func(Sample) error { recorded++; return nil },
			})
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(samples), 2)
			assert.Equal(t, len(samples), recorded)
			// The last sample is taken at the end of the duration, not before.
			assert.GreaterOrEqual(t, samples[len(samples)-1].Elapsed, duration)
			for _, s := range samples {
				assert.Positive(t, s.RSS)
				assert.GreaterOrEqual(t, s.HWM, s.RSS)
				assert.Equal(t, tc.goroutines, s.Goroutines)
				assert.Equal(t, tc.scrapeErr, s.Error != "")
			}
		})
	}
}

func TestSoak_processGone(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	_, err := Soak(t.Context(), SoakOptions{PID: cmd.Process.Pid, Interval: time.Millisecond, Duration: time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read server status")
}

func TestSoak_cancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	samples, err := Soak(ctx, SoakOptions{PID: os.Getpid(), Interval: time.Hour, Duration: 2 * time.Hour,
		OnSample: func(Sample) error { cancel(); return nil }})
	require.ErrorIs(t, err, context.Canceled)
	assert.Len(t, samples, 1)
}
