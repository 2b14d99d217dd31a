package perfkit

import (
	"image/color"
	"math"
	"strconv"
	"strings"
)

// PlotWidth and PlotHeight are the size in pixels of every PNG.
const (
	PlotWidth  = 1000
	PlotHeight = 560
)

var (
	white    = color.RGBA{255, 255, 255, 255}
	black    = color.RGBA{0, 0, 0, 255}
	darkGray = color.RGBA{80, 80, 80, 255}
	midGray  = color.RGBA{150, 150, 150, 255}

	// palette is Okabe and Ito's, told apart by people with any common
	// colour vision deficiency; series also differ by marker shape.
	palette = []color.RGBA{
		{0, 114, 178, 255},   // blue
		{230, 159, 0, 255},   // orange
		{0, 158, 115, 255},   // bluish green
		{213, 94, 0, 255},    // vermillion
		{204, 121, 167, 255}, // reddish purple
		{86, 180, 233, 255},  // sky blue
	}
)

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
