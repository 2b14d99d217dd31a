package perfkit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Comparison names a family of benchmarks that measure two variants of the
// same thing per fixture: Func/fixture=<f>/<Key>=<A|B>.
type Comparison struct {
	// Title is the table title.
	Title string
	// Func is the benchmark function, "BenchmarkEvaluate".
	Func string
	// Key is the sub-benchmark key that tells the variants apart.
	Key string
	// Base is the reference variant and Other the compared one: the ratio
	// is Other/Base.
	Base, Other string
	// BaseLabel and OtherLabel name the variants for people.
	BaseLabel, OtherLabel string
	// Target, when positive, is the largest acceptable Other/Base ratio;
	// tables say whether each fixture meets it.
	Target float64
	// AtLeast, when positive, is the smallest acceptable Other/Base ratio
	// on every fixture, and GeomeanAtLeast that of their geometric mean.
	AtLeast, GeomeanAtLeast float64
}

// The comparisons the performance targets are stated in (docs/PERFORMANCE.md).
var (
	// CompareEvaluate is the policy compiled natively vs the .wasm in our
	// host (internal/perf).
	CompareEvaluate = Comparison{
		Title: "Policy evaluation: native Go vs Wasm in our host",
		Func:  "BenchmarkEvaluate", Key: "impl", Base: "native", Other: "wasm",
		BaseLabel: "native", OtherLabel: "wasm", Target: 2,
	}
	// CompareInstances is a fresh instance per evaluation (Kubewarden's
	// policy-server) vs our instance set (internal/perf).
	CompareInstances = Comparison{
		Title: "Instance strategy: fresh instance per evaluation vs pooled",
		Func:  "BenchmarkInstances", Key: "strategy", Base: "pooled", Other: "fresh",
		BaseLabel: "pooled", OtherLabel: "fresh",
	}
	// CompareAdmission is our webhook vs YuniKorn's admission controller
	// (the bench/ module).
	CompareAdmission = Comparison{
		Title: "Admission in-process: ours vs YuniKorn's admission controller",
		Func:  "BenchmarkAdmission", Key: "impl", Base: "ours", Other: "yunikorn",
		BaseLabel: "ours", OtherLabel: "YuniKorn", AtLeast: 1.5, GeomeanAtLeast: 2,
	}
)

// Comparisons lists the comparisons in report order.
var Comparisons = []Comparison{CompareEvaluate, CompareInstances, CompareAdmission}

// Pair is one fixture of a comparison: the medians of both variants. A
// variant without results has N 0.
type Pair struct {
	Fixture     string
	Base, Other Stats
}

// Stats are the medians of the standard metrics of one benchmark.
type Stats struct {
	NsPerOp, BytesPerOp, AllocsPerOp float64
	// N is the number of runs the medians are over, 0 when the benchmark
	// is missing.
	N int
	// HasMem is set when B/op and allocs/op were reported (-benchmem).
	HasMem bool
	// MBPerS is the median throughput in MB of input per second, when the
	// benchmark reported one (b.SetBytes); 0 otherwise.
	MBPerS float64
}

// Ratio is Other/Base in ns/op, 0 when either is missing.
func (p Pair) Ratio() float64 {
	if p.Base.N == 0 || p.Other.N == 0 || p.Base.NsPerOp == 0 {
		return 0
	}
	return p.Other.NsPerOp / p.Base.NsPerOp
}

func statsOf(b *Benchmark) Stats {
	ns, n := b.Median(UnitNsPerOp)
	bytes, nb := b.Median(UnitBytesPerOp)
	allocs, na := b.Median(UnitAllocsPerOp)
	mbs, _ := b.Median("MB/s")
	return Stats{NsPerOp: ns, BytesPerOp: bytes, AllocsPerOp: allocs, N: n, HasMem: nb > 0 && na > 0, MBPerS: mbs}
}

// Pairs returns the fixtures of c found in s, in fixture order.
func (c Comparison) Pairs(s *BenchSet) []Pair {
	byFixture := map[string]*Pair{}
	var order []string
	for _, b := range s.Benchmarks {
		if !c.has(b) {
			continue
		}
		fixture, _ := b.Param("fixture")
		variant, _ := b.Param(c.Key)
		p := byFixture[fixture]
		if p == nil {
			p = &Pair{Fixture: fixture}
			byFixture[fixture] = p
			order = append(order, fixture)
		}
		if variant == c.Base {
			p.Base = statsOf(b)
		} else {
			p.Other = statsOf(b)
		}
	}
	SortFixtures(order)
	pairs := make([]Pair, 0, len(order))
	for _, f := range order {
		pairs = append(pairs, *byFixture[f])
	}
	return pairs
}

// Objects and cases of the benchmark fixtures (testdata/bench), in the order
// tables list them.
var (
	fixtureObjects = []string{"pod-small", "pod-large", "deployment"}
	fixtureCases   = []string{"create-inject", "create-present", "update-unchanged"}
)

// SortFixtures orders fixture names <object>-<case> by object, then case,
// in the order of the issue; unknown names come last, sorted.
func SortFixtures(names []string) {
	rank := func(name string) (int, int) {
		for i, o := range fixtureObjects {
			if c, ok := strings.CutPrefix(name, o+"-"); ok {
				if j := slices.Index(fixtureCases, c); j >= 0 {
					return i, j
				}
				return i, len(fixtureCases)
			}
		}
		return len(fixtureObjects), 0
	}
	slices.SortStableFunc(names, func(a, b string) int {
		ao, ac := rank(a)
		bo, bc := rank(b)
		return cmp.Or(cmp.Compare(ao, bo), cmp.Compare(ac, bc), strings.Compare(a, b))
	})
}

// variantPairs are the pairs of variants a family of benchmarks can
// compare; the first of each is the base of the ratio.
var variantPairs = []struct {
	key, base, other, baseLabel, otherLabel string
}{
	{key: "impl", base: "native", other: "wasm", baseLabel: "native", otherLabel: "wasm"},
	{key: "strategy", base: "pooled", other: "fresh", baseLabel: "pooled", otherLabel: "fresh"},
	{key: "impl", base: "ours", other: "yunikorn", baseLabel: "ours", otherLabel: "YuniKorn"},
	// BenchmarkHostSide: the whole admission vs the host alone (a no-op
	// guest); the ratio is the host's share.
	{key: "guest", base: "policy", other: "noop", baseLabel: "policy", otherLabel: "host only (no-op guest)"},
}

// Families returns the comparisons to report for s: the three of the performance targets
// (Comparisons) whether or not s has them, then every other family of
// benchmarks named Func/fixture=<f>/<key>=<variant> with a known pair of
// variants (BenchmarkAdmissionParallel/fixture=x/impl=ours|yunikorn), in
// the order they appear.
func Families(s *BenchSet) []Comparison {
	out := slices.Clone(Comparisons)
	for _, b := range s.Benchmarks {
		if _, ok := b.Param("fixture"); !ok {
			continue
		}
		for _, vp := range variantPairs {
			v, ok := b.Param(vp.key)
			if !ok || (v != vp.base && v != vp.other) {
				continue
			}
			c := Comparison{
				Title: fmt.Sprintf("%s: %s vs %s", b.Func(), vp.baseLabel, vp.otherLabel),
				Func:  b.Func(), Key: vp.key, Base: vp.base, Other: vp.other,
				BaseLabel: vp.baseLabel, OtherLabel: vp.otherLabel,
			}
			if !slices.ContainsFunc(out, c.same) {
				out = append(out, c)
			}
		}
	}
	return out
}

// same tells whether o compares the same benchmarks as c.
func (c Comparison) same(o Comparison) bool {
	return c.Func == o.Func && c.Key == o.Key && c.Base == o.Base && c.Other == o.Other
}

// has tells whether b is one of the benchmarks c compares.
func (c Comparison) has(b *Benchmark) bool {
	if b.Func() != c.Func {
		return false
	}
	if _, ok := b.Param("fixture"); !ok {
		return false
	}
	v, _ := b.Param(c.Key)
	return v == c.Base || v == c.Other
}

// Others are the benchmarks of s that belong to no family, for the table
// of everything else.
func Others(s *BenchSet) []*Benchmark {
	families := Families(s)
	var out []*Benchmark
	for _, b := range s.Benchmarks {
		if !slices.ContainsFunc(families, func(c Comparison) bool { return c.has(b) }) {
			out = append(out, b)
		}
	}
	return out
}
