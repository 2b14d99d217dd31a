package loadgen

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procSample is what /proc tells about a process at one moment.
type procSample struct {
	cpu time.Duration // user + system time of all its threads, living and exited
	rss int64         // VmRSS, bytes
	hwm int64         // VmHWM, the peak RSS since the process started, bytes
}

// readProc samples /proc/pid/stat and /proc/pid/status.
func readProc(pid int) (procSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, fmt.Errorf("read process stat: %w", err)
	}
	ticks, err := parseStatCPU(stat)
	if err != nil {
		return procSample{}, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, fmt.Errorf("read process status: %w", err)
	}
	rss, hwm, err := ParseStatusMemory(status)
	if err != nil {
		return procSample{}, fmt.Errorf("parse /proc/%d/status: %w", pid, err)
	}
	// The kernel reads its per-CPU RSS counters once for each line, so in
	// a busy process VmHWM can lag VmRSS by a few pages.
	hwm = max(hwm, rss)
	return procSample{cpu: time.Duration(ticks) * time.Second / time.Duration(clockTicks()), rss: rss, hwm: hwm}, nil
}

// parseStatCPU returns utime + stime, in clock ticks, from a /proc/pid/stat
// line. The command name (field 2) may hold spaces and parentheses, so the
// fields are counted from its last closing parenthesis.
func parseStatCPU(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name")
	}
	// After ")" come fields 3 (state) onwards; utime and stime are 14 and 15.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return utime + stime, nil
}

// ParseStatusMemory returns VmRSS and VmHWM, in bytes, from the contents
// of /proc/<pid>/status.
func ParseStatusMemory(status []byte) (rss, hwm int64, err error) {
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", key, err)
		}
		if key == "VmRSS" {
			rss = kb * 1024
		} else {
			hwm = kb * 1024
		}
		found++
	}
	if found != 2 {
		// Kernel threads and zombies have no memory lines.
		return 0, 0, fmt.Errorf("no VmRSS and VmHWM lines")
	}
	return rss, hwm, nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/pid/stat times. Go
// has no sysconf without cgo, but the kernel passes the value to every
// process in its auxiliary vector (AT_CLKTCK); 100 is the usual value.
var clockTicks = sync.OnceValue(func() int64 {
	const atClkTck = 17
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	word := strconv.IntSize / 8
	for i := 0; i+2*word <= len(auxv); i += 2 * word {
		var key, val uint64
		if word == 8 {
			key, val = binary.NativeEndian.Uint64(auxv[i:]), binary.NativeEndian.Uint64(auxv[i+word:])
		} else {
			key, val = uint64(binary.NativeEndian.Uint32(auxv[i:])), uint64(binary.NativeEndian.Uint32(auxv[i+word:]))
		}
		if key == atClkTck && val > 0 {
			return int64(val)
		}
	}
	return 100
})
