package perfkit

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"

	"github.com/yunikorn-userinfo/userinfo/bench/internal/loadgen"
)

// resultsDir holds small synthetic results, in the layout bench.sh leaves.
const resultsDir = "testdata/results"

// requirePlot encodes img as PNG, decodes it and checks that it is a
// PlotWidth x PlotHeight picture with something drawn in each of colors.
func requirePlot(t *testing.T, img image.Image, colors ...color.RGBA) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	decoded, err := png.Decode(&buf)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, PlotWidth, PlotHeight), decoded.Bounds())

	seen := map[color.RGBA]int{}
	inked := 0
	for y := range PlotHeight {
		for x := range PlotWidth {
			r, g, b, a := decoded.At(x, y).RGBA()
			c := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
			seen[c]++
			if c != white {
				inked++
			}
		}
	}
	// Text, axes and data: a few percent of the pixels, and not all of
	// them (a chart drawn as one blot is as unreadable as a blank one).
	assert.Greater(t, inked, PlotWidth*PlotHeight/100, "too few pixels drawn")
	assert.Less(t, inked, PlotWidth*PlotHeight/2, "most of the picture is ink")
	for _, c := range colors {
		assert.Greater(t, seen[c], 20, "colour %v barely used", c)
	}
}

func readTestInputs(t *testing.T) *Inputs {
	t.Helper()
	in, err := ReadInputs(resultsDir)
	require.NoError(t, err)
	return in
}

func TestCharts(t *testing.T) {
	t.Parallel()
	in := readTestInputs(t)
	tests := []struct {
		name   string
		build  func() (*figure, string)
		colors []color.RGBA
	}{
		{name: "latency", build: func() (*figure, string) { return latencyChart(in.Load) }, colors: []color.RGBA{palette[0], palette[1], palette[3]}},
		{name: "throughput", build: func() (*figure, string) { return throughputChart(in.Load) }, colors: []color.RGBA{palette[0], midGray}},
		{name: "evaluate", build: func() (*figure, string) { return comparisonChart(CompareEvaluate, in.Bench) }, colors: []color.RGBA{palette[0], palette[1]}},
		{name: "instances", build: func() (*figure, string) { return comparisonChart(CompareInstances, in.Bench) }, colors: []color.RGBA{palette[0], palette[1]}},
		{name: "admission", build: func() (*figure, string) { return comparisonChart(CompareAdmission, in.Bench) }, colors: []color.RGBA{palette[0], palette[1]}},
		{name: "soak", build: func() (*figure, string) { return soakChart(in.Soak) }, colors: []color.RGBA{palette[0], palette[1], palette[2]}},
		{name: "cold start", build: func() (*figure, string) { return coldStartChart(in.ColdStarts) }, colors: []color.RGBA{palette[0], palette[3]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, skip := tc.build()
			require.NotNil(t, d, skip)
			requirePlot(t, render(d), tc.colors...)
		})
	}
}

func TestCharts_absentInput(t *testing.T) {
	t.Parallel()
	empty := &Inputs{Bench: &BenchSet{Config: map[string]string{}}}
	tests := []struct {
		name  string
		build func() (*figure, string)
		note  string
	}{
		{name: "latency", build: func() (*figure, string) { return latencyChart(empty.Load) }, note: LoadGlob},
		{name: "throughput without fixed rates", build: func() (*figure, string) {
			return throughputChart([]*loadgen.Result{{Mode: loadgen.ModeSaturation, Throughput: 10}})
		}, note: "fixed-rate"},
		{name: "evaluate", build: func() (*figure, string) { return comparisonChart(CompareEvaluate, empty.Bench) }, note: "BenchmarkEvaluate/fixture=<f>/impl=native|wasm"},
		{name: "soak", build: func() (*figure, string) { return soakChart(nil) }, note: SoakFile},
		{name: "cold start", build: func() (*figure, string) { return coldStartChart(nil) }, note: ColdStartGlob},
		{name: "scale", build: func() (*figure, string) { return scaleChart(nil) }, note: ScaleFile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, note := tc.build()
			assert.Nil(t, d)
			assert.Contains(t, note, tc.note)
		})
	}
}

func TestCharts_edgeCases(t *testing.T) {
	t.Parallel()
	one := newPlot("t", "", "x", "y")
	require.NoError(t, addSeries(one, series{name: "s", color: palette[0], glyph: glyphCircle, points: plotter.XYs{{X: 1, Y: 1}}}, false))
	logZero := newPlot("t", "", "", "")
	require.NoError(t, addSeries(logZero, series{name: "s", color: palette[0], points: plotter.XYs{{}, {X: 1, Y: 10}, {X: 2, Y: 1000}}}, true))
	logY(logZero)
	onlyZeros := newPlot("t", "", "", "")
	require.NoError(t, addSeries(onlyZeros, series{name: "s", color: palette[0], points: plotter.XYs{{}, {X: 1}}}, true))
	addRefs(onlyZeros, []refLine{{value: 5, label: "target"}})
	logY(onlyZeros)
	missing, err := (&barFigure{title: "t", categories: []string{"a", "b"}, notes: []string{"x", "n/a"},
		groups: []barGroup{{name: "g", color: palette[0], values: []float64{1, nan()}}}}).plot()
	require.NoError(t, err)
	empty, err := (&barFigure{title: "t"}).plot()
	require.NoError(t, err)
	tests := []struct {
		name string
		fig  *figure
	}{
		{name: "one point", fig: single(one)},
		{name: "log axis with zero", fig: single(logZero)},
		{name: "log axis with nothing above zero", fig: single(onlyZeros)},
		{name: "missing bar", fig: single(missing)},
		{name: "no categories", fig: single(empty)},
		{name: "no plots", fig: &figure{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			img := render(tc.fig)
			assert.Equal(t, image.Rect(0, 0, PlotWidth, PlotHeight), img.Bounds())
		})
	}
}

func TestWritePlots(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	rep, err := WritePlots(readTestInputs(t), out)
	require.NoError(t, err)
	assert.Empty(t, rep.Skipped)
	require.Len(t, rep.Written, 8)
	for _, path := range rep.Written {
		f, err := os.Open(path)
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, path)
		assert.Equal(t, image.Rect(0, 0, PlotWidth, PlotHeight), img.Bounds(), path)
	}
}

func TestWritePlots_nothing(t *testing.T) {
	t.Parallel()
	in, err := ReadInputs(t.TempDir())
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "plots")
	rep, err := WritePlots(in, out)
	require.NoError(t, err)
	assert.Empty(t, rep.Written)
	assert.Len(t, rep.Skipped, 8)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestReadInputs(t *testing.T) {
	t.Parallel()
	in := readTestInputs(t)
	// notes.txt has no results and is left out.
	assert.Equal(t, []string{filepath.Join(resultsDir, "admission.txt"), filepath.Join(resultsDir, "perf.txt")}, in.BenchFiles)
	var offered []float64
	for _, r := range in.Load {
		offered = append(offered, r.Rate)
	}
	assert.Equal(t, []float64{500, 1000, 2000, 4000, 0}, offered)
	require.Len(t, in.ColdStarts, 2)
	assert.False(t, in.ColdStarts[0].Cache)
	assert.Equal(t, 250*time.Millisecond, in.ColdStarts[1].Filling)
	assert.Len(t, in.Soak, 61)
	require.NotNil(t, in.Machine)
	assert.Equal(t, 2, in.Machine.CPUs)
	require.Len(t, in.Scale, 2)
	assert.Equal(t, []int{1000, 10000}, []int{in.Scale[0].Pods, in.Scale[1].Pods}, "sorted by Pod count")
}

func TestReadInputs_badFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "load-100.json"), []byte(`{"mode": 1}`), 0o600))
	_, err := ReadInputs(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "load-100.json")

	dir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ScaleFile), []byte(`[{"pods": 10}]`), 0o600))
	_, err = ReadInputs(dir)
	assert.ErrorContains(t, err, ScaleFile+": entry 0: no pods or no reviews")
}

// Filled markers are the measured rates, hollow ones the saturation run:
// the two must not be swapped for any shape.
func TestGlyphs_filledAndHollow(t *testing.T) {
	t.Parallel()
	filled := map[glyph]any{glyphCircle: draw.CircleGlyph{}, glyphSquare: draw.BoxGlyph{}, glyphTriangle: draw.PyramidGlyph{}}
	hollow := map[glyph]any{glyphCircle: draw.RingGlyph{}, glyphSquare: draw.SquareGlyph{}, glyphTriangle: draw.TriangleGlyph{}}
	for g, want := range filled {
		assert.Equal(t, want, g.drawer(false))
		assert.Equal(t, hollow[g], g.drawer(true))
	}
}
