package perfkit

import (
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/yunikorn-userinfo/userinfo/internal/loadgen"
)

// The PNG files WritePlots writes.
const (
	PlotLatency    = "latency-vs-load.png"
	PlotThroughput = "throughput-vs-load.png"
	PlotEvaluate   = "evaluate-native-vs-wasm.png"
	PlotInstances  = "instances-fresh-vs-pooled.png"
	PlotAdmission  = "admission-ours-vs-yunikorn.png"
	PlotSoak       = "soak.png"
	PlotColdStart  = "coldstart.png"
)

// The performance targets (docs/PERFORMANCE.md), drawn as reference lines.
const (
	targetP99         = 5 * time.Millisecond
	targetP99Rate     = 2000
	targetReadyCached = 300 * time.Millisecond
	targetReady       = time.Second
)

// drawer is a chart that can draw itself into a rectangle.
type drawer interface {
	draw(c *canvas, r image.Rectangle)
}

// stacked draws its charts one above the other, the first taking share of
// the height.
type stacked struct {
	top, bottom drawer
	share       float64
}

func (s stacked) draw(c *canvas, r image.Rectangle) {
	split := r.Min.Y + int(float64(r.Dy())*s.share)
	s.top.draw(c, image.Rect(r.Min.X, r.Min.Y, r.Max.X, split))
	s.bottom.draw(c, image.Rect(r.Min.X, split, r.Max.X, r.Max.Y))
}

// render draws d on a white PlotWidth x PlotHeight image.
func render(d drawer) *image.RGBA {
	c := newCanvas(PlotWidth, PlotHeight)
	d.draw(c, c.img.Rect.Inset(6))
	return c.img
}

// PlotReport says what WritePlots did.
type PlotReport struct {
	// Written are the paths of the PNGs written.
	Written []string
	// Skipped explains each plot left out for lack of input.
	Skipped []string
}

// WritePlots writes every plot whose input is in in to outDir.
func WritePlots(in *Inputs, outDir string) (PlotReport, error) {
	var rep PlotReport
	plots := []struct {
		file  string
		build func(*Inputs) (drawer, string)
	}{
		{PlotLatency, func(in *Inputs) (drawer, string) { return latencyChart(in.Load) }},
		{PlotThroughput, func(in *Inputs) (drawer, string) { return throughputChart(in.Load) }},
		{PlotEvaluate, func(in *Inputs) (drawer, string) { return comparisonChart(CompareEvaluate, in.Bench) }},
		{PlotInstances, func(in *Inputs) (drawer, string) { return comparisonChart(CompareInstances, in.Bench) }},
		{PlotAdmission, func(in *Inputs) (drawer, string) { return comparisonChart(CompareAdmission, in.Bench) }},
		{PlotSoak, func(in *Inputs) (drawer, string) { return soakChart(in.Soak) }},
		{PlotColdStart, func(in *Inputs) (drawer, string) { return coldStartChart(in.ColdStarts) }},
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return rep, fmt.Errorf("create plot directory: %w", err)
	}
	for _, p := range plots {
		d, skip := p.build(in)
		if d == nil {
			rep.Skipped = append(rep.Skipped, p.file+": "+skip)
			continue
		}
		path := filepath.Join(outDir, p.file)
		if err := writePNG(path, render(d)); err != nil {
			return rep, err
		}
		rep.Written = append(rep.Written, path)
	}
	return rep, nil
}

func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create plot: %w", err)
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// splitLoad separates the fixed-rate runs (sorted by rate) from the
// saturation run with the highest throughput.
func splitLoad(loads []*loadgen.Result) (fixed []*loadgen.Result, sat *loadgen.Result) {
	for _, r := range loads {
		if r.Mode == loadgen.ModeSaturation {
			if sat == nil || r.Throughput > sat.Throughput {
				sat = r
			}
		} else {
			fixed = append(fixed, r)
		}
	}
	return fixed, sat
}

func loadSubtitle(loads []*loadgen.Result) string {
	r := loads[0]
	return fmt.Sprintf("HTTPS keep-alive, %d connections, %s measured per rate, %d CPUs shared by server and load generator",
		r.Connections, r.Duration.Round(time.Millisecond), r.NumCPU)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// latencyChart is latency percentiles against the offered rate, the
// saturation run marked.
func latencyChart(loads []*loadgen.Result) (drawer, string) {
	fixed, sat := splitLoad(loads)
	if len(fixed) == 0 && sat == nil {
		return nil, "no loadgen reports (" + LoadGlob + ")"
	}
	percentiles := []struct {
		name   string
		get    func(loadgen.Latency) time.Duration
		marker marker
	}{
		{"p50", func(l loadgen.Latency) time.Duration { return l.P50 }, markerCircle},
		{"p90", func(l loadgen.Latency) time.Duration { return l.P90 }, markerSquare},
		{"p99", func(l loadgen.Latency) time.Duration { return l.P99 }, markerTriangle},
	}
	lc := &lineChart{
		title:    "Webhook latency vs offered load",
		subtitle: loadSubtitle(loads),
		xLabel:   "offered load (admissions/s, open loop)",
		yLabel:   "latency (ms, log scale)",
		yLog:     true, xFromZero: true,
	}
	for i, p := range percentiles {
		s := series{name: p.name, color: palette[[]int{0, 1, 3}[i]], marker: p.marker}
		for _, r := range fixed {
			if r.Latency.Samples > 0 {
				s.points = append(s.points, point{r.Rate, ms(p.get(r.Latency))})
			}
		}
		lc.series = append(lc.series, s)
	}
	if sat != nil && sat.Latency.Samples > 0 {
		for i, p := range percentiles {
			lc.series = append(lc.series, series{color: lc.series[i].color, marker: p.marker, hollow: true, noLine: true,
				points: []point{{sat.Throughput, ms(p.get(sat.Latency))}}})
		}
		lc.series = append(lc.series, series{name: "at saturation (closed loop)", color: darkGray, marker: markerCircle, hollow: true, noLine: true})
		lc.refs = append(lc.refs, refLine{value: sat.Throughput, vertical: true,
			label: "saturation " + thousands(sat.Throughput) + "/s"})
	}
	lc.refs = append(lc.refs, refLine{value: ms(targetP99), color: palette[3],
		label: fmt.Sprintf("target: p99 < %g ms at %s/s", ms(targetP99), thousands(targetP99Rate))})
	return lc, ""
}

// throughputChart is the achieved rate against the offered one.
func throughputChart(loads []*loadgen.Result) (drawer, string) {
	fixed, sat := splitLoad(loads)
	if len(fixed) == 0 {
		return nil, "no fixed-rate loadgen reports (" + LoadGlob + " with rate > 0)"
	}
	lc := &lineChart{
		title:     "Achieved vs offered throughput",
		subtitle:  loadSubtitle(loads),
		xLabel:    "offered load (admissions/s)",
		yLabel:    "achieved (admissions/s)",
		xFromZero: true, yFromZero: true,
	}
	top := 0.0
	achieved := series{name: "achieved", color: palette[0], marker: markerCircle}
	for _, r := range fixed {
		achieved.points = append(achieved.points, point{r.Rate, r.Throughput})
		top = math.Max(top, r.Rate)
	}
	lc.series = append(lc.series,
		series{name: "achieved = offered", color: midGray, dashed: true, points: []point{{0, 0}, {top, top}}},
		achieved)
	if sat != nil {
		lc.refs = append(lc.refs, refLine{value: sat.Throughput, color: palette[3],
			label: "saturation " + thousands(sat.Throughput) + "/s"})
	}
	return lc, ""
}

// comparisonChart is grouped bars of ns/op per fixture for the two
// variants of c.
func comparisonChart(c Comparison, set *BenchSet) (drawer, string) {
	pairs := c.Pairs(set)
	if len(pairs) == 0 {
		return nil, fmt.Sprintf("no %s/fixture=<f>/%s=%s|%s results", c.Func, c.Key, c.Base, c.Other)
	}
	hi := 0.0
	runs := 0
	for _, p := range pairs {
		hi = math.Max(hi, math.Max(p.Base.NsPerOp, p.Other.NsPerOp))
		runs = max(runs, p.Base.N, p.Other.N)
	}
	unit, size := durationUnit(hi)
	bc := &barChart{
		title:      c.Title,
		subtitle:   fmt.Sprintf("time per operation, %s (go test -bench); shorter is faster", runsText(runs)),
		valueLabel: "time per operation (" + unit + ")",
		noteHeader: c.OtherLabel + "/" + c.BaseLabel,
		format:     func(v float64) string { return sig3(v) + " " + unit },
	}
	base := barGroup{name: c.BaseLabel, color: palette[0]}
	other := barGroup{name: c.OtherLabel, color: palette[1]}
	value := func(s Stats) float64 {
		if s.N == 0 {
			return math.NaN()
		}
		return s.NsPerOp / size
	}
	for _, p := range pairs {
		bc.categories = append(bc.categories, p.Fixture)
		base.values = append(base.values, value(p.Base))
		other.values = append(other.values, value(p.Other))
		note := "n/a"
		if r := p.Ratio(); r > 0 {
			note = fmt.Sprintf("%.2f×", r)
		}
		bc.notes = append(bc.notes, note)
	}
	bc.groups = []barGroup{base, other}
	if c.Target > 0 {
		bc.subtitle += fmt.Sprintf("; target %s/%s <= %g×", c.OtherLabel, c.BaseLabel, c.Target)
	}
	return bc, ""
}

// soakChart is RSS and goroutines over time, with the trends fitted over
// the second half.
func soakChart(samples []Sample) (drawer, string) {
	if len(samples) < 2 {
		return nil, "no soak samples (" + SoakFile + ")"
	}
	sum := SummarizeSoak(samples)
	minutes := func(s Sample) float64 { return s.Elapsed.Minutes() }
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	mk := markerNone
	if len(samples) <= 40 {
		mk = markerCircle
	}
	rss := series{name: "RSS (VmRSS)", color: palette[0], marker: mk}
	heap := series{name: "Go heap in use", color: palette[1], marker: mk}
	gor := series{name: "goroutines", color: palette[2], marker: mk}
	for _, s := range samples {
		rss.points = append(rss.points, point{minutes(s), mib(s.RSS)})
		if s.HeapInuse >= 0 {
			heap.points = append(heap.points, point{minutes(s), mib(s.HeapInuse)})
		}
		if s.Goroutines >= 0 {
			gor.points = append(gor.points, point{minutes(s), float64(s.Goroutines)})
		}
	}
	trend := func(t *Trend, scale float64) series {
		from, to := sum.From.Hours(), sum.To.Hours()
		return series{name: "trend, 2nd half", color: black, dashed: true, points: []point{
			{sum.From.Minutes(), t.Intercept / scale},
			{sum.To.Minutes(), (t.Intercept + t.PerHour*(to-from)) / scale},
		}}
	}
	verdict := "too few samples for a trend"
	if sum.RSS != nil {
		// The change over the window, not the hourly slope: a short soak's
		// slope extrapolates noise.
		verdict = fmt.Sprintf("trend over the second half: RSS %+.2f MiB", sum.RSS.Change/(1<<20))
		if sum.Goroutines != nil {
			verdict += fmt.Sprintf(", goroutines %+.1f", sum.Goroutines.Change)
		}
		verdict += ": "
		if sum.Growing() {
			verdict += "GROWING"
		} else {
			verdict += "flat"
		}
	}
	top := &lineChart{
		title:    "Soak: memory and goroutines under constant load",
		subtitle: fmt.Sprintf("%d samples over %s; %s", len(samples), sum.Last.Elapsed.Round(time.Second), verdict),
		xLabel:   "minutes", yLabel: "MiB", xFromZero: true, yFromZero: true,
		series: []series{rss},
	}
	if len(heap.points) > 0 {
		top.series = append(top.series, heap)
	}
	if sum.RSS != nil {
		top.series = append(top.series, trend(sum.RSS, 1<<20))
	}
	if len(gor.points) == 0 {
		return top, ""
	}
	bottom := &lineChart{xLabel: "minutes", yLabel: "goroutines", xFromZero: true, yFromZero: true, series: []series{gor}}
	if sum.Goroutines != nil {
		bottom.series = append(bottom.series, trend(sum.Goroutines, 1))
	}
	return stacked{top: top, bottom: bottom, share: 0.58}, ""
}

// coldStartChart is the time to ready, with and without the compilation
// cache, the start that filled the cache apart.
func coldStartChart(results []*ColdStartResult) (drawer, string) {
	if len(results) == 0 {
		return nil, "no cold start results (" + ColdStartGlob + ")"
	}
	g := barGroup{name: "median", color: palette[0]}
	var cats, notes []string
	var refs []refLine
	for _, r := range results {
		label := "without cache"
		if r.Cache {
			label = "with cache"
		}
		cats = append(cats, label)
		g.values = append(g.values, ms(r.P50))
		g.low = append(g.low, ms(r.Min))
		g.high = append(g.high, ms(r.Max))
		var dots []float64
		for _, s := range r.Samples {
			dots = append(dots, ms(s))
		}
		g.dots = append(g.dots, dots)
		notes = append(notes, fmt.Sprintf("%d runs", len(r.Samples)))
		if r.Cache && r.Filling > 0 {
			cats = append(cats, "filling the cache")
			g.values = append(g.values, ms(r.Filling))
			g.low = append(g.low, math.NaN())
			g.high = append(g.high, math.NaN())
			g.dots = append(g.dots, nil)
			note := "1 run"
			if !r.CacheWasEmpty {
				note += " (cache not empty)"
			}
			notes = append(notes, note)
		}
	}
	hasCache, hasNoCache := false, false
	for _, r := range results {
		hasCache = hasCache || r.Cache
		hasNoCache = hasNoCache || !r.Cache
	}
	if hasCache {
		refs = append(refs, refLine{value: ms(targetReadyCached), color: palette[3], label: "target with cache"})
	}
	if hasNoCache {
		refs = append(refs, refLine{value: ms(targetReady), color: palette[3], label: "target without cache"})
	}
	return &barChart{
		title:      "Cold start: process start to /readyz 200",
		subtitle:   "bar: median; whiskers: min to max; circles: each run",
		valueLabel: "time to ready (ms)",
		categories: cats,
		groups:     []barGroup{g},
		notes:      notes,
		format:     func(v float64) string { return sig3(v) + " ms" },
		refs:       refs,
	}, ""
}

// runsText says what a value summarises: "median of 5 runs", "1 run".
func runsText(runs int) string {
	if runs == 1 {
		return "1 run"
	}
	return fmt.Sprintf("median of %d runs", runs)
}
