package perfkit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

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
		{name: "seconds", got: fmtNs(2.5e9), want: "2.50 s"},
		{name: "thousands", got: thousands(1234567.4), want: "1,234,567"},
		{name: "small thousands", got: thousands(999), want: "999"},
		{name: "negative thousands", got: thousands(-5230), want: "-5,230"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, tc.got)
		})
	}
}
