package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
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
// tens of MiB of copies, or a watch cache of 100,000 Pods, then take the
// process past a 256 MiB container limit, and the kernel kills it
// (failing closed, every admission fails). With it, the collector runs
// earlier as the heap nears the limit.
func applyMemoryLimit(logger *slog.Logger) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		setFromCgroup(logger)
	}
}

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
