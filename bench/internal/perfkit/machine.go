package perfkit

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where the numbers were measured.
type Machine struct {
	// CPU is the model name from /proc/cpuinfo.
	CPU string `json:"cpu"`
	// CPUs is the number of logical CPUs the process may use.
	CPUs int `json:"cpus"`
	// MemoryBytes is MemTotal from /proc/meminfo, 0 when unknown.
	MemoryBytes int64  `json:"memory_bytes"`
	Kernel      string `json:"kernel"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	// GoVersion is the toolchain perfkit was built with, which bench.sh
	// also uses for the benchmarks.
	GoVersion string `json:"go_version"`
}

// ThisMachine describes the machine perfkit runs on. Fields it cannot read
// are left empty.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = procField(b, "model name")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		kb, err := strconv.ParseInt(strings.TrimSuffix(procField(b, "MemTotal"), " kB"), 10, 64)
		if err == nil {
			m.MemoryBytes = kb << 10
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// procField returns the value of the first "key: value" line of a /proc
// file whose key is key.
func procField(b []byte, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
