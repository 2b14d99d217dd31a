package perfkit

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func nan() float64 { return math.NaN() }

func TestNewAxis(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		lo, hi   float64
		log      bool
		fromZero bool
		min, max float64
		labels   []string
	}{
		{name: "rates from zero", lo: 500, hi: 5230, fromZero: true, min: 0, max: 6000,
			labels: []string{"0", "1000", "2000", "3000", "4000", "5000", "6000"}},
		{name: "quarter steps", lo: 0, hi: 1.4, min: 0, max: 1.5,
			labels: []string{"0.00", "0.25", "0.50", "0.75", "1.00", "1.25", "1.50"}},
		{name: "thousands as k", lo: 0, hi: 60000, min: 0, max: 60000,
			labels: []string{"0", "10k", "20k", "30k", "40k", "50k", "60k"}},
		{name: "single value", lo: 3, hi: 3, min: 2.7, max: 3.3,
			labels: []string{"2.7", "2.8", "2.9", "3.0", "3.1", "3.2", "3.3"}},
		{name: "log, short range", lo: 0.6, hi: 15, log: true, min: 0.5, max: 20,
			labels: []string{"0.5", "1", "2", "5", "10", "20"}},
		{name: "log, long range: decades only", lo: 0.02, hi: 300, log: true, min: 0.02, max: 500,
			labels: []string{"0.1", "1", "10", "100"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAxis(tc.lo, tc.hi, tc.log, tc.fromZero)
			assert.InDelta(t, tc.min, a.min, 1e-9)
			assert.InDelta(t, tc.max, a.max, 1e-9)
			var labels []string
			for _, v := range a.ticks {
				labels = append(labels, a.label(v))
			}
			assert.Equal(t, tc.labels, labels)
		})
	}
}

func TestAxis_pos(t *testing.T) {
	t.Parallel()
	lin := axis{min: 0, max: 10, p0: 100, p1: 0}
	assert.InDelta(t, 75, lin.pos(2.5), 1e-9)
	lg := axis{min: 1, max: 100, log: true, p0: 0, p1: 200}
	assert.InDelta(t, 100, lg.pos(10), 1e-9)
}

func TestFormatting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "nanoseconds", got: fmtNs(850), want: "850 ns"},
		{name: "microseconds", got: fmtNs(12_345), want: "12.3 µs"},
		{name: "milliseconds", got: fmtNs(1_254_000), want: "1.25 ms"},
		{name: "thousands", got: thousands(1234567.4), want: "1,234,567"},
		{name: "small thousands", got: thousands(999), want: "999"},
		{name: "negative thousands", got: thousands(-5230), want: "-5,230"},
		{name: "compact", got: compactNumber(25000), want: "25k"},
		{name: "plot text is ASCII", got: asciiText("12 µs, 1.5×, é"), want: "12 us, 1.5x, ?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, tc.got)
		})
	}
}
