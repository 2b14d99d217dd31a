package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Short runs: these check the wiring and the output, not the timings.
var quickBench = []string{"--warm-up-time", "0s", "--measurement-time", "0s", "--num-samples", "5"}

func TestBench_table(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "", append([]string{"bench", guestPath, "-r", requestPath}, quickBench...)...)
	require.Equal(t, 0, res.code, res.stderr)
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	require.Len(t, lines, 3, res.stdout)
	assert.Equal(t, "operation          samples     min µs     p50 µs     p99 µs    mean µs     max µs", lines[0])
	assert.Regexp(t, `^validate_settings +5( +\d+\.\d){5}$`, lines[1])
	assert.Regexp(t, `^validate +5( +\d+\.\d){5}$`, lines[2])
}

func TestBench_json(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "", append([]string{"bench", guestPath, "-r", requestPath, "--output", "json", "--settings-json", `{"mode":"mutate"}`}, quickBench...)...)
	require.Equal(t, 0, res.code, res.stderr)
	var results []benchResult
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &results), res.stdout)
	require.Len(t, results, 2)
	for i, op := range []string{"validate_settings", "validate"} {
		r := results[i]
		assert.Equal(t, op, r.Operation)
		assert.Equal(t, 5, r.Samples)
		assert.True(t, r.Min > 0 && r.Min <= r.P50 && r.P50 <= r.P99 && r.P99 <= r.Max, "%+v", r)
		assert.True(t, r.Min <= r.Mean && r.Mean <= r.Max, "%+v", r)
	}
}

func TestBench_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "failing validate", args: []string{"--settings-json", `{"mode":"fail"}`}, want: "bench validate: validate: test guest failure"},
		{name: "invalid settings", args: []string{"--settings-json", `{"reject":"no"}`}, want: "provided settings are not valid: no"},
		{name: "output format", args: []string{"--output", "yaml"}, want: `invalid --output "yaml": want text or json`},
		{name: "samples", args: []string{"--num-samples", "0"}, want: "invalid --num-samples 0: must be at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"bench", guestPath, "-r", requestPath}, quickBench...), tc.args...)
			res := runCLI(t, "", args...)
			assert.Equal(t, 1, res.code)
			assert.Empty(t, res.stdout)
			assert.Equal(t, "Error: "+tc.want+"\n", res.stderr)
		})
	}
}

func Test_summarize(t *testing.T) {
	t.Parallel()
	samples := make([]time.Duration, 0, 200)
	for i := 200; i >= 1; i-- { // unsorted on purpose
		samples = append(samples, time.Duration(i)*time.Microsecond)
	}
	assert.Equal(t, benchResult{
		Operation: "validate", Samples: 200,
		Min: 1, P50: 100, P99: 198, Mean: 100.5, Max: 200,
	}, summarize("validate", samples))

	assert.Equal(t, benchResult{
		Operation: "one", Samples: 1, Min: 7, P50: 7, P99: 7, Mean: 7, Max: 7,
	}, summarize("one", []time.Duration{7 * time.Microsecond}))
}

func Test_percentile(t *testing.T) {
	t.Parallel()
	sorted := []time.Duration{1, 2, 3, 4}
	tests := []struct {
		name string
		p    float64
		want time.Duration
	}{
		{name: "p0 is the minimum", p: 0, want: 1},
		{name: "p25", p: 25, want: 1},
		{name: "p50 is the lower middle", p: 50, want: 2},
		{name: "p51", p: 51, want: 3},
		{name: "p99", p: 99, want: 4},
		{name: "p100 is the maximum", p: 100, want: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, percentile(sorted, tc.p))
		})
	}
}
