package perfkit

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteTables(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	require.NoError(t, WriteTables(&b, readTestInputs(t)))
	out := b.String()
	for _, want := range []string{
		"| CPU | Synthetic CPU @ 2.0GHz |",
		"| logical CPUs | 2 |",
		"| kernel | 6.1.0-test |",
		// Medians of three runs, the ratio, the target, memory.
		"| `pod-small-create-inject` | 4.12 µs | 6.62 µs | 1.61× | met | 1,374 | 2,207 | 20 | 33 |",
		"| `pod-large-create-inject` | 153 µs | 835 µs | 5.44× | 76,685 | 417,503 | 1,022 | 5,566 |",
		"| `deployment-update-unchanged` | 14.5 µs | 18.6 µs | 1.29× |",
		"- wasm/native time per operation (`BenchmarkEvaluate`, above 1: native faster): geometric mean 1.61× over 9 fixtures (1.56× to 1.65×); target <= 2× on every fixture: met",
		"- YuniKorn/ours time per operation (`BenchmarkAdmission`, above 1: ours faster): geometric mean 1.29× over 9 fixtures",
		// A family found in the results, beyond the three of the issue.
		"### BenchmarkAdmissionParallel: ours vs YuniKorn",
		"| `pod-small-create-inject` | 5.00 µs | 6.00 µs | 1.20× |",
		"| `BenchmarkHarness/fixture=pod-small-create-inject` | peer | 6.46 µs | 6,640 | 22 | 1 |",
		"| `BenchmarkPatch/size=large` | perf | 1.21 µs | 512 | 7 | 3 |",
		"| 2,000 | 1,998 | 0.90 | 1.80 | 3.90 | 5.85 | 11.70 | 0 | 0.180 | 0.110 | 41.0 MiB |",
		"| saturation | 5,230 | 5.50 |",
		"- saturation: 5,230 admissions/s over HTTPS (32 connections), p99 15.0 ms; target >= 10,000/s: **missed**",
		"target >= 1.5× on every fixture and >= 2× in geometric mean: **missed**",
		"| `pod-small-create-inject` | 8.28 µs | 10.7 µs | 1.30× | **missed** |",
		"- at 4,000/s: p99 14.0 ms; target < 5.00 ms: **missed**",
		"| without cache | 5 | 214 ms | 230 ms | 262 ms | < 1.00 s: met |",
		"| filling the cache | 1 |  | 250 ms |  |  |",
		"| goroutines | 40 | 40 | 42 |",
	} {
		assert.Contains(t, out, want)
	}
}

func TestWriteTables_missingAndMissed(t *testing.T) {
	t.Parallel()
	set, err := ParseBench(strings.NewReader(
		"BenchmarkEvaluate/fixture=pod-small-create-inject/impl=native-2  10  100 ns/op\n" +
			"BenchmarkEvaluate/fixture=pod-small-create-inject/impl=wasm-2  10  250 ns/op\n" +
			"BenchmarkEvaluate/fixture=deployment-create-inject/impl=wasm-2  10  250 ns/op\n"))
	require.NoError(t, err)
	in := &Inputs{Bench: set, ColdStarts: []*ColdStartResult{{Cache: true, Samples: []time.Duration{time.Second},
		Min: time.Second, P50: time.Second, Max: time.Second, Filling: 2 * time.Second}}}
	var b strings.Builder
	require.NoError(t, WriteTables(&b, in))
	out := b.String()
	for _, want := range []string{
		"| `pod-small-create-inject` | 100 ns | 250 ns | 2.50× | **missed** | n/a | n/a | n/a | n/a |",
		"| `deployment-create-inject` | n/a | 250 ns | n/a | n/a |",
		"target <= 2× on every fixture: **missed**",
		"_No results: no BenchmarkAdmission/fixture=<f>/impl=ours|yunikorn benchmarks were found._",
		"_No results: no loadgen reports were found._",
		"| with cache | 1 | 1.00 s | 1.00 s | 1.00 s | < 300 ms: **missed** |",
		"| filling the cache (the cache was not empty) | 1 |  | 2.00 s |  |  |",
		"_No results: run `make soak`._",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "### Other benchmarks")
}
