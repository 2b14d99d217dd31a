//go:build unix

package loadgen

import (
	"runtime"
	"syscall"
	"time"
)

// selfUsage returns this process's user + system CPU time and its peak RSS
// in bytes.
func selfUsage() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	maxRSS := int64(ru.Maxrss)
	if runtime.GOOS != "darwin" && runtime.GOOS != "ios" {
		maxRSS *= 1024 // kilobytes everywhere but on Apple systems
	}
	return cpu, maxRSS
}
