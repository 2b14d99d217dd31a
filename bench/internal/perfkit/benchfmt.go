package perfkit

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Units of the standard benchmark metrics.
const (
	UnitNsPerOp     = "ns/op"
	UnitBytesPerOp  = "B/op"
	UnitAllocsPerOp = "allocs/op"
)

// BenchSet is the parsed text of one or more `go test -bench` runs.
type BenchSet struct {
	// Benchmarks are in the order of their first result line.
	Benchmarks []*Benchmark
	// Config holds the last value of each configuration line seen
	// ("goos", "goarch", "cpu", ...), "pkg" excepted: that one is per
	// benchmark.
	Config map[string]string
}

// Benchmark is every result line of one benchmark of one package: with
// -count N there are N runs.
type Benchmark struct {
	// Pkg is the import path from the "pkg:" line before it, if any.
	Pkg string
	// Name is the full name without the GOMAXPROCS suffix, for example
	// "BenchmarkEvaluate/fixture=pod-small-create-inject/impl=wasm".
	Name string
	// Procs is the GOMAXPROCS suffix ("-2"), 1 when there is none (go test
	// leaves it out at GOMAXPROCS 1).
	Procs int
	// Runs are the result lines, in order.
	Runs []BenchRun
}

// BenchRun is one result line.
type BenchRun struct {
	Iterations int64
	// Values maps a unit ("ns/op", "B/op", "allocs/op", "MB/s" or a custom
	// b.ReportMetric unit) to its value.
	Values map[string]float64
}

// Func is the benchmark function's name, "BenchmarkEvaluate" for
// "BenchmarkEvaluate/fixture=x/impl=wasm".
func (b *Benchmark) Func() string {
	f, _, _ := strings.Cut(b.Name, "/")
	return f
}

// Param returns the value of the key=value part of the sub-benchmark name
// whose key is key, and whether there is one.
func (b *Benchmark) Param(key string) (string, bool) {
	parts := strings.Split(b.Name, "/")
	for _, p := range parts[1:] {
		if k, v, ok := strings.Cut(p, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// Median is the median of unit over the runs that report it (the mean of
// the two middle values for an even count), as benchstat summarises
// repeated runs, and how many runs reported it.
func (b *Benchmark) Median(unit string) (median float64, n int) {
	var vs []float64
	for _, r := range b.Runs {
		if v, ok := r.Values[unit]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, 0
	}
	slices.Sort(vs)
	mid := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[mid], len(vs)
	}
	return (vs[mid-1] + vs[mid]) / 2, len(vs)
}

// Find returns the benchmark named name (GOMAXPROCS suffix left out), of
// any package, or nil.
func (s *BenchSet) Find(name string) *Benchmark {
	for _, b := range s.Benchmarks {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// procsSuffix is the "-N" go test appends to a benchmark's full name when
// GOMAXPROCS is not 1. A sub-benchmark value ending in "-<digits>" run at
// GOMAXPROCS 1 would be misread as a suffix, as every benchfmt reader does;
// the fixture names have no such ending.
var procsSuffix = regexp.MustCompile(`-(\d+)$`)

// configLine is a "key: value" line of the benchmark format, lower-case key.
var configLine = regexp.MustCompile(`^([a-z][a-zA-Z0-9_-]*):\s*(.*)$`)

// ParseBench reads `go test -bench` output: configuration lines, result
// lines ("BenchmarkX-2  1000  123 ns/op  45 B/op  6 allocs/op") and
// anything else (PASS, ok, logs), which is ignored. Several outputs may be
// concatenated; results of the same package and name are merged into one
// Benchmark whatever the order.
func ParseBench(r io.Reader) (*BenchSet, error) {
	s := &BenchSet{Config: map[string]string{}}
	index := map[string]*Benchmark{}
	pkg := ""
	// pending is a name printed alone: go test prints the name before
	// running the benchmark, so output of the benchmark itself can come
	// between the name and its results.
	pending := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := sc.Text()
		if m := configLine.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "Benchmark") {
			if m[1] == "pkg" {
				pkg = strings.TrimSpace(m[2])
			} else {
				s.Config[m[1]] = strings.TrimSpace(m[2])
			}
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name := ""
		switch {
		case strings.HasPrefix(fields[0], "Benchmark"):
			name, fields = fields[0], fields[1:]
			if len(fields) == 0 || !isInteger(fields[0]) {
				// The name, then what the benchmark printed, on the
				// same line; the results follow on a line of their own.
				pending = name
				continue
			}
		case pending != "" && isInteger(fields[0]):
			name = pending
		case fields[0] == "---":
			// "--- SKIP: BenchmarkX", "--- FAIL: ...": no results follow.
			pending = ""
			continue
		default:
			continue
		}
		pending = ""
		run, ok, err := parseRun(fields)
		if err != nil {
			return nil, fmt.Errorf("parse benchmark line %d: %w", lineNo, err)
		}
		if !ok {
			continue
		}
		full, procs := splitProcs(name)
		key := pkg + "\x00" + full
		b := index[key]
		if b == nil {
			b = &Benchmark{Pkg: pkg, Name: full, Procs: procs}
			index[key] = b
			s.Benchmarks = append(s.Benchmarks, b)
		}
		b.Runs = append(b.Runs, run)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read benchmark output: %w", err)
	}
	return s, nil
}

// Merge adds the benchmarks and configuration of o to s.
func (s *BenchSet) Merge(o *BenchSet) {
	for k, v := range o.Config {
		s.Config[k] = v
	}
	for _, ob := range o.Benchmarks {
		var found *Benchmark
		for _, b := range s.Benchmarks {
			if b.Pkg == ob.Pkg && b.Name == ob.Name {
				found = b
				break
			}
		}
		if found == nil {
			cp := *ob
			cp.Runs = slices.Clone(ob.Runs)
			s.Benchmarks = append(s.Benchmarks, &cp)
			continue
		}
		found.Runs = append(found.Runs, ob.Runs...)
	}
}

// parseRun parses the fields after the name: the iteration count, then
// value-unit pairs. ok is false for lines that only look like results
// (a name followed by words, as in "BenchmarkX skipped").
func parseRun(fields []string) (BenchRun, bool, error) {
	if len(fields) < 3 || !isInteger(fields[0]) {
		return BenchRun{}, false, nil
	}
	n, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return BenchRun{}, false, fmt.Errorf("iterations %q: %w", fields[0], err)
	}
	run := BenchRun{Iterations: n, Values: map[string]float64{}}
	for i := 1; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return BenchRun{}, false, fmt.Errorf("value %q: %w", fields[i], err)
		}
		run.Values[fields[i+1]] = v
	}
	return run, true, nil
}

func splitProcs(name string) (string, int) {
	m := procsSuffix.FindStringSubmatchIndex(name)
	if m == nil {
		return name, 1
	}
	procs, err := strconv.Atoi(name[m[2]:m[3]])
	if err != nil || procs < 1 {
		return name, 1
	}
	return name[:m[0]], procs
}

func isInteger(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
