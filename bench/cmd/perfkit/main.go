// Command perfkit is the benchmark tooling of the project: it measures the
// cold start of `yunikorn-userinfo serve`, samples a running server's
// memory over a soak, and turns the results hack/bench.sh leaves in
// build/bench into the tables of docs/PERFORMANCE.md. It is a development
// tool, run from the repository.
package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/yunikorn-userinfo/userinfo/bench/internal/loadgen"
	"github.com/yunikorn-userinfo/userinfo/bench/internal/perfkit"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1
	exitGrowth = 3 // soak --fail-on-growth saw growth
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errGrowth reports a soak whose memory or goroutines grew; the summary is
// already printed.
var errGrowth = errors.New("growth over the soak")

// app is what subcommands share.
type app struct {
	stdout, stderr io.Writer
	verbose        bool
}

func (a *app) logger() *slog.Logger {
	level := slog.LevelWarn
	if a.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
}

// run is the testable main: it runs the command line args and returns the
// exit code. Errors are printed once, on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "perfkit",
		Short: "Cold start and soak measurements and tables of the benchmark results",
		Long: `perfkit measures what go test -bench and loadgen do not (coldstart, soak) and
turns every result hack/bench.sh leaves in a directory into Markdown tables
(tables). Files it reads in that directory:

  *.txt             go test -bench outputs (files without results are ignored)
  load-*.json       loadgen --json reports, one per offered rate
  coldstart*.json   coldstart --out results, with and without cache
  soak.jsonl        soak --out samples
  machine.json      machine --out description of the machine
  scale.json        e2e/cmd/scalebench results, one per Pod count`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.PersistentFlags().BoolVarP(&a.verbose, "verbose", "v", false, "log progress on stderr")
	root.AddCommand(a.coldstartCommand(), a.soakCommand(), a.tablesCommand(), a.showCommand(),
		a.machineCommand())

	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errGrowth):
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return exitGrowth
	default:
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return exitError
	}
}

func (a *app) coldstartCommand() *cobra.Command {
	var (
		opts    perfkit.ColdStartOptions
		jsonOut bool
		outFile string
	)
	cmd := &cobra.Command{
		Use:   "coldstart --binary FILE [--runs N] [--cache-dir DIR]",
		Short: "Time serve from exec to the first 200 from /readyz",
		Long: `coldstart starts BINARY serve --self-signed on free 127.0.0.1 ports, --runs
times one after the other, and measures from just before exec to the first
200 from https /readyz (probed every --poll-interval, with the CA the server
writes). Each server is stopped with SIGTERM (SIGKILL after 5s).

With --cache-dir (wazero's compilation cache, which should be empty), a first
start fills the cache; it is reported apart ("filling the cache") and the
timed runs start from the filled cache.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Logger = a.logger()
			res, err := perfkit.ColdStart(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if outFile != "" {
				if err := writeJSONFile(outFile, res); err != nil {
					return err
				}
			}
			if jsonOut {
				return writeJSON(a.stdout, res)
			}
			return perfkit.WriteColdStartText(a.stdout, res)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.Binary, "binary", "build/yunikorn-userinfo", "the yunikorn-userinfo executable")
	fs.IntVar(&opts.Runs, "runs", 10, "timed starts")
	fs.StringVar(&opts.CacheDir, "cache-dir", "", "compilation cache directory passed to serve (default: no cache)")
	fs.StringArrayVar(&opts.Args, "arg", nil, "extra serve argument (repeatable)")
	fs.DurationVar(&opts.PollInterval, "poll-interval", 2*time.Millisecond, "time between two /readyz probes")
	fs.DurationVar(&opts.ReadyTimeout, "ready-timeout", 10*time.Second, "longest wait for one start")
	fs.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	fs.StringVar(&outFile, "out", "", "also write the result as JSON to this file")
	return cmd
}

func (a *app) soakCommand() *cobra.Command {
	var (
		opts         perfkit.SoakOptions
		outFile      string
		csvFile      string
		jsonOut      bool
		failOnGrowth bool
	)
	cmd := &cobra.Command{
		Use:   "soak --pid PID [--metrics-url URL] [--interval 10s] [--duration 10m]",
		Short: "Sample a running server's memory and goroutines, and judge their trend",
		Long: `soak samples a running server every --interval for --duration: VmRSS and
VmHWM from /proc/PID/status; go_goroutines, process_resident_memory_bytes and
go_memstats_heap_inuse_bytes from --metrics-url. It writes the samples as
they are taken (--out: JSON lines, --csv) and prints the first, last and
maximum of each, and least-squares trends of RSS and goroutines over the
second half of the soak with a verdict: flat unless RSS rose by more than
max(1 MiB, 2% of its mean) or goroutines by more than max(2, 5%) over that
half.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Logger = a.logger()
			rec, err := newSampleRecorder(outFile, csvFile)
			if err != nil {
				return err
			}
			opts.OnSample = rec.record
			samples, soakErr := perfkit.Soak(cmd.Context(), opts)
			if err := rec.close(); err != nil {
				return err
			}
			sum := perfkit.SummarizeSoak(samples)
			if jsonOut {
				err = writeJSON(a.stdout, sum)
			} else {
				err = perfkit.WriteSoakText(a.stdout, sum)
			}
			if err != nil {
				return fmt.Errorf("write summary: %w", err)
			}
			if soakErr != nil {
				return soakErr
			}
			if failOnGrowth && sum.Growing() {
				return errGrowth
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&opts.PID, "pid", 0, "server process id (required)")
	fs.StringVar(&opts.MetricsURL, "metrics-url", "", "the server's Prometheus /metrics URL, e.g. http://127.0.0.1:9090/metrics")
	fs.DurationVar(&opts.Interval, "interval", 10*time.Second, "time between samples")
	fs.DurationVar(&opts.Duration, "duration", 10*time.Minute, "how long to sample")
	fs.StringVar(&outFile, "out", "", "write the samples to this file, one JSON object a line")
	fs.StringVar(&csvFile, "csv", "", "write the samples to this CSV file")
	fs.BoolVar(&jsonOut, "json", false, "print the summary as JSON")
	fs.BoolVar(&failOnGrowth, "fail-on-growth", false, "exit with status 3 when a trend is growing")
	_ = cmd.MarkFlagRequired("pid")
	return cmd
}

func (a *app) tablesCommand() *cobra.Command {
	var in, out string
	cmd := &cobra.Command{
		Use:   "tables [--in build/bench] [--out docs/perf/results.md]",
		Short: "Write the Markdown tables of the results in a directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inputs, err := perfkit.ReadInputs(in)
			if err != nil {
				return err
			}
			if out == "-" {
				return perfkit.WriteTables(a.stdout, inputs)
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return fmt.Errorf("create table directory: %w", err)
			}
			var b strings.Builder
			if err := perfkit.WriteTables(&b, inputs); err != nil {
				return err
			}
			if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
				return fmt.Errorf("write tables: %w", err)
			}
			fmt.Fprintf(a.stdout, "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&in, "in", "build/bench", "results directory")
	cmd.Flags().StringVar(&out, "out", "docs/perf/results.md", `Markdown file, "-" for stdout`)
	return cmd
}

func (a *app) showCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show FILE...",
		Short: "Print result files for people: loadgen reports, coldstart results, soak samples",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for i, path := range args {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				if err := a.show(path); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// show prints one file, recognised by its content.
func (a *app) show(path string) error {
	if strings.HasSuffix(path, ".jsonl") {
		samples, err := perfkit.ReadSoak(path)
		if err != nil {
			return fmt.Errorf("read soak samples: %w", err)
		}
		return perfkit.WriteSoakText(a.stdout, perfkit.SummarizeSoak(samples))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read result: %w", err)
	}
	var probe struct {
		Mode    string          `json:"mode"`
		Samples json.RawMessage `json:"samples_ns"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	switch {
	case probe.Mode != "":
		var r loadgen.Result
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		return loadgen.WriteText(a.stdout, &r)
	case probe.Samples != nil:
		var r perfkit.ColdStartResult
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		return perfkit.WriteColdStartText(a.stdout, &r)
	default:
		return fmt.Errorf("read %s: neither a loadgen report nor a coldstart result", path)
	}
}

func (a *app) machineCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "machine [--out FILE]",
		Short: "Describe this machine (CPU, cores, memory, kernel, Go) as JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m := perfkit.ThisMachine()
			if out != "" {
				return writeJSONFile(out, m)
			}
			return writeJSON(a.stdout, m)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write to this file instead of stdout")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

func writeJSONFile(path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create result file: %w", err)
	}
	if err := writeJSON(f, v); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write result file: %w", err)
	}
	return nil
}

// sampleRecorder writes soak samples to JSON lines and CSV files as they
// come, flushed each time, so an interrupted soak keeps its samples.
type sampleRecorder struct {
	jsonl   *os.File
	csvFile *os.File
	csv     *csv.Writer
}

func newSampleRecorder(jsonlPath, csvPath string) (*sampleRecorder, error) {
	r := &sampleRecorder{}
	var err error
	if jsonlPath != "" {
		if r.jsonl, err = os.Create(jsonlPath); err != nil {
			return nil, fmt.Errorf("create sample file: %w", err)
		}
	}
	if csvPath != "" {
		if r.csvFile, err = os.Create(csvPath); err != nil {
			r.close()
			return nil, fmt.Errorf("create csv file: %w", err)
		}
		r.csv = csv.NewWriter(r.csvFile)
		_ = r.csv.Write([]string{"elapsed_s", "time", "rss_bytes", "hwm_bytes", "goroutines",
			"process_resident_memory_bytes", "heap_inuse_bytes", "error"})
	}
	return r, nil
}

func (r *sampleRecorder) record(s perfkit.Sample) error {
	if r.jsonl != nil {
		line, err := json.Marshal(s)
		if err != nil {
			return err
		}
		if _, err := r.jsonl.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	if r.csv != nil {
		_ = r.csv.Write([]string{
			strconv.FormatFloat(s.Elapsed.Seconds(), 'f', 3, 64), s.Time.Format(time.RFC3339Nano),
			strconv.FormatInt(s.RSS, 10), strconv.FormatInt(s.HWM, 10), strconv.FormatInt(s.Goroutines, 10),
			strconv.FormatInt(s.ProcessRSS, 10), strconv.FormatInt(s.HeapInuse, 10), s.Error,
		})
		r.csv.Flush()
		return r.csv.Error()
	}
	return nil
}

func (r *sampleRecorder) close() error {
	var errs []error
	if r.jsonl != nil {
		errs = append(errs, r.jsonl.Close())
	}
	if r.csvFile != nil {
		errs = append(errs, r.csvFile.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sample files: %w", err)
	}
	return nil
}
