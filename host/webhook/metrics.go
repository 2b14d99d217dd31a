package webhook

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
)

// metricPrefix starts every metric name this package registers.
const metricPrefix = "yunikorn_userinfo_"

// Outcomes of an admission, the "outcome" label of the admission metrics.
const (
	OutcomeAllowed = "allowed" // accepted unchanged
	OutcomeMutated = "mutated" // accepted with a patch
	OutcomeDenied  = "denied"  // refused by the policy
	OutcomeError   = "error"   // the evaluation failed: answered allowed=false, code 500
	OutcomeInvalid = "invalid" // the HTTP request was not an acceptable AdmissionReview
)

// Causes of errors, the "cause" label of yunikorn_userinfo_errors_total.
const (
	CauseMethod      = "method_not_allowed"     // not a POST
	CauseContentType = "unsupported_media_type" // not application/json
	CauseTooLarge    = "body_too_large"         // over MaxRequestBytes
	CauseBadRequest  = "bad_request"            // empty, not JSON, not an AdmissionReview
	CauseNotReady    = "not_ready"              // the policy is not loaded yet
	CauseOverloaded  = "overloaded"             // the bodies in flight would exceed their byte budget
	CauseBusy        = "busy"                   // no slot became free before the deadline
	CauseClientBusy  = "client_busy"            // the client has MaxRequestsPerClient requests in flight
	CauseTimeout     = "timeout"                // the guest ran past the deadline
	CauseNoInstance  = "no_instance"            // no instance became free before the deadline
	CauseTrap        = "trap"                   // the guest trapped
	CauseExited      = "exited"                 // the guest called proc_exit
	CauseGuestError  = "guest_error"            // the guest reported an error
	CauseBadResponse = "bad_response"           // the guest's answer was not a ValidationResponse
	CauseCanceled    = "canceled"               // the caller went away
	CauseInternal    = "internal"               // anything else, panics included
)

var allCauses = []string{
	CauseMethod, CauseContentType, CauseTooLarge, CauseBadRequest, CauseNotReady, CauseOverloaded, CauseBusy, CauseClientBusy,
	CauseTimeout, CauseNoInstance, CauseTrap, CauseExited, CauseGuestError,
	CauseBadResponse, CauseCanceled, CauseInternal,
}

// Label values for a kind or an operation outside the fixed sets below, and
// for a request that did not name one.
const (
	labelOther   = "other"
	labelUnknown = "unknown"
)

// operationLabels are the operations admission.k8s.io/v1 defines; any other
// string a client sends is counted as "other".
var operationLabels = map[string]bool{"CREATE": true, "UPDATE": true, "DELETE": true, "CONNECT": true}

// kindLabels are the kinds counted under their own name: the workload
// kinds of Kubernetes and of the batch operators whose Pods YuniKorn
// schedules, and the Binding a scheduler posts. The API server sends only
// the kinds a webhook is registered for, but anyone who can reach the
// port can send any string, so labels come from this fixed list and every
// other kind is counted as "other": the number of series stays fixed
// whatever clients send.
var kindLabels = map[string]bool{
	"Pod": true, "Binding": true, "PodTemplate": true, "ReplicationController": true,
	"Deployment": true, "ReplicaSet": true, "StatefulSet": true, "DaemonSet": true,
	"Job": true, "CronJob": true,
	"SparkApplication": true, "ScheduledSparkApplication": true,
	"RayCluster": true, "RayJob": true, "RayService": true,
	"JobSet": true, "PyTorchJob": true, "TFJob": true, "MPIJob": true, "XGBoostJob": true,
	"PaddleJob": true, "JAXJob": true, "TrainJob": true, "Notebook": true,
}

// Rules, the "rule" label of yunikorn_userinfo_monitor_would_refuse_total:
// the refusals of the yunikorn-userinfo policy, named as its audit
// annotation "rule" (and its decision trace) names them, and the host's
// own. The policy's rule can carry the names of queues and other parts of
// the object after "; ", so the label is the rule reduced to this fixed
// set: whatever a module answers, the number of series stays fixed.
const (
	// RuleValidatingStage is the host's refusal at /validate of an answer
	// that would change the object.
	RuleValidatingStage = "validating stage: change refused"
	// RuleEvaluationFailed is an evaluation that failed (trap, timeout,
	// unusable answer): answered allowed=false, code 500.
	RuleEvaluationFailed = "evaluation failed"
	// ruleValidateOnly is the policy's validating twin refusing a change the
	// mutating policy would make ("validate-only: <rule>").
	ruleValidateOnly = "validate-only"
)

// refusalRules are the policy's refusing rules that are labels as they
// are. A check that refuses an object ("<rule>; <check> refused") is
// labelled by its last part.
var refusalRules = map[string]bool{
	"malformed":                                      true,
	"create: present, invalid value":                 true,
	"create: present, RBAC check failed":             true,
	"create: present, not granted by RBAC":           true,
	"create: present, submitter not allowed":         true,
	"create: present, provenance not proven":         true,
	"create: templates disagree":                     true,
	"create: absent, provenance not proven":          true,
	"create: placeholder, originator not proven":     true,
	"create: present, RBAC grant is a wildcard":      true,
	"create: present, too many groups for RBAC":      true,
	"audit: not recorded":                            true,
	"audit: invalid value":                           true,
	"audit: templates disagree":                      true,
	"update: new template, other value":              true,
	"update: changed":                                true,
	"update: changed, re-adoption":                   true,
	"update: added, not an adopter":                  true,
	"update: adopted, invalid value":                 true,
	"update: adopted, templates disagree":            true,
	"update: legacy label, submitter not allowed":    true,
	"update: legacy label, not granted by RBAC":      true,
	"update: legacy label, RBAC check failed":        true,
	"update: legacy label, RBAC grant is a wildcard": true,
	"binding: carries the annotation":                true,
	"queue check refused":                            true,
	"application ownership refused":                  true,
	RuleValidatingStage:                              true,
	RuleEvaluationFailed:                             true,
	ruleValidateOnly:                                 true,
}

// RuleLabel reduces a rule, as a module reports it in its audit annotation
// "rule", to the label of yunikorn_userinfo_monitor_would_refuse_total:
// one of the fixed set above, "unknown" for none, "other" for any other.
func RuleLabel(rule string) string {
	switch {
	case rule == "":
		return labelUnknown
	case strings.HasPrefix(rule, ruleValidateOnly+": "):
		return ruleValidateOnly
	case strings.HasPrefix(rule, RuleValidatingStage):
		return RuleValidatingStage
	}
	if i := strings.LastIndex(rule, "; "); i >= 0 && strings.HasSuffix(rule, " refused") {
		rule = rule[i+2:]
	}
	return label(refusalRules, rule)
}

// Metrics are the webhook's Prometheus metrics. A nil *Metrics records
// nothing, so tests and embedders may leave it out.
type Metrics struct {
	admissions   *prometheus.CounterVec
	stageDenials *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	inFlight     prometheus.Gauge
	errors       *prometheus.CounterVec
	reloads      *prometheus.CounterVec
	certReloads  *prometheus.CounterVec
	certExpiry   prometheus.Gauge
	ready        prometheus.Gauge
	connRefused  *prometheus.CounterVec
	connEvicted  *prometheus.CounterVec
	wouldRefuse  *prometheus.CounterVec
	settingsInfo *prometheus.GaugeVec
	engineStats  func() engine.Stats
	maxInstances float64
}

// NewMetrics creates the metrics and registers them, with the Go runtime
// and process collectors, on reg. stats reports the instance set (nil: no
// instance metrics); maxInstances is its configured size. version is
// reported by yunikorn_userinfo_build_info.
func NewMetrics(reg prometheus.Registerer, stats func() engine.Stats, maxInstances int, version string) (*Metrics, error) {
	m := &Metrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "admissions_total",
			Help: "Admission requests evaluated, by kind, operation, outcome (allowed, mutated, denied, error) and stage " +
				"(mutate: /mutate, the mutating webhook; validate: /validate, its validating twin, which sees the same object again).",
		}, []string{"kind", "operation", "outcome", "stage"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: metricPrefix + "admission_duration_seconds",
			Help: "Time from receiving an admission request to having its answer, by outcome.",
			Buckets: []float64{
				0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
				0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
			},
		}, []string{"outcome"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricPrefix + "in_flight_requests",
			Help: "Admission requests being handled now.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "errors_total",
			Help: "Requests that could not be evaluated normally, by cause.",
		}, []string{"cause"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "settings_reloads_total",
			Help: "Attempts to load changed settings, by outcome (applied, invalid, failed).",
		}, []string{"outcome"}),
		certReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "tls_reloads_total",
			Help: "Attempts to load changed TLS files, by what changed (certificate, client_ca) and outcome (applied, failed).",
		}, []string{"what", "outcome"}),
		certExpiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricPrefix + "certificate_expiry_timestamp_seconds",
			Help: "NotAfter of the serving certificate in use, as a Unix time.",
		}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricPrefix + "ready",
			Help: "Whether /readyz answers 200 (1) or 503 (0): ready once the policy is loaded and its settings accepted, until shutdown begins.",
		}),
		stageDenials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "stage_denials_total",
			Help: "Requests refused, by stage: mutate (/mutate) or validate (/validate, the validating twin; " +
				"a refusal there means the object was changed after the mutating stage, or never went through it).",
		}, []string{"stage"}),
		connRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "connections_refused_total",
			Help: "Connections to the webhook port closed as soon as accepted, by reason: per_client (the source address " +
				"held --max-conns-per-client) or total (all clients held --max-conns).",
		}, []string{"reason"}),
		connEvicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "connections_evicted_total",
			Help: "Idle connections to the webhook port closed to make room for another (or, the unproven budget full, " +
				"shed as they came from the source holding the most of it), by reason: handshake (its TLS handshake " +
				"unfinished: a bare TCP connection or a half-done handshake), before_request (no request sent after the " +
				"handshake), keepalive (idle between requests) or busy (none idle: a request in flight, silent longest, of " +
				"the address holding the most places, for a newcomer from an address holding fewer).",
		}, []string{"reason"}),
		wouldRefuse: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "monitor_would_refuse_total",
			Help: "Requests monitor mode admitted that the policy refused (or whose evaluation failed), by stage and by rule " +
				"(the refusing rule, reduced to a fixed set: other for one outside it, unknown when the module names none).",
		}, []string{"stage", "rule"}),
		settingsInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricPrefix + "settings_info",
			Help: "Always 1; the label sha256 is the SHA-256 of the policy settings in force (the JSON logged with it at load and on reload).",
		}, []string{"sha256"}),
		engineStats:  stats,
		maxInstances: float64(maxInstances),
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        metricPrefix + "build_info",
		Help:        "Always 1; the labels tell the version of the program.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	buildInfo.Set(1)
	// Every outcome from the start, so that the first refused reload is an
	// increase a rule sees.
	for _, outcome := range []string{settings.ReloadApplied, settings.ReloadInvalid, settings.ReloadFailed} {
		m.reloads.WithLabelValues(outcome)
	}
	m.stageDenials.WithLabelValues("mutate")
	m.stageDenials.WithLabelValues("validate")
	m.connRefused.WithLabelValues(refusedPerClient)
	m.connRefused.WithLabelValues(refusedTotal)
	for _, reason := range EvictionReasons {
		m.connEvicted.WithLabelValues(reason)
	}
	for _, cause := range allCauses {
		m.errors.WithLabelValues(cause) // so every cause shows from the start
	}
	cs := []prometheus.Collector{
		m.admissions, m.stageDenials, m.duration, m.inFlight, m.errors, m.reloads, m.certReloads,
		m.certExpiry, m.ready, m.connRefused, m.connEvicted, buildInfo, m.wouldRefuse, m.settingsInfo,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	if stats != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: metricPrefix + "instances",
				Help: "Live policy instances, idle or busy.",
			}, func() float64 { return float64(stats().Instances) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: metricPrefix + "instances_idle",
				Help: "Policy instances waiting for an evaluation.",
			}, func() float64 { return float64(stats().Idle) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: metricPrefix + "instances_max",
				Help: "The configured size of the instance set (--instances).",
			}, func() float64 { return m.maxInstances }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: metricPrefix + "instance_waits_total",
				Help: "Evaluations that found every instance busy and had to wait.",
			}, func() float64 { return float64(stats().Waits) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: metricPrefix + "instance_recycles_total",
				Help: "Healthy instances retired because their memory grew past a quarter of its limit (after huge requests).",
			}, func() float64 { return float64(stats().Recycled) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: metricPrefix + "instance_replacements_total",
				Help: "Instances thrown away because they trapped, timed out or exited.",
			}, func() float64 { return float64(stats().Replacements) }),
		)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// label is the label value of v: itself when known holds it, "unknown"
// when empty, "other" otherwise.
func label(known map[string]bool, v string) string {
	switch {
	case v == "":
		return labelUnknown
	case known[v]:
		return v
	}
	return labelOther
}

// observe records an answered request. stage is stageMutate or
// stageValidate (the path it came in on, a fixed set); it is not used for
// OutcomeInvalid, which admissions_total does not count.
func (m *Metrics) observe(stage, kind, operation, outcome string, seconds float64) {
	if m == nil {
		return
	}
	if outcome != OutcomeInvalid {
		m.admissions.WithLabelValues(label(kindLabels, kind), label(operationLabels, operation), outcome, stage).Inc()
	}
	m.duration.WithLabelValues(outcome).Observe(seconds)
}

func (m *Metrics) denied(stage string) {
	if m != nil {
		m.stageDenials.WithLabelValues(stage).Inc()
	}
}

func (m *Metrics) error(cause string) {
	if m != nil {
		m.errors.WithLabelValues(cause).Inc()
	}
}

func (m *Metrics) inFlightAdd(d float64) {
	if m != nil {
		m.inFlight.Add(d)
	}
}

// ConnectionRefused counts a connection refused by the listener's limits;
// reason is "per_client" or "total".
func (m *Metrics) ConnectionRefused(reason string) {
	if m != nil {
		m.connRefused.WithLabelValues(reason).Inc()
	}
}

// ConnectionEvicted counts an idle connection closed to make room;
// reason is one of EvictionReasons (anything else counts as keepalive, so
// that the series stay three).
func (m *Metrics) ConnectionEvicted(reason string) {
	if m == nil {
		return
	}
	if reason != EvictedHandshake && reason != EvictedBeforeRequest {
		reason = EvictedKeepAlive
	}
	m.connEvicted.WithLabelValues(reason).Inc()
}

// SettingsReloaded counts a settings reload attempt; outcome is one of the
// settings.Reload* constants.
func (m *Metrics) SettingsReloaded(outcome string) {
	if m != nil {
		m.reloads.WithLabelValues(outcome).Inc()
	}
}

// TLSReloaded counts an attempt to load changed TLS files: what is
// "certificate" or "client_ca"; a nil err means applied.
func (m *Metrics) TLSReloaded(what string, err error) {
	if m == nil {
		return
	}
	outcome := "applied"
	if err != nil {
		outcome = "failed"
	}
	m.certReloads.WithLabelValues(what, outcome).Inc()
}

// SetCertificateExpiry records the NotAfter of the serving certificate, as
// a Unix time in seconds.
func (m *Metrics) SetCertificateExpiry(unix float64) {
	if m != nil {
		m.certExpiry.Set(unix)
	}
}

// monitorAdmitted counts a refusal monitor mode admitted.
func (m *Metrics) monitorAdmitted(stage, rule string) {
	if m != nil {
		m.wouldRefuse.WithLabelValues(stage, rule).Inc()
	}
}

// SetSettings makes yunikorn_userinfo_settings_info report the settings
// with this SHA-256 (hex) as the ones in force: one series, replaced.
func (m *Metrics) SetSettings(sha256 string) {
	if m == nil {
		return
	}
	m.settingsInfo.Reset()
	m.settingsInfo.WithLabelValues(sha256).Set(1)
}

func (m *Metrics) setReady(ready bool) {
	if m == nil {
		return
	}
	if ready {
		m.ready.Set(1)
	} else {
		m.ready.Set(0)
	}
}
