package perfkit

import (
	"math"
	"strconv"
	"strings"
)

// axis maps data values to pixels, linearly or logarithmically (base 10).
type axis struct {
	min, max float64
	log      bool
	// p0 and p1 are the pixels of min and max; p1 < p0 for a y axis.
	p0, p1 float64
	// ticks are the labelled values; step is the linear tick spacing (0 on
	// a log axis), which sets the labels' precision.
	ticks []float64
	step  float64
}

// pos is the pixel of v.
func (a *axis) pos(v float64) float64 {
	var f float64
	if a.log {
		f = (math.Log10(v) - math.Log10(a.min)) / (math.Log10(a.max) - math.Log10(a.min))
	} else {
		f = (v - a.min) / (a.max - a.min)
	}
	return a.p0 + f*(a.p1-a.p0)
}

// newAxis chooses a range that holds every value in [lo, hi] with round
// ends, and its ticks: about five to eight on a linear axis, decades (with
// 2 and 5 between them when the range is short) on a log one. fromZero
// makes a linear axis start at 0.
func newAxis(lo, hi float64, log, fromZero bool) axis {
	if log {
		return logAxis(lo, hi)
	}
	if fromZero {
		lo = min(lo, 0)
		hi = max(hi, 0)
	}
	if hi <= lo {
		// A single value: a range around it.
		if lo == 0 {
			hi = 1
		} else {
			lo, hi = lo-math.Abs(lo)*0.1, hi+math.Abs(hi)*0.1
		}
		if fromZero {
			lo = min(lo, 0)
		}
	}
	step := niceStep((hi - lo) / 6)
	a := axis{min: math.Floor(lo/step+1e-9) * step, max: math.Ceil(hi/step-1e-9) * step, step: step}
	for v := a.min; v <= a.max+step/2; v += step {
		a.ticks = append(a.ticks, roundTo(v, step))
	}
	return a
}

// niceStep rounds raw up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag*1.0000001 {
			return m * mag
		}
	}
	return 10 * mag
}

func logAxis(lo, hi float64) axis {
	if lo <= 0 {
		lo = hi / 1000
	}
	if hi <= 0 {
		lo, hi = 0.1, 1
	}
	// Candidate ticks: 1, 2, 5 times each power of ten in range.
	dLo, dHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	var candidates []float64
	for d := dLo; d <= dHi; d++ {
		for _, m := range []float64{1, 2, 5} {
			candidates = append(candidates, m*math.Pow(10, d))
		}
	}
	// The axis ends on the candidates just outside the data.
	a := axis{log: true, min: candidates[0], max: candidates[len(candidates)-1]}
	for _, c := range candidates {
		if c <= lo*1.0000001 {
			a.min = c
		}
	}
	for i := len(candidates) - 1; i >= 0; i-- {
		if candidates[i] >= hi/1.0000001 {
			a.max = candidates[i]
		}
	}
	if a.max <= a.min {
		a.max = a.min * 10
	}
	decades := math.Log10(a.max) - math.Log10(a.min)
	for _, c := range candidates {
		if c < a.min/1.0000001 || c > a.max*1.0000001 {
			continue
		}
		// More than three decades: powers of ten only.
		if decades > 3 && !isPowerOfTen(c) {
			continue
		}
		a.ticks = append(a.ticks, c)
	}
	return a
}

func isPowerOfTen(v float64) bool {
	l := math.Log10(v)
	return math.Abs(l-math.Round(l)) < 1e-9
}

func roundTo(v, step float64) float64 {
	return math.Round(v/step) * step
}

// label formats a tick value: as few decimals as the tick spacing needs,
// thousands as "k" from 10,000.
func (a *axis) label(v float64) string {
	if a.log {
		return compactNumber(v)
	}
	if math.Abs(v) >= 10000 && math.Mod(a.step, 1000) == 0 {
		return compactNumber(v)
	}
	// As many decimals as the step has: 0.25 needs two, 2.5 one.
	decimals := 0
	for scaled := a.step; decimals < 6 && math.Abs(scaled-math.Round(scaled)) > 1e-9*math.Max(1, scaled); decimals++ {
		scaled *= 10
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// compactNumber formats v with at most three significant digits, thousands
// and millions as k and M.
func compactNumber(v float64) string {
	switch av := math.Abs(v); {
	case av >= 1e6:
		return trimFloat(v/1e6) + "M"
	case av >= 1e4:
		return trimFloat(v/1e3) + "k"
	default:
		return trimFloat(v)
	}
}

func trimFloat(v float64) string {
	s := strconv.FormatFloat(v, 'g', 3, 64)
	if strings.ContainsAny(s, "e") {
		s = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return s
}

// thousands formats an integer-ish value with comma separators: 12,345.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// durationUnit picks the unit that shows nanoseconds up to maxNs with
// short numbers, and its size in nanoseconds.
func durationUnit(maxNs float64) (string, float64) {
	switch {
	case maxNs >= 1e9:
		return "s", 1e9
	case maxNs >= 1e6:
		return "ms", 1e6
	case maxNs >= 1e3:
		return "µs", 1e3
	default:
		return "ns", 1
	}
}

// fmtNs formats nanoseconds with three significant digits in a unit chosen
// for the value: "850 ns", "12.3 µs", "1.25 ms".
func fmtNs(ns float64) string {
	unit, size := durationUnit(ns)
	return sig3(ns/size) + " " + unit
}

// sig3 formats v with three significant digits, without exponent.
func sig3(v float64) string {
	switch av := math.Abs(v); {
	case av >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case av >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
