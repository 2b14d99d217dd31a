package loadgen

import (
	"slices"
	"time"
)

// Modes of a run, as Result.Mode spells them.
const (
	// ModeRate sends at a fixed rate, open loop.
	ModeRate = "rate"
	// ModeSaturation sends as fast as the server answers, closed loop.
	ModeSaturation = "saturation"
)

// Result is what a run measured. Durations are nanoseconds in JSON.
type Result struct {
	URL         string        `json:"url"`
	Mode        string        `json:"mode"`
	Rate        float64       `json:"rate,omitempty"` // requests/s scheduled, ModeRate only
	Connections int           `json:"connections"`
	Duration    time.Duration `json:"duration_ns"` // the measured window
	Warmup      time.Duration `json:"warmup_ns"`
	Elapsed     time.Duration `json:"elapsed_ns"` // start to the last answer
	// Payloads is the number of distinct documents posted round robin, of
	// which VerdictChecked have an expected verdict.
	Payloads       int  `json:"payloads"`
	VerdictChecked int  `json:"verdict_checked"`
	Interrupted    bool `json:"interrupted,omitempty"`

	// Scheduled is the number of send times in the measured window
	// (ModeRate only): Sent plus Errors.Late.
	Scheduled int64 `json:"scheduled,omitempty"`
	Counts
	// Throughput is Completed per second of the measured window (of its
	// part before the interruption, if interrupted).
	Throughput float64 `json:"throughput"`
	// Latency is over the Completed requests of the measured window, from
	// the scheduled time (ModeRate) or the send time (ModeSaturation) to the
	// last byte of the answer.
	Latency Latency `json:"latency"`
	// ErrorExamples holds one error message of each class that occurred,
	// warmup included.
	ErrorExamples map[string]string `json:"error_examples,omitempty"`
	// WarmupCounts are the warmup's requests: verified, not measured.
	WarmupCounts Counts `json:"warmup_requests"`

	Loadgen ProcessUsage `json:"loadgen"`
	Server  *ServerUsage `json:"server,omitempty"`

	GoVersion  string `json:"go_version"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	NumCPU     int    `json:"num_cpu"`
}

// Failed is the number of failed requests, warmup included: a run is clean
// when it is zero.
func (r *Result) Failed() int64 {
	return r.Errors.Total() + r.WarmupCounts.Errors.Total()
}

// Counts count the requests of one window.
type Counts struct {
	// Sent requests got a connection and were written, or failed trying.
	Sent int64 `json:"sent"`
	// Completed requests got a verified answer.
	Completed int64       `json:"completed"`
	Errors    ErrorCounts `json:"errors"`
}

func (c *Counts) add(o Counts) {
	c.Sent += o.Sent
	c.Completed += o.Completed
	c.Errors.add(o.Errors)
}

// ErrorCounts count failed requests by class.
type ErrorCounts struct {
	// Transport: no answer (dial, TLS, write, read, timeout).
	Transport int64 `json:"transport"`
	// HTTPStatus: an answer other than 200.
	HTTPStatus int64 `json:"http_status"`
	// BadBody: a 200 whose body is not an AdmissionReview v1 with a response.
	BadBody int64 `json:"bad_body"`
	// UIDMismatch: response.uid is not the request's uid.
	UIDMismatch int64 `json:"uid_mismatch"`
	// VerdictMismatch: response.allowed is not the payload's expectation.
	VerdictMismatch int64 `json:"verdict_mismatch"`
	// Late: scheduled sends not made because they were already more than
	// the request timeout behind schedule (ModeRate only).
	Late int64 `json:"late"`
}

// Total is the sum of every class.
func (e ErrorCounts) Total() int64 {
	return e.Transport + e.HTTPStatus + e.BadBody + e.UIDMismatch + e.VerdictMismatch + e.Late
}

func (e *ErrorCounts) add(o ErrorCounts) {
	e.Transport += o.Transport
	e.HTTPStatus += o.HTTPStatus
	e.BadBody += o.BadBody
	e.UIDMismatch += o.UIDMismatch
	e.VerdictMismatch += o.VerdictMismatch
	e.Late += o.Late
}

// errorClass names one field of ErrorCounts.
type errorClass int

const (
	classTransport errorClass = iota
	classHTTPStatus
	classBadBody
	classUIDMismatch
	classVerdictMismatch
	classLate
	numClasses
)

// classNames are the JSON names of the classes, also used in reports.
var classNames = [numClasses]string{"transport", "http_status", "bad_body", "uid_mismatch", "verdict_mismatch", "late"}

func (e *ErrorCounts) count(c errorClass) {
	switch c {
	case classTransport:
		e.Transport++
	case classHTTPStatus:
		e.HTTPStatus++
	case classBadBody:
		e.BadBody++
	case classUIDMismatch:
		e.UIDMismatch++
	case classVerdictMismatch:
		e.VerdictMismatch++
	case classLate:
		e.Late++
	}
}

// Latency summarises latency samples. Percentiles are exact, by the
// nearest-rank method over all the samples kept.
type Latency struct {
	Samples int64 `json:"samples"`
	// Dropped samples were not kept, once Options.MaxSamples were.
	Dropped int64         `json:"dropped,omitempty"`
	Min     time.Duration `json:"min_ns"`
	Mean    time.Duration `json:"mean_ns"`
	P50     time.Duration `json:"p50_ns"`
	P90     time.Duration `json:"p90_ns"`
	P99     time.Duration `json:"p99_ns"`
	P999    time.Duration `json:"p999_ns"`
	Max     time.Duration `json:"max_ns"`
}

// summarize sorts samples in place and summarises them.
func summarize(samples []time.Duration) Latency {
	l := Latency{Samples: int64(len(samples))}
	if len(samples) == 0 {
		return l
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	l.Min, l.Max = samples[0], samples[len(samples)-1]
	l.Mean = sum / time.Duration(len(samples))
	l.P50 = percentile(samples, 50_000)
	l.P90 = percentile(samples, 90_000)
	l.P99 = percentile(samples, 99_000)
	l.P999 = percentile(samples, 99_900)
	return l
}

// percentile returns the nearest-rank percentile of sorted samples, with q
// in thousandths of a percent so that p99.9 involves no floating point: the
// smallest sample that at least q/100000 of the samples do not exceed.
func percentile(sorted []time.Duration, q int) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := (q*n + 100_000 - 1) / 100_000 // ceil(q*n/100000), 1-based
	rank = max(rank, 1)
	return sorted[rank-1]
}

// ProcessUsage is the load generator's own use of the machine.
type ProcessUsage struct {
	// CPUSeconds is user + system time during the measured window.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPer1000 is CPUSeconds per 1,000 requests sent in the window.
	CPUPer1000 float64 `json:"cpu_seconds_per_1000"`
	// MaxRSS is the peak RSS in bytes (getrusage ru_maxrss).
	MaxRSS int64 `json:"max_rss_bytes"`
}

// ServerUsage is the server's use of the machine, read from /proc.
type ServerUsage struct {
	PID int `json:"pid"`
	// CPUSeconds is user + system time during the measured window.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPer1000 is CPUSeconds per 1,000 completed admissions in the window.
	CPUPer1000 float64 `json:"cpu_seconds_per_1000"`
	// RSSBefore is VmRSS before the warmup, RSSAfter after the last answer.
	RSSBefore int64 `json:"rss_before_bytes"`
	RSSAfter  int64 `json:"rss_after_bytes"`
	// PeakRSS is VmHWM after the last answer: the peak since the server
	// started. When it equals PeakRSSBefore, the peak predates the run.
	PeakRSS       int64 `json:"peak_rss_bytes"`
	PeakRSSBefore int64 `json:"peak_rss_before_bytes"`
	// Error is set when /proc could not be read during the run (the server
	// exited); the other fields are then incomplete.
	Error string `json:"error,omitempty"`
}
