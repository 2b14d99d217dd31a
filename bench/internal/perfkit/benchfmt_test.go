package perfkit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const benchOutput = `goos: linux
goarch: amd64
pkg: example.com/a
cpu: Test CPU
BenchmarkEvaluate/fixture=pod-small-create-inject/impl=native-2   	  1000	      100.0 ns/op	      48 B/op	       2 allocs/op
BenchmarkEvaluate/fixture=pod-small-create-inject/impl=native-2   	  1000	      300.0 ns/op	      48 B/op	       2 allocs/op
BenchmarkEvaluate/fixture=pod-small-create-inject/impl=native-2   	  1000	      200.0 ns/op	      64 B/op	       3 allocs/op
BenchmarkEvaluate/fixture=pod-small-create-inject/impl=wasm-2     	  1000	      400.0 ns/op
BenchmarkEvaluate/fixture=pod-small-create-inject/impl=wasm-2     	  1000	      600.0 ns/op
--- SKIP: BenchmarkOther
    perf_test.go:12: POLICY_WASM not set
BenchmarkLogs-2   	some output the benchmark printed
    1000	  5.5 ns/op	  12.5 MB/s	  3.0 evals/op
BenchmarkSingle	  2000	  7 ns/op
PASS
ok  	example.com/a	1.234s
pkg: example.com/b
BenchmarkSingle-8	  2000	  9 ns/op
`

func TestParseBench(t *testing.T) {
	t.Parallel()
	set, err := ParseBench(strings.NewReader(benchOutput))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"goos": "linux", "goarch": "amd64", "cpu": "Test CPU"}, set.Config)

	type want struct {
		pkg, name string
		procs     int
		runs      int
	}
	var got []want
	for _, b := range set.Benchmarks {
		got = append(got, want{pkg: b.Pkg, name: b.Name, procs: b.Procs, runs: len(b.Runs)})
	}
	assert.Equal(t, []want{
		{pkg: "example.com/a", name: "BenchmarkEvaluate/fixture=pod-small-create-inject/impl=native", procs: 2, runs: 3},
		{pkg: "example.com/a", name: "BenchmarkEvaluate/fixture=pod-small-create-inject/impl=wasm", procs: 2, runs: 2},
		{pkg: "example.com/a", name: "BenchmarkLogs", procs: 2, runs: 1},
		{pkg: "example.com/a", name: "BenchmarkSingle", procs: 1, runs: 1},
		{pkg: "example.com/b", name: "BenchmarkSingle", procs: 8, runs: 1},
	}, got)

	logs := set.Benchmarks[2]
	assert.Equal(t, map[string]float64{"ns/op": 5.5, "MB/s": 12.5, "evals/op": 3}, logs.Runs[0].Values)
	assert.Equal(t, int64(1000), logs.Runs[0].Iterations)
}

func TestBenchmark_Median(t *testing.T) {
	t.Parallel()
	set, err := ParseBench(strings.NewReader(benchOutput))
	require.NoError(t, err)
	native := set.Find("BenchmarkEvaluate/fixture=pod-small-create-inject/impl=native")
	wasm := set.Find("BenchmarkEvaluate/fixture=pod-small-create-inject/impl=wasm")
	require.NotNil(t, native)
	require.NotNil(t, wasm)

	tests := []struct {
		name   string
		bench  *Benchmark
		unit   string
		median float64
		n      int
	}{
		{name: "odd count is the middle value", bench: native, unit: UnitNsPerOp, median: 200, n: 3},
		{name: "repeated values", bench: native, unit: UnitBytesPerOp, median: 48, n: 3},
		{name: "even count is the mean of the middle two", bench: wasm, unit: UnitNsPerOp, median: 500, n: 2},
		{name: "unit not reported", bench: wasm, unit: UnitAllocsPerOp, median: 0, n: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			median, n := tc.bench.Median(tc.unit)
			assert.Equal(t, tc.median, median)
			assert.Equal(t, tc.n, n)
		})
	}
}

func TestBenchmark_Param(t *testing.T) {
	t.Parallel()
	b := &Benchmark{Name: "BenchmarkEvaluate/fixture=pod-large-update-unchanged/impl=wasm/plain"}
	tests := []struct {
		name  string
		key   string
		value string
		ok    bool
	}{
		{name: "fixture with dashes", key: "fixture", value: "pod-large-update-unchanged", ok: true},
		{name: "last part", key: "impl", value: "wasm", ok: true},
		{name: "part without key", key: "plain", value: "", ok: false},
		{name: "absent", key: "strategy", value: "", ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, ok := b.Param(tc.key)
			assert.Equal(t, tc.value, v)
			assert.Equal(t, tc.ok, ok)
		})
	}
	assert.Equal(t, "BenchmarkEvaluate", b.Func())
}

func TestParseBench_badValue(t *testing.T) {
	t.Parallel()
	_, err := ParseBench(strings.NewReader("BenchmarkX-2  100  1.2.3 ns/op\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 1")
}

func TestBenchSet_Merge(t *testing.T) {
	t.Parallel()
	a, err := ParseBench(strings.NewReader("pkg: p\nBenchmarkX-2  10  1 ns/op\n"))
	require.NoError(t, err)
	b, err := ParseBench(strings.NewReader("pkg: p\nBenchmarkX-2  10  3 ns/op\npkg: q\nBenchmarkX-2  10  5 ns/op\n"))
	require.NoError(t, err)
	a.Merge(b)
	require.Len(t, a.Benchmarks, 2)
	median, n := a.Benchmarks[0].Median(UnitNsPerOp)
	assert.Equal(t, 2.0, median)
	assert.Equal(t, 2, n)
	assert.Equal(t, "q", a.Benchmarks[1].Pkg)
}
