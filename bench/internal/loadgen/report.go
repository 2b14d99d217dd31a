package loadgen

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes r as an aligned table for people; JSON is for programs.
func WriteText(out io.Writer, r *Result) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%s\t"+format+"\n", append([]any{label}, args...)...)
	}
	row("url", "%s", r.URL)
	if r.Mode == ModeRate {
		row("mode", "fixed rate %g/s (open loop, latency from the scheduled time), %d connections", r.Rate, r.Connections)
	} else {
		row("mode", "saturation (closed loop, latency from the send time), %d connections", r.Connections)
	}
	interrupted := ""
	if r.Interrupted {
		interrupted = " (INTERRUPTED)"
	}
	row("window", "warmup %s, measured %s, elapsed %s%s", r.Warmup, r.Duration, r.Elapsed.Round(time.Millisecond), interrupted)
	row("payloads", "%d (%d with a verdict check)", r.Payloads, r.VerdictChecked)
	reqs := fmt.Sprintf("sent %d, completed %d, failed %d", r.Sent, r.Completed, r.Errors.Total())
	if r.Mode == ModeRate {
		reqs = fmt.Sprintf("scheduled %d, %s", r.Scheduled, reqs)
	}
	row("requests", "%s", reqs)
	row("warmup requests", "sent %d, completed %d, failed %d", r.WarmupCounts.Sent, r.WarmupCounts.Completed, r.WarmupCounts.Errors.Total())
	row("throughput", "%.1f/s", r.Throughput)
	l := r.Latency
	dropped := ""
	if l.Dropped > 0 {
		dropped = fmt.Sprintf(", %d dropped", l.Dropped)
	}
	row("latency ms", "min %s  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  mean %s  (%d samples%s)",
		ms(l.Min), ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.Max), ms(l.Mean), l.Samples, dropped)
	e := r.Errors
	e.add(r.WarmupCounts.Errors)
	row("errors", "transport %d, http status %d, bad body %d, uid mismatch %d, verdict mismatch %d, late %d",
		e.Transport, e.HTTPStatus, e.BadBody, e.UIDMismatch, e.VerdictMismatch, e.Late)
	for _, name := range classNames {
		if msg, ok := r.ErrorExamples[name]; ok {
			row("  "+name, "%s", oneLine(msg))
		}
	}
	row("loadgen cpu", "%.3f s, %.4f s per 1000 requests, peak rss %s", r.Loadgen.CPUSeconds, r.Loadgen.CPUPer1000, mib(r.Loadgen.MaxRSS))
	if s := r.Server; s != nil {
		if s.Error != "" {
			row("server", "pid %d: %s", s.PID, s.Error)
		} else {
			row("server cpu", "%.3f s, %.4f s per 1000 admissions (pid %d)", s.CPUSeconds, s.CPUPer1000, s.PID)
			row("server rss", "before %s, after %s, peak %s (peak before the run %s)", mib(s.RSSBefore), mib(s.RSSAfter), mib(s.PeakRSS), mib(s.PeakRSSBefore))
		}
	}
	row("runtime", "%s %s/%s, GOMAXPROCS %d, %d CPUs", r.GoVersion, r.GOOS, r.GOARCH, r.GOMAXPROCS, r.NumCPU)
	return w.Flush()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
