package loadgen

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func Test_parseStatCPU(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stat    string
		want    uint64
		wantErr string
	}{
		{
			name: "plain",
			stat: "4242 (yunikorn-userinfo) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 9 0 123 456 789\n",
			want: 175,
		},
		{
			name: "command with spaces and parentheses",
			stat: "77 (a) b (c)) R 1 77 77 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 2 3",
			want: 7,
		},
		{
			name:    "truncated",
			stat:    "77 (a) R 1 77",
			wantErr: "3 fields after the command name, want at least 13",
		},
		{
			name:    "no command",
			stat:    "77",
			wantErr: "no command name",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStatCPU([]byte(tc.stat))
			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseStatusMemory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   string
		rss, hwm int64
		err      string
	}{
		{name: "both", status: "Name:\tx\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t3\n", rss: 1 << 20, hwm: 2 << 20},
		{name: "kernel thread", status: "Name:\tkthreadd\nThreads:\t1\n", err: "no VmRSS and VmHWM lines"},
		{name: "bad number", status: "VmRSS:\tlots kB\nVmHWM:\t1 kB\n", err: "VmRSS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rss, hwm, err := ParseStatusMemory([]byte(tc.status))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.rss, rss)
			assert.Equal(t, tc.hwm, hwm)
		})
	}
}

func Test_readProc(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	s, err := readProc(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, s.rss)
	assert.GreaterOrEqual(t, s.hwm, s.rss)
	assert.GreaterOrEqual(t, clockTicks(), int64(1))

	_, err = readProc(1 << 30) // above any pid_max
	assert.ErrorContains(t, err, "read process stat")
}
