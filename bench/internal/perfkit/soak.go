package perfkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/yunikorn-userinfo/userinfo/bench/internal/loadgen"
)

// SoakOptions configure Soak. Zero values are replaced by the documented
// defaults in setDefaults.
type SoakOptions struct {
	// PID is the server process, read from /proc. Required.
	PID int
	// MetricsURL is the server's Prometheus endpoint
	// (http://127.0.0.1:9090/metrics). Default none: /proc only.
	MetricsURL string
	// Interval is the time between two samples. Default 10s.
	Interval time.Duration
	// Duration is how long to sample; the last sample is taken at its end.
	// Default 10m.
	Duration time.Duration
	// Client fetches MetricsURL. Default: a client with a timeout of the
	// interval, at most 5s.
	Client *http.Client
	// OnSample, if set, is called with every sample as it is taken, so that
	// a long soak leaves its samples on disk even if it is interrupted.
	OnSample func(Sample) error
	// Logger receives a warning for every failed scrape. Default: discard.
	Logger *slog.Logger
}

func (o *SoakOptions) setDefaults() {
	if o.Interval == 0 {
		o.Interval = 10 * time.Second
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Minute
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: min(o.Interval, 5*time.Second)}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Sample is the server's memory at one moment. Metrics that could not be
// read are -1.
type Sample struct {
	// Elapsed is the time since the first sample.
	Elapsed time.Duration `json:"elapsed_ns"`
	Time    time.Time     `json:"time"`
	// RSS is VmRSS and HWM VmHWM (the peak RSS since the process started)
	// from /proc/<pid>/status, in bytes.
	RSS int64 `json:"rss_bytes"`
	HWM int64 `json:"hwm_bytes"`
	// Goroutines is go_goroutines.
	Goroutines int64 `json:"goroutines"`
	// ProcessRSS is process_resident_memory_bytes, the server's own view of
	// its RSS.
	ProcessRSS int64 `json:"process_resident_memory_bytes"`
	// HeapInuse is go_memstats_heap_inuse_bytes.
	HeapInuse int64 `json:"heap_inuse_bytes"`
	// Error is the failed scrape, if any.
	Error string `json:"error,omitempty"`
}

// Soak samples the server every Interval for Duration and returns the
// samples. It stops early, with the samples so far and an error, when the
// process is gone or ctx is done.
func Soak(ctx context.Context, opts SoakOptions) ([]Sample, error) {
	opts.setDefaults()
	switch {
	case opts.PID <= 0:
		return nil, fmt.Errorf("pid %d: want a process id", opts.PID)
	case opts.Interval < 0 || opts.Duration < 0:
		return nil, errors.New("negative interval or duration")
	}
	var samples []Sample
	start := time.Now()
	ticker := time.NewTicker(opts.Interval)
	defer ticker.Stop()
	for {
		s, err := takeSample(ctx, &opts, start)
		if err != nil {
			return samples, err
		}
		samples = append(samples, s)
		if opts.OnSample != nil {
			if err := opts.OnSample(s); err != nil {
				return samples, fmt.Errorf("record sample: %w", err)
			}
		}
		if s.Elapsed >= opts.Duration {
			return samples, nil
		}
		left := opts.Duration - time.Since(start)
		if left <= 0 {
			// A slow sample (a scrape timing out) ran past the end:
			// take the final one now, so the last sample still marks
			// the end of the duration.
			continue
		}
		wait := ticker.C
		var last <-chan time.Time
		if left < opts.Interval {
			// The last sample at the end of the duration, not after it.
			last = time.After(left)
			wait = nil
		}
		select {
		case <-ctx.Done():
			return samples, fmt.Errorf("sample: %w", ctx.Err())
		case <-wait:
		case <-last:
		}
	}
}

func takeSample(ctx context.Context, opts *SoakOptions, start time.Time) (Sample, error) {
	now := time.Now()
	s := Sample{Elapsed: now.Sub(start), Time: now.UTC(), Goroutines: -1, ProcessRSS: -1, HeapInuse: -1}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", opts.PID))
	if err != nil {
		return s, fmt.Errorf("read server status: %w", err)
	}
	if s.RSS, s.HWM, err = loadgen.ParseStatusMemory(status); err != nil {
		return s, fmt.Errorf("parse /proc/%d/status: %w", opts.PID, err)
	}
	if opts.MetricsURL == "" {
		return s, nil
	}
	m, err := scrape(ctx, opts.Client, opts.MetricsURL)
	if err != nil {
		s.Error = err.Error()
		opts.Logger.WarnContext(ctx, "scrape failed", "error", err)
		return s, nil
	}
	get := func(name string) int64 {
		if v, ok := m[name]; ok && !math.IsNaN(v) {
			return int64(v)
		}
		return -1
	}
	s.Goroutines = get("go_goroutines")
	s.ProcessRSS = get("process_resident_memory_bytes")
	s.HeapInuse = get("go_memstats_heap_inuse_bytes")
	return s, nil
}

// scrape fetches a Prometheus text exposition and returns its samples
// without labels.
func scrape(ctx context.Context, client *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("build metrics request: %w", err)
	}
	// Text format: the protobuf one is what a client without this header
	// might be offered.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get metrics: %s", resp.Status)
	}
	m, err := parseMetrics(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return m, nil
}

// parseMetrics reads the unlabelled samples of a Prometheus text
// exposition: "name value [timestamp]". Labelled samples and comments are
// skipped: the metrics soak reads have no labels.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || strings.ContainsRune(line, '{') {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		m[f[0]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// Trend is a least-squares line fitted to one metric.
type Trend struct {
	// PerHour is the slope, in the metric's unit per hour.
	PerHour float64 `json:"per_hour"`
	// Change is the slope times the window fitted: how much the fitted
	// line rose (or fell) over it.
	Change float64 `json:"change"`
	// Intercept is the fitted value at the window's start.
	Intercept float64 `json:"intercept"`
	// Mean is the metric's mean over the window.
	Mean float64 `json:"mean"`
	// Threshold is the largest Change called flat.
	Threshold float64 `json:"threshold"`
	// Growing is Change > Threshold.
	Growing bool `json:"growing"`
}

// SoakSummary is the reading of a soak.
type SoakSummary struct {
	Samples int `json:"samples"`
	// First, Last and Max are per metric, over every sample.
	First Sample `json:"first"`
	Last  Sample `json:"last"`
	Max   Sample `json:"max"`
	// From and To bound the window the trends are fitted over: the second
	// half of the soak, after the warmup and the first garbage
	// collections have settled.
	From time.Duration `json:"from_ns"`
	To   time.Duration `json:"to_ns"`
	// RSS is in bytes; Goroutines is nil when go_goroutines was never read.
	RSS        *Trend `json:"rss,omitempty"`
	Goroutines *Trend `json:"goroutines,omitempty"`
}

// Growing tells whether either trend is above its threshold.
func (s *SoakSummary) Growing() bool {
	return (s.RSS != nil && s.RSS.Growing) || (s.Goroutines != nil && s.Goroutines.Growing)
}

// Thresholds of SummarizeSoak: what a trend may rise over the window fitted
// and still be called flat. RSS moves with the garbage collector's cycles
// and the allocator's spans, goroutines with connections coming and going.
const (
	rssFlatBytes     = 1 << 20 // or rssFlatFraction of the mean, whichever is larger
	rssFlatFraction  = 0.02
	goroutinesFlat   = 2 // or goroutinesFraction of the mean
	goroutinesFactor = 0.05
)

// SummarizeSoak reads samples: first, last and maximum of every metric and
// a least-squares trend of RSS and goroutines over the second half of the
// soak. It needs at least 4 samples for trends.
func SummarizeSoak(samples []Sample) SoakSummary {
	sum := SoakSummary{Samples: len(samples)}
	if len(samples) == 0 {
		return sum
	}
	sum.First, sum.Last = samples[0], samples[len(samples)-1]
	sum.Max = Sample{Goroutines: -1, ProcessRSS: -1, HeapInuse: -1}
	for _, s := range samples {
		sum.Max.RSS = max(sum.Max.RSS, s.RSS)
		sum.Max.HWM = max(sum.Max.HWM, s.HWM)
		sum.Max.Goroutines = max(sum.Max.Goroutines, s.Goroutines)
		sum.Max.ProcessRSS = max(sum.Max.ProcessRSS, s.ProcessRSS)
		sum.Max.HeapInuse = max(sum.Max.HeapInuse, s.HeapInuse)
	}
	if len(samples) < 4 {
		return sum
	}
	half := samples[len(samples)/2:]
	sum.From, sum.To = half[0].Elapsed, half[len(half)-1].Elapsed
	if t, ok := fitTrend(half, func(s Sample) int64 { return s.RSS }); ok {
		t.Threshold = max(rssFlatBytes, rssFlatFraction*t.Mean)
		t.Growing = t.Change > t.Threshold
		sum.RSS = &t
	}
	if t, ok := fitTrend(half, func(s Sample) int64 { return s.Goroutines }); ok {
		t.Threshold = max(goroutinesFlat, goroutinesFactor*t.Mean)
		t.Growing = t.Change > t.Threshold
		sum.Goroutines = &t
	}
	return sum
}

// fitTrend fits value over the samples where it is known (not negative).
func fitTrend(samples []Sample, value func(Sample) int64) (Trend, bool) {
	var xs, ys []float64
	for _, s := range samples {
		if v := value(s); v >= 0 {
			xs = append(xs, s.Elapsed.Hours())
			ys = append(ys, float64(v))
		}
	}
	if len(xs) < 3 {
		return Trend{}, false
	}
	slope, intercept, ok := leastSquares(xs, ys)
	if !ok {
		return Trend{}, false
	}
	var mean float64
	for _, y := range ys {
		mean += y
	}
	mean /= float64(len(ys))
	span := xs[len(xs)-1] - xs[0]
	return Trend{PerHour: slope, Change: slope * span, Intercept: intercept + slope*xs[0], Mean: mean}, true
}

// leastSquares fits y = slope*x + intercept; ok is false when every x is
// the same.
func leastSquares(xs, ys []float64) (slope, intercept float64, ok bool) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= n
	my /= n
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return 0, 0, false
	}
	slope = sxy / sxx
	return slope, my - slope*mx, true
}

// WriteSoakText writes the summary for people: first, last and maximum of
// every metric, the trends and a verdict.
func WriteSoakText(w io.Writer, s SoakSummary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "samples: %d over %s\n", s.Samples, s.Last.Elapsed.Round(time.Second))
	row := func(name string, first, last, peak int64, format func(int64) string) {
		if peak < 0 {
			fmt.Fprintf(&b, "%-22s not read\n", name)
			return
		}
		fmt.Fprintf(&b, "%-22s first %s  last %s  max %s\n", name, format(first), format(last), format(peak))
	}
	row("rss (VmRSS)", s.First.RSS, s.Last.RSS, s.Max.RSS, fmtMiB)
	row("peak rss (VmHWM)", s.First.HWM, s.Last.HWM, s.Max.HWM, fmtMiB)
	row("process rss (metrics)", s.First.ProcessRSS, s.Last.ProcessRSS, s.Max.ProcessRSS, fmtMiB)
	row("go heap in use", s.First.HeapInuse, s.Last.HeapInuse, s.Max.HeapInuse, fmtMiB)
	row("goroutines", s.First.Goroutines, s.Last.Goroutines, s.Max.Goroutines, fmtCount)
	if s.RSS == nil && s.Goroutines == nil {
		b.WriteString("verdict: too few samples for a trend (need 4)\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "trend over the second half (%s to %s), least squares:\n", s.From.Round(time.Second), s.To.Round(time.Second))
	verdict := func(t *Trend) string {
		if t.Growing {
			return "GROWING"
		}
		return "flat"
	}
	if t := s.RSS; t != nil {
		fmt.Fprintf(&b, "  rss        %+.2f MiB/h, %+.2f MiB over the window (flat up to %.2f MiB): %s\n",
			t.PerHour/(1<<20), t.Change/(1<<20), t.Threshold/(1<<20), verdict(t))
	}
	if t := s.Goroutines; t != nil {
		fmt.Fprintf(&b, "  goroutines %+.1f/h, %+.1f over the window (flat up to %.1f): %s\n",
			t.PerHour, t.Change, t.Threshold, verdict(t))
	} else {
		b.WriteString("  goroutines not read (no --metrics-url, or scrapes failed)\n")
	}
	if s.Growing() {
		b.WriteString("verdict: GROWTH\n")
	} else {
		b.WriteString("verdict: flat\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtMiB(v int64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20))
}

func fmtCount(v int64) string {
	if v < 0 {
		return "n/a"
	}
	return strconv.FormatInt(v, 10)
}
