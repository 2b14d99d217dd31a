package perfkit

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/yunikorn-userinfo/userinfo/bench/internal/loadgen"
)

// File names in the results directory (build/bench), as hack/bench.sh and
// hack/soak.sh write them.
const (
	// BenchGlob matches `go test -bench` outputs; files without a result
	// line (logs) are ignored.
	BenchGlob = "*.txt"
	// LoadGlob matches loadgen --json reports, one per offered rate.
	LoadGlob = "load-*.json"
	// ColdStartGlob matches coldstart JSON results, with and without cache.
	ColdStartGlob = "coldstart*.json"
	// SoakFile holds the soak samples, one JSON object a line.
	SoakFile = "soak.jsonl"
	// MachineFile describes the machine of the run.
	MachineFile = "machine.json"
)

// Inputs is everything read from a results directory. Absent inputs are
// nil or empty.
type Inputs struct {
	Bench *BenchSet
	// BenchFiles are the files the benchmarks came from.
	BenchFiles []string
	// Load is sorted by offered rate, saturation runs last.
	Load       []*loadgen.Result
	ColdStarts []*ColdStartResult
	Soak       []Sample
	// Scale is from ScaleFile, by Pod count.
	Scale []ScaleResult
	// Machine is from MachineFile, or nil.
	Machine *Machine
}

// ReadInputs reads the results directory dir. A file that exists but
// cannot be parsed is an error: a silently missing table would hide it.
func ReadInputs(dir string) (*Inputs, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("read results directory: %w", err)
	}
	in := &Inputs{Bench: &BenchSet{Config: map[string]string{}}}
	benchFiles, _ := filepath.Glob(filepath.Join(dir, BenchGlob))
	for _, path := range benchFiles {
		set, err := parseBenchFile(path)
		if err != nil {
			return nil, err
		}
		if len(set.Benchmarks) > 0 {
			in.Bench.Merge(set)
			in.BenchFiles = append(in.BenchFiles, path)
		}
	}
	loadFiles, _ := filepath.Glob(filepath.Join(dir, LoadGlob))
	for _, path := range loadFiles {
		var r loadgen.Result
		if err := readJSON(path, &r); err != nil {
			return nil, err
		}
		if r.Mode != loadgen.ModeRate && r.Mode != loadgen.ModeSaturation {
			return nil, fmt.Errorf("read %s: mode %q: not a loadgen report", path, r.Mode)
		}
		in.Load = append(in.Load, &r)
	}
	slices.SortStableFunc(in.Load, func(a, b *loadgen.Result) int {
		return cmp.Compare(offered(a), offered(b))
	})
	coldFiles, _ := filepath.Glob(filepath.Join(dir, ColdStartGlob))
	for _, path := range coldFiles {
		var r ColdStartResult
		if err := readJSON(path, &r); err != nil {
			return nil, err
		}
		if len(r.Samples) == 0 {
			return nil, fmt.Errorf("read %s: no samples", path)
		}
		in.ColdStarts = append(in.ColdStarts, &r)
	}
	// Without cache first.
	slices.SortStableFunc(in.ColdStarts, func(a, b *ColdStartResult) int {
		return cmp.Compare(boolInt(a.Cache), boolInt(b.Cache))
	})
	var err error
	if in.Soak, err = ReadSoak(filepath.Join(dir, SoakFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if in.Scale, err = readScale(dir); err != nil {
		return nil, err
	}
	var m Machine
	if err := readJSON(filepath.Join(dir, MachineFile), &m); err == nil {
		in.Machine = &m
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return in, nil
}

// offered is the offered rate of a load run, +Inf-like for saturation so
// that it sorts last.
func offered(r *loadgen.Result) float64 {
	if r.Mode == loadgen.ModeSaturation {
		return 1e18
	}
	return r.Rate
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func parseBenchFile(path string) (*BenchSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read benchmarks: %w", err)
	}
	defer f.Close()
	set, err := ParseBench(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return set, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// ReadSoak reads soak samples, one JSON object a line, as `perfkit soak
// --out` writes them.
func ReadSoak(path string) ([]Sample, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var samples []Sample
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var s Sample
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return nil, fmt.Errorf("read %s line %d: %w", path, n, err)
		}
		samples = append(samples, s)
	}
	return samples, nil
}
