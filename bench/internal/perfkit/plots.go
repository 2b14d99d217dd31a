package perfkit

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/yunikorn-userinfo/userinfo/bench/internal/loadgen"
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
	targetP99Rate     = 4000
	targetReadyCached = 300 * time.Millisecond
	targetReady       = time.Second
)

// figure is one PNG: its plots stacked top to bottom, sharing the width.
type figure struct {
	plots []*plot.Plot
}

func single(p *plot.Plot) *figure { return &figure{plots: []*plot.Plot{p}} }

// pixels is n pixels at the canvas's resolution.
func pixels(n int) vg.Length { return vg.Length(n) * vg.Inch / plotDPI }

// plotDPI is the resolution the figures are drawn at.
const plotDPI = 96

// render draws f on a white PlotWidth x PlotHeight image.
func render(f *figure) image.Image {
	c := vgimg.NewWith(vgimg.UseWH(pixels(PlotWidth), pixels(PlotHeight)), vgimg.UseDPI(plotDPI))
	dc := draw.Crop(draw.New(c), pixels(6), -pixels(6), pixels(6), -pixels(6))
	switch len(f.plots) {
	case 0:
	case 1:
		f.plots[0].Draw(dc)
	default:
		rows := make([][]*plot.Plot, len(f.plots))
		for i, p := range f.plots {
			rows[i] = []*plot.Plot{p}
		}
		tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadY: pixels(10)}
		for i, cell := range plot.Align(rows, tiles, dc) {
			f.plots[i].Draw(cell[0])
		}
	}
	return c.Image()
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
		build func(*Inputs) (*figure, string)
	}{
		{PlotLatency, func(in *Inputs) (*figure, string) { return latencyChart(in.Load) }},
		{PlotThroughput, func(in *Inputs) (*figure, string) { return throughputChart(in.Load) }},
		{PlotEvaluate, func(in *Inputs) (*figure, string) { return comparisonChart(CompareEvaluate, in.Bench) }},
		{PlotInstances, func(in *Inputs) (*figure, string) { return comparisonChart(CompareInstances, in.Bench) }},
		{PlotAdmission, func(in *Inputs) (*figure, string) { return comparisonChart(CompareAdmission, in.Bench) }},
		{PlotSoak, func(in *Inputs) (*figure, string) { return soakChart(in.Soak) }},
		{PlotColdStart, func(in *Inputs) (*figure, string) { return coldStartChart(in.ColdStarts) }},
		{PlotScale, func(in *Inputs) (*figure, string) { return scaleChart(in.Scale) }},
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return rep, fmt.Errorf("create plot directory: %w", err)
	}
	for _, p := range plots {
		f, skip := p.build(in)
		if f == nil {
			rep.Skipped = append(rep.Skipped, p.file+": "+skip)
			continue
		}
		path := filepath.Join(outDir, p.file)
		if err := writePNG(path, render(f)); err != nil {
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

// newPlot is a plot with the house style: title and subtitle, axis labels,
// a light grid, the legend in the top left corner.
func newPlot(title, subtitle, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	if subtitle != "" {
		p.Title.Text += "\n" + subtitle
	}
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Tick.Marker = plainTicks{}
	p.Y.Tick.Marker = plainTicks{}
	grid := plotter.NewGrid()
	grid.Horizontal.Color = color.Gray{Y: 225}
	grid.Vertical.Color = color.Gray{Y: 225}
	p.Add(grid)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = pixels(8)
	p.Legend.YOffs = -pixels(8)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// ("250", not "250.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = strconv.FormatFloat(math.Round(t.Value*1e6)/1e6, 'f', -1, 64)
		}
	}
	return ticks
}

// glyph is a marker shape, filled or hollow.
type glyph int

const (
	glyphNone glyph = iota
	glyphCircle
	glyphSquare
	glyphTriangle
)

func (g glyph) drawer(hollow bool) draw.GlyphDrawer {
	switch g {
	case glyphSquare: // gonum's SquareGlyph is the outline, BoxGlyph the filled one
		if hollow {
			return draw.SquareGlyph{}
		}
		return draw.BoxGlyph{}
	case glyphTriangle: // likewise TriangleGlyph and PyramidGlyph
		if hollow {
			return draw.TriangleGlyph{}
		}
		return draw.PyramidGlyph{}
	default:
		if hollow {
			return draw.RingGlyph{}
		}
		return draw.CircleGlyph{}
	}
}

// series is one line of a line chart.
type series struct {
	name   string // the legend entry; none when empty
	color  color.Color
	glyph  glyph
	hollow bool // hollow markers
	noLine bool // markers only
	dashed bool
	points plotter.XYs
}

// glyphStyle is how s marks its points.
func (s series) glyphStyle() draw.GlyphStyle {
	return draw.GlyphStyle{Color: s.color, Radius: vg.Points(3.5), Shape: s.glyph.drawer(s.hollow)}
}

// legendGlyph is a legend thumbnail that is only a marker.
type legendGlyph draw.GlyphStyle

func (g legendGlyph) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(draw.GlyphStyle(g), c.Center())
}

// addSeries draws s on p. On a logarithmic axis the points at or below
// zero, which it cannot show, are left out.
func addSeries(p *plot.Plot, s series, logY bool) error {
	pts := s.points
	if logY {
		pts = slices.DeleteFunc(slices.Clone(pts), func(xy plotter.XY) bool { return xy.Y <= 0 })
	}
	var thumbs []plot.Thumbnailer
	if len(pts) > 0 && !s.noLine {
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("series %q: %w", s.name, err)
		}
		l.Color = s.color
		l.Width = vg.Points(2)
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		p.Add(l)
		thumbs = append(thumbs, l)
	}
	if len(pts) > 0 && s.glyph != glyphNone {
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return fmt.Errorf("series %q: %w", s.name, err)
		}
		sc.GlyphStyle = s.glyphStyle()
		p.Add(sc)
		thumbs = append(thumbs, sc)
	}
	if s.name != "" {
		if len(thumbs) == 0 { // a legend-only entry: its marker
			thumbs = append(thumbs, legendGlyph(s.glyphStyle()))
		}
		p.Legend.Add(s.name, thumbs...)
	}
	return nil
}

// refLine is a labelled reference line across the whole plot: a target or
// a measured limit.
type refLine struct {
	value    float64
	vertical bool
	color    color.Color
	label    string
}

// addRefs draws refs across p's data range, stretched to include them.
func addRefs(p *plot.Plot, refs []refLine) {
	for _, r := range refs {
		if r.vertical {
			p.X.Min, p.X.Max = math.Min(p.X.Min, r.value), math.Max(p.X.Max, r.value)
		} else {
			p.Y.Min, p.Y.Max = math.Min(p.Y.Min, r.value), math.Max(p.Y.Max, r.value)
		}
	}
	for _, r := range refs {
		var pts plotter.XYs
		if r.vertical {
			pts = plotter.XYs{{X: r.value, Y: p.Y.Min}, {X: r.value, Y: p.Y.Max}}
		} else {
			pts = plotter.XYs{{X: p.X.Min, Y: r.value}, {X: p.X.Max, Y: r.value}}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue // an infinite range: nothing was drawn to refer to
		}
		l.Color = r.color
		if l.Color == nil {
			l.Color = darkGray
		}
		l.Width = vg.Points(1.5)
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(l)
		if r.label != "" {
			p.Legend.Add(r.label, l)
		}
	}
}

// logY makes p's vertical axis logarithmic when it holds data to show.
func logY(p *plot.Plot) {
	if p.Y.Min > 0 && p.Y.Max >= p.Y.Min {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
}

// latencyChart is latency percentiles against the offered rate, the
// saturation run marked.
func latencyChart(loads []*loadgen.Result) (*figure, string) {
	fixed, sat := splitLoad(loads)
	if len(fixed) == 0 && sat == nil {
		return nil, "no loadgen reports (" + LoadGlob + ")"
	}
	percentiles := []struct {
		name  string
		get   func(loadgen.Latency) time.Duration
		glyph glyph
		color color.Color
	}{
		{"p50", func(l loadgen.Latency) time.Duration { return l.P50 }, glyphCircle, palette[0]},
		{"p90", func(l loadgen.Latency) time.Duration { return l.P90 }, glyphSquare, palette[1]},
		{"p99", func(l loadgen.Latency) time.Duration { return l.P99 }, glyphTriangle, palette[3]},
	}
	p := newPlot("Webhook latency vs offered load", loadSubtitle(loads),
		"offered load (admissions/s, open loop)", "latency (ms, log scale)")
	for _, pc := range percentiles {
		s := series{name: pc.name, color: pc.color, glyph: pc.glyph}
		for _, r := range fixed {
			if r.Latency.Samples > 0 {
				s.points = append(s.points, plotter.XY{X: r.Rate, Y: ms(pc.get(r.Latency))})
			}
		}
		if err := addSeries(p, s, true); err != nil {
			return nil, err.Error()
		}
	}
	var refs []refLine
	if sat != nil && sat.Latency.Samples > 0 {
		for _, pc := range percentiles {
			_ = addSeries(p, series{color: pc.color, glyph: pc.glyph, hollow: true, noLine: true,
				points: plotter.XYs{{X: sat.Throughput, Y: ms(pc.get(sat.Latency))}}}, true)
		}
		_ = addSeries(p, series{name: "at saturation (closed loop)", color: darkGray, glyph: glyphCircle, hollow: true, noLine: true}, true)
		refs = append(refs, refLine{value: sat.Throughput, vertical: true,
			label: "saturation " + thousands(sat.Throughput) + "/s"})
	}
	refs = append(refs, refLine{value: ms(targetP99), color: palette[3],
		label: fmt.Sprintf("target: p99 < %g ms at %s/s", ms(targetP99), thousands(targetP99Rate))})
	addRefs(p, refs)
	p.X.Min = 0
	logY(p)
	return single(p), ""
}

// throughputChart is the achieved rate against the offered one.
func throughputChart(loads []*loadgen.Result) (*figure, string) {
	fixed, sat := splitLoad(loads)
	if len(fixed) == 0 {
		return nil, "no fixed-rate loadgen reports (" + LoadGlob + " with rate > 0)"
	}
	p := newPlot("Achieved vs offered throughput", loadSubtitle(loads),
		"offered load (admissions/s)", "achieved (admissions/s)")
	top := 0.0
	achieved := series{name: "achieved", color: palette[0], glyph: glyphCircle}
	for _, r := range fixed {
		achieved.points = append(achieved.points, plotter.XY{X: r.Rate, Y: r.Throughput})
		top = math.Max(top, r.Rate)
	}
	_ = addSeries(p, series{name: "achieved = offered", color: midGray, dashed: true, points: plotter.XYs{{}, {X: top, Y: top}}}, false)
	_ = addSeries(p, achieved, false)
	if sat != nil {
		addRefs(p, []refLine{{value: sat.Throughput, color: palette[3], label: "saturation " + thousands(sat.Throughput) + "/s"}})
	}
	p.X.Min, p.Y.Min = 0, 0
	return single(p), ""
}

// barFigure is a horizontal bar chart: one row per category (the first on
// top), one bar per group in each row, and a note at the end of each row.
type barFigure struct {
	title, subtitle, valueLabel string
	categories                  []string
	groups                      []barGroup
	notes                       []string
	refs                        []refLine
}

// barGroup is one bar in every row; NaN leaves the row without it.
type barGroup struct {
	name      string
	color     color.Color
	values    []float64
	low, high []float64   // whiskers, optional; NaN for none
	dots      [][]float64 // individual runs, optional
}

func (bf *barFigure) plot() (*plot.Plot, error) {
	p := newPlot(bf.title, bf.subtitle, bf.valueLabel, "")
	p.Legend.Top, p.Legend.Left = false, false
	n := len(bf.categories)
	// Rows from the top: category i sits at y = n-1-i.
	row := func(i int) float64 { return float64(n - 1 - i) }
	barWidth := pixels(min(28, 300/max(1, n*len(bf.groups))))
	for g, grp := range bf.groups {
		vals := make(plotter.Values, n)
		for i := range vals {
			if i < len(grp.values) && !math.IsNaN(grp.values[i]) {
				vals[n-1-i] = grp.values[i]
			}
		}
		bc, err := plotter.NewBarChart(vals, barWidth)
		if err != nil {
			return nil, fmt.Errorf("bars %q: %w", grp.name, err)
		}
		bc.Horizontal = true
		bc.Color = grp.color
		bc.LineStyle.Width = 0
		bc.Offset = barWidth * vg.Length(float64(len(bf.groups)-1)/2-float64(g))
		p.Add(bc)
		if grp.name != "" {
			p.Legend.Add(grp.name, bc)
		}
		for i := range min(n, len(grp.low), len(grp.high)) {
			if math.IsNaN(grp.low[i]) || math.IsNaN(grp.high[i]) {
				continue
			}
			l, err := plotter.NewLine(plotter.XYs{{X: grp.low[i], Y: row(i)}, {X: grp.high[i], Y: row(i)}})
			if err != nil {
				return nil, fmt.Errorf("whisker of %q: %w", bf.categories[i], err)
			}
			l.Color, l.Width = black, vg.Points(1.5)
			p.Add(l)
		}
		var dots plotter.XYs
		for i := range min(n, len(grp.dots)) {
			for _, v := range grp.dots[i] {
				dots = append(dots, plotter.XY{X: v, Y: row(i)})
			}
		}
		if len(dots) > 0 {
			sc, err := plotter.NewScatter(dots)
			if err != nil {
				return nil, fmt.Errorf("runs: %w", err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: black, Radius: vg.Points(2.5), Shape: draw.RingGlyph{}}
			p.Add(sc)
		}
	}
	if n > 0 {
		rows := slices.Clone(bf.categories)
		slices.Reverse(rows)
		p.NominalY(rows...)
	}
	addRefs(p, bf.refs)
	p.X.Min = 0
	if len(bf.notes) > 0 {
		// Notes sit right of the longest bar; the axis grows to hold them.
		xs := make(plotter.XYs, 0, len(bf.notes))
		labels := make([]string, 0, len(bf.notes))
		for i, note := range bf.notes {
			if i >= n {
				break
			}
			xs = append(xs, plotter.XY{X: p.X.Max, Y: row(i)})
			labels = append(labels, note)
		}
		if len(xs) > 0 {
			l, err := plotter.NewLabels(plotter.XYLabels{XYs: xs, Labels: labels})
			if err != nil {
				return nil, fmt.Errorf("notes: %w", err)
			}
			for i := range l.TextStyle {
				l.TextStyle[i].YAlign = draw.YCenter
				l.TextStyle[i].Font.Size = vg.Points(9)
			}
			l.Offset = vg.Point{X: pixels(6)}
			p.Add(l)
			p.X.Max *= 1.18
		}
	}
	return p, nil
}

// comparisonChart is paired bars of time per operation for each fixture,
// the two variants of c side by side, their ratio at the end of each row.
func comparisonChart(c Comparison, set *BenchSet) (*figure, string) {
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
	bf := &barFigure{
		title: c.Title,
		subtitle: fmt.Sprintf("time per operation, %s (go test -bench); shorter is faster; at the right: %s/%s",
			runsText(runs), c.OtherLabel, c.BaseLabel),
		valueLabel: "time per operation (" + unit + ")",
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
		bf.categories = append(bf.categories, p.Fixture)
		base.values = append(base.values, value(p.Base))
		other.values = append(other.values, value(p.Other))
		note := "n/a"
		if r := p.Ratio(); r > 0 {
			note = fmt.Sprintf("%.2f×", r)
		}
		bf.notes = append(bf.notes, note)
	}
	bf.groups = []barGroup{base, other}
	if c.AtLeast > 0 {
		bf.subtitle += fmt.Sprintf("; target %s/%s ≥ %g× on every fixture, ≥ %g× in geometric mean", c.OtherLabel, c.BaseLabel, c.AtLeast, c.GeomeanAtLeast)
	}
	if c.Target > 0 {
		bf.subtitle += fmt.Sprintf("; target %s/%s ≤ %g×", c.OtherLabel, c.BaseLabel, c.Target)
	}
	p, err := bf.plot()
	if err != nil {
		return nil, err.Error()
	}
	return single(p), ""
}

// soakChart is RSS and goroutines over time, with the trends fitted over
// the second half.
func soakChart(samples []Sample) (*figure, string) {
	if len(samples) < 2 {
		return nil, "no soak samples (" + SoakFile + ")"
	}
	sum := SummarizeSoak(samples)
	minutes := func(s Sample) float64 { return s.Elapsed.Minutes() }
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	mk := glyphNone
	if len(samples) <= 40 {
		mk = glyphCircle
	}
	rss := series{name: "RSS (VmRSS)", color: palette[0], glyph: mk}
	heap := series{name: "Go heap in use", color: palette[1], glyph: mk}
	gor := series{name: "goroutines", color: palette[2], glyph: mk}
	for _, s := range samples {
		rss.points = append(rss.points, plotter.XY{X: minutes(s), Y: mib(s.RSS)})
		if s.HeapInuse >= 0 {
			heap.points = append(heap.points, plotter.XY{X: minutes(s), Y: mib(s.HeapInuse)})
		}
		if s.Goroutines >= 0 {
			gor.points = append(gor.points, plotter.XY{X: minutes(s), Y: float64(s.Goroutines)})
		}
	}
	trend := func(t *Trend, scale float64) series {
		from, to := sum.From.Hours(), sum.To.Hours()
		return series{name: "trend, 2nd half", color: black, dashed: true, points: plotter.XYs{
			{X: sum.From.Minutes(), Y: t.Intercept / scale},
			{X: sum.To.Minutes(), Y: (t.Intercept + t.PerHour*(to-from)) / scale},
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
	top := newPlot("Soak: memory and goroutines under constant load",
		fmt.Sprintf("%d samples over %s; %s", len(samples), sum.Last.Elapsed.Round(time.Second), verdict),
		"minutes", "MiB")
	_ = addSeries(top, rss, false)
	if len(heap.points) > 0 {
		_ = addSeries(top, heap, false)
	}
	if sum.RSS != nil {
		_ = addSeries(top, trend(sum.RSS, 1<<20), false)
	}
	top.X.Min, top.Y.Min = 0, 0
	if len(gor.points) == 0 {
		return single(top), ""
	}
	bottom := newPlot("", "", "minutes", "goroutines")
	_ = addSeries(bottom, gor, false)
	if sum.Goroutines != nil {
		_ = addSeries(bottom, trend(sum.Goroutines, 1), false)
	}
	bottom.X.Min, bottom.Y.Min = 0, 0
	return &figure{plots: []*plot.Plot{top, bottom}}, ""
}

// coldStartChart is the time to ready, with and without the compilation
// cache, the start that filled the cache apart.
func coldStartChart(results []*ColdStartResult) (*figure, string) {
	if len(results) == 0 {
		return nil, "no cold start results (" + ColdStartGlob + ")"
	}
	g := barGroup{name: "median", color: palette[0]}
	bf := &barFigure{
		title:      "Cold start: process start to /readyz 200",
		subtitle:   "bar: median; whiskers: min to max; circles: each run",
		valueLabel: "time to ready (ms)",
	}
	hasCache, hasNoCache := false, false
	for _, r := range results {
		hasCache = hasCache || r.Cache
		hasNoCache = hasNoCache || !r.Cache
		label := "without cache"
		if r.Cache {
			label = "with cache"
		}
		bf.categories = append(bf.categories, label)
		g.values = append(g.values, ms(r.P50))
		g.low = append(g.low, ms(r.Min))
		g.high = append(g.high, ms(r.Max))
		var dots []float64
		for _, s := range r.Samples {
			dots = append(dots, ms(s))
		}
		g.dots = append(g.dots, dots)
		bf.notes = append(bf.notes, fmt.Sprintf("%d runs", len(r.Samples)))
		if r.Cache && r.Filling > 0 {
			bf.categories = append(bf.categories, "filling the cache")
			g.values = append(g.values, ms(r.Filling))
			g.low = append(g.low, math.NaN())
			g.high = append(g.high, math.NaN())
			g.dots = append(g.dots, nil)
			note := "1 run"
			if !r.CacheWasEmpty {
				note += " (cache not empty)"
			}
			bf.notes = append(bf.notes, note)
		}
	}
	if hasCache {
		bf.refs = append(bf.refs, refLine{value: ms(targetReadyCached), vertical: true, color: palette[3], label: "target with cache"})
	}
	if hasNoCache {
		bf.refs = append(bf.refs, refLine{value: ms(targetReady), vertical: true, color: palette[3], label: "target without cache"})
	}
	bf.groups = []barGroup{g}
	p, err := bf.plot()
	if err != nil {
		return nil, err.Error()
	}
	return single(p), ""
}

// runsText says what a value summarises: "median of 5 runs", "1 run".
func runsText(runs int) string {
	if runs == 1 {
		return "1 run"
	}
	return fmt.Sprintf("median of %d runs", runs)
}
