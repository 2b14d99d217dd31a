package perfkit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestComparison_Pairs(t *testing.T) {
	t.Parallel()
	set, err := ParseBench(strings.NewReader(`pkg: p
BenchmarkEvaluate/fixture=deployment-create-inject/impl=native-2  10  100 ns/op  10 B/op  1 allocs/op
BenchmarkEvaluate/fixture=deployment-create-inject/impl=wasm-2    10  150 ns/op  20 B/op  2 allocs/op
BenchmarkEvaluate/fixture=pod-small-create-present/impl=wasm-2    10  300 ns/op
BenchmarkEvaluate/fixture=pod-small-create-inject/impl=native-2   10  100 ns/op
BenchmarkEvaluate/fixture=pod-small-create-inject/impl=wasm-2     10  180 ns/op
BenchmarkEvaluate/fixture=pod-small-create-inject/impl=tinygo-2   10  999 ns/op
BenchmarkEvaluate/fixture=zzz-custom/impl=native-2                10  10 ns/op
BenchmarkInstances/fixture=pod-small-create-inject/strategy=fresh-2 10  900 ns/op
`))
	require.NoError(t, err)

	pairs := CompareEvaluate.Pairs(set)
	var fixtures []string
	var ratios []float64
	for _, p := range pairs {
		fixtures = append(fixtures, p.Fixture)
		ratios = append(ratios, p.Ratio())
	}
	assert.Equal(t, []string{"pod-small-create-inject", "pod-small-create-present", "deployment-create-inject", "zzz-custom"}, fixtures)
	assert.InDeltaSlice(t, []float64{1.8, 0, 1.5, 0}, ratios, 1e-9)
	assert.Equal(t, Stats{NsPerOp: 150, BytesPerOp: 20, AllocsPerOp: 2, N: 1, HasMem: true}, pairs[2].Other)
	assert.False(t, pairs[0].Base.HasMem)

	var others []string
	for _, b := range Others(set) {
		others = append(others, b.Name)
	}
	// The variant no comparison knows is listed with the other benchmarks.
	assert.Equal(t, []string{"BenchmarkEvaluate/fixture=pod-small-create-inject/impl=tinygo"}, others)
}

func TestFamilies(t *testing.T) {
	t.Parallel()
	set, err := ParseBench(strings.NewReader(`BenchmarkAdmissionParallel/fixture=a/impl=yunikorn-2  10  1 ns/op
BenchmarkAdmissionParallel/fixture=a/impl=ours-2  10  1 ns/op
BenchmarkEvaluate/fixture=a/impl=native-2  10  1 ns/op
BenchmarkOdd/fixture=a/impl=tinygo-2  10  1 ns/op
BenchmarkNoFixture/impl=wasm-2  10  1 ns/op
`))
	require.NoError(t, err)
	var got []string
	for _, c := range Families(set) {
		got = append(got, c.Func+" "+c.OtherLabel+"/"+c.BaseLabel)
	}
	assert.Equal(t, []string{"BenchmarkEvaluate wasm/native", "BenchmarkInstances fresh/pooled",
		"BenchmarkAdmission YuniKorn/ours", "BenchmarkAdmissionParallel YuniKorn/ours"}, got)
	var others []string
	for _, b := range Others(set) {
		others = append(others, b.Name)
	}
	assert.Equal(t, []string{"BenchmarkOdd/fixture=a/impl=tinygo", "BenchmarkNoFixture/impl=wasm"}, others)
}

func TestSortFixtures(t *testing.T) {
	t.Parallel()
	names := []string{"b-unknown", "deployment-update-unchanged", "pod-large-create-inject", "pod-small-other",
		"pod-small-update-unchanged", "a-unknown", "pod-small-create-inject"}
	SortFixtures(names)
	assert.Equal(t, []string{"pod-small-create-inject", "pod-small-update-unchanged", "pod-small-other",
		"pod-large-create-inject", "deployment-update-unchanged", "a-unknown", "b-unknown"}, names)
}
