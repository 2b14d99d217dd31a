package perfkit

import (
	"math"
	"strconv"
	"strings"
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
