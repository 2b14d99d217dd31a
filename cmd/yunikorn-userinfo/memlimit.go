package main

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/yunikorn-userinfo/userinfo/host/kubecap"
)

// cgroupMemoryMax is where cgroup v2 tells a container its memory limit.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// memoryLimitShare is the part of the container's memory limit the Go
// runtime aims to stay under; the rest is for the policy instances'
// linear memory growing between two collections, and the runtime itself.
const memoryLimitShare = 0.8

// applyMemoryLimit gives the Go runtime a soft memory limit when the
// process runs under a cgroup memory limit and GOMEMLIMIT is not set.
// Without one, the collector lets the heap grow to twice what is live
// before it runs: four huge requests at once, each a few MiB of body and
// tens of MiB of copies, then take the process past a 256 MiB container
// limit, and the kernel kills it (failing closed, every admission fails).
// With it, the collector runs earlier as the heap nears the limit.
//
// Either limit (GOMEMLIMIT's or this one) is then lowered by what the
// watch caches hold outside the Go heap (kubecap.OffHeapBytes), which the
// runtime does not count, so that the process as a whole stays where the
// limit meant it to.
func applyMemoryLimit(logger *slog.Logger) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		setFromCgroup(logger)
	}
	base := debug.SetMemoryLimit(-1)
	if base == math.MaxInt64 {
		return // no limit
	}
	kubecap.OnOffHeapChange(func(offHeap int64) { debug.SetMemoryLimit(goMemoryLimit(base, offHeap)) })
}

// goMemoryLimit is the Go runtime's share of limit when the watch caches
// hold offHeap bytes outside its heap: the rest, but never under a
// quarter of limit (a collection at every allocation would stall reviews
// long before the container is killed).
func goMemoryLimit(limit, offHeap int64) int64 { return max(limit-offHeap, limit/4) }

func setFromCgroup(logger *slog.Logger) {
	raw, err := os.ReadFile(cgroupMemoryMax)
	if err != nil {
		return // not in a cgroup v2 container
	}
	limit, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || limit <= 0 {
		return // "max": no limit
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	logger.Info("Go memory limit set from the container's", "cgroup_limit_bytes", limit, "gomemlimit_bytes", soft)
}
