package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

// benchFlags are the flags of `bench`: run's plus the timing knobs of kwctl
// bench.
type benchFlags struct {
	evalFlags
	warmUpTime      time.Duration
	measurementTime time.Duration
	numSamples      int
	output          string
}

func newBenchCommand(a *app) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench [MODULE] (-r REQUEST | --object FILE --user USER [--group GROUP]...) [-s SETTINGS | --settings-json JSON]",
		Short: "Time validate_settings and validate of a policy, like kwctl bench",
		Long: `Time the policy's validate_settings and validate operations separately, on one
instance and sequentially, and print per-call statistics in microseconds.

Each operation is first called for --warm-up-time, then timed call by call
for --measurement-time and at least --num-samples calls. Percentiles use the
nearest-rank method over the sorted samples. The inputs and flags are those
of run; a validate call that fails stops the benchmark.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runBench(cmd.Context(), args, f)
		},
	}
	f.register(cmd)
	fs := cmd.Flags()
	fs.DurationVar(&f.warmUpTime, "warm-up-time", time.Second, "time spent calling each operation before measuring")
	fs.DurationVar(&f.measurementTime, "measurement-time", 3*time.Second, "time spent measuring each operation")
	fs.IntVar(&f.numSamples, "num-samples", 100, "minimum number of timed calls of each operation")
	fs.StringVar(&f.output, "output", "text", "output format: text or json")
	return cmd
}

// benchResult holds the statistics of one operation. Durations are in
// microseconds.
type benchResult struct {
	Operation string  `json:"operation"`
	Samples   int     `json:"samples"`
	Min       float64 `json:"min_us"`
	P50       float64 `json:"p50_us"`
	P99       float64 `json:"p99_us"`
	Mean      float64 `json:"mean_us"`
	Max       float64 `json:"max_us"`
}

func (a *app) runBench(ctx context.Context, args []string, f *benchFlags) error {
	switch {
	case f.output != "text" && f.output != "json":
		return fmt.Errorf("invalid --output %q: want text or json", f.output)
	case f.numSamples < 1:
		return fmt.Errorf("invalid --num-samples %d: must be at least 1", f.numSamples)
	case f.warmUpTime < 0 || f.measurementTime < 0:
		return fmt.Errorf("invalid --warm-up-time or --measurement-time: must not be negative")
	}
	s, err := a.openEval(ctx, args, &f.evalFlags)
	if err != nil {
		return err
	}
	defer s.eng.Close(context.WithoutCancel(ctx))
	logger, in, eng := s.logger, s.in, s.eng

	payload := admission.ValidationPayload(in.request, in.settings)
	ops := []struct {
		name string
		call func(context.Context) error
	}{
		{name: engine.OperationValidateSettings, call: func(ctx context.Context) error {
			_, err := eng.ValidateSettings(ctx, in.settings)
			return err
		}},
		{name: engine.OperationValidate, call: func(ctx context.Context) error {
			_, err := eng.Validate(ctx, payload)
			return err
		}},
	}
	results := make([]benchResult, 0, len(ops))
	for _, op := range ops {
		logger.InfoContext(ctx, "benchmarking", "operation", op.name)
		samples, err := measure(ctx, op.call, f)
		if err != nil {
			return fmt.Errorf("bench %s: %w", op.name, err)
		}
		results = append(results, summarize(op.name, samples))
	}

	if f.output == "json" {
		out, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "%s\n", out)
		return err
	}
	return writeBenchTable(a.stdout, results)
}

// measure warms call up, then times it call by call until both the
// measurement time has passed and enough samples were taken.
func measure(ctx context.Context, call func(context.Context) error, f *benchFlags) ([]time.Duration, error) {
	for start := time.Now(); time.Since(start) < f.warmUpTime; {
		if err := call(ctx); err != nil {
			return nil, err
		}
	}
	samples := make([]time.Duration, 0, f.numSamples)
	for start := time.Now(); len(samples) < f.numSamples || time.Since(start) < f.measurementTime; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t := time.Now()
		err := call(ctx)
		samples = append(samples, time.Since(t))
		if err != nil {
			return nil, err
		}
	}
	return samples, nil
}

// summarize computes the statistics of samples, which must not be empty.
func summarize(operation string, samples []time.Duration) benchResult {
	sorted := slices.Sorted(slices.Values(samples))
	var sum time.Duration
	for _, s := range sorted {
		sum += s
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return benchResult{
		Operation: operation,
		Samples:   len(sorted),
		Min:       us(sorted[0]),
		P50:       us(percentile(sorted, 50)),
		P99:       us(percentile(sorted, 99)),
		Mean:      us(sum) / float64(len(sorted)),
		Max:       us(sorted[len(sorted)-1]),
	}
}

// percentile returns the nearest-rank p-th percentile of sorted, which must
// not be empty: the smallest sample that at least p% of the samples do not
// exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// writeBenchTable prints results as a small table: the operation name left
// aligned, the numbers right aligned.
func writeBenchTable(w io.Writer, results []benchResult) error {
	width := len("operation")
	for _, r := range results {
		width = max(width, len(r.Operation))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s %8s %10s %10s %10s %10s %10s\n", width, "operation", "samples", "min µs", "p50 µs", "p99 µs", "mean µs", "max µs")
	for _, r := range results {
		fmt.Fprintf(&b, "%-*s %8d %10.1f %10.1f %10.1f %10.1f %10.1f\n", width, r.Operation, r.Samples, r.Min, r.P50, r.P99, r.Mean, r.Max)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
