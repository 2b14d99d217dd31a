package kubecap

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count the capability calls by operation (the four, index_values
// or "other") and outcome ("ok", "error", "refused", "missed": an index
// the host does not keep): a fixed set of series.
type Metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics creates the metrics; register Collectors where the host
// serves its metrics.
func NewMetrics(prefix string) *Metrics {
	return &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "host_calls_total",
			Help: "Kubernetes host capability calls of the policy, by operation and outcome (ok, error, refused, missed: an index this host does not keep).",
		}, []string{"operation", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    prefix + "host_call_duration_seconds",
			Help:    "Time to answer a Kubernetes host capability call, by operation.",
			Buckets: []float64{0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2},
		}, []string{"operation"}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.calls, m.duration}
}

// Observe is an Options.Observe.
func (m *Metrics) Observe(operation, outcome string, d time.Duration) {
	m.calls.WithLabelValues(operation, outcome).Inc()
	m.duration.WithLabelValues(operation).Observe(d.Seconds())
}
