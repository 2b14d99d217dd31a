package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

// Paths the Handler serves.
const (
	PathMutate = "/mutate"
	// PathValidate serves the policy's validating twin: the same module,
	// registered as a validating webhook so that it sees the object after
	// every mutation, evaluated with the validate settings (see
	// [Handler.StartWithValidate]). An answer there may not change the
	// object: a patch becomes a refusal.
	PathValidate = "/validate"
	PathHealthz  = "/healthz"
	PathReadyz   = "/readyz"
)

// DefaultMaxRequestBytes is the default limit of an AdmissionReview body:
// 7 MiB. The API server accepts request bodies up to 3 MiB and etcd stores
// objects up to 1.5 MiB by default; an UPDATE review carries the object
// twice (object and oldObject) plus the envelope, JSON escaping and
// userInfo, so 7 MiB leaves headroom over the largest legitimate review
// while bounding what one request can make the server buffer.
const DefaultMaxRequestBytes = 7 << 20

// DefaultMaxDepth is the default limit of JSON nesting in a request. Real
// Kubernetes objects nest a few dozen levels; the TinyGo policy's
// recursive parser runs out of stack past about a thousand, so deeper
// requests are refused up front with a clear message instead of a trap.
const DefaultMaxDepth = 512

// DefaultMaxBodyBytesInFlight is the default budget of request bodies held
// in memory at once, across all connections: 32 MiB, four reviews of the
// largest size the default limit admits, or thousands of ordinary ones. A
// body is charged for the buffer it actually occupies as its bytes arrive,
// never for the length it declares.
const DefaultMaxBodyBytesInFlight = 32 << 20

// DefaultMaxRequestsPerClient is the default of Options.MaxRequestsPerClient.
// The API server calls admission webhooks over HTTP/1.1, one connection per
// call in flight, so it is the same as DefaultMaxConnsPerClient: a client
// that may open that many connections may have that many requests in
// flight, and HTTP/2 streams spread over several connections count
// together.
const DefaultMaxRequestsPerClient = DefaultMaxConnsPerClient

// DefaultLargeRequestBytes is the default of Options.LargeRequestBytes:
// 256 KiB, some fifty times an ordinary Pod review and past which the
// policy's cost (linear in the object's size) is in milliseconds rather
// than microseconds.
const DefaultLargeRequestBytes = 256 << 10

// RetryAfterSeconds is the Retry-After an overloaded webhook sends with
// its 503 answers.
const RetryAfterSeconds = "1"

// Policy evaluates a Kubewarden validate payload and returns the policy's
// ValidationResponse. *engine.Engine implements it.
type Policy interface {
	Validate(ctx context.Context, payload []byte) ([]byte, error)
}

var _ Policy = (*engine.Engine)(nil)

// Options configure a Handler.
type Options struct {
	// Logger receives one line per admission (Info for admitted requests,
	// Warn for refusals and failures). Default: discard.
	Logger *slog.Logger
	// Metrics, if set, records every request. Default: none.
	Metrics *Metrics
	// MaxRequestBytes limits the body of a request. Default:
	// DefaultMaxRequestBytes (7 MiB).
	MaxRequestBytes int64
	// MaxDepth limits the nesting of arrays and objects in a request.
	// Default: DefaultMaxDepth (512).
	MaxDepth int
	// MaxBodyBytesInFlight bounds the memory of all request bodies being
	// read or evaluated at once. A request whose body would take the total
	// past it is answered 503 with Retry-After. Default:
	// DefaultMaxBodyBytesInFlight (32 MiB).
	MaxBodyBytesInFlight int64
	// MaxConcurrent is how many requests are decoded, evaluated, diffed and
	// encoded at once; the others wait for a slot, within their deadline.
	// Set it to the number of policy instances. Default:
	// runtime.GOMAXPROCS(0).
	MaxConcurrent int
	// LargeRequestBytes is the body size from which a request is large:
	// besides a slot, it must hold one of MaxConcurrentLarge slots kept
	// for large requests, so that a few heavy objects cannot take every
	// slot from the ordinary reviews. Default: DefaultLargeRequestBytes
	// (256 KiB).
	LargeRequestBytes int64
	// MaxConcurrentLarge is how many large requests are worked on at once.
	// Default: half of MaxConcurrent, at least 1, so that with two or more
	// slots the others always remain for ordinary reviews.
	MaxConcurrentLarge int
	// MaxRequestsPerClient bounds the requests one client (a source IP
	// address) has in flight at once, from the moment its headers are
	// read, across all its connections and HTTP/2 streams. A request past
	// it is answered 429 with Retry-After at once, holding nothing.
	// Default: DefaultMaxRequestsPerClient (256); negative: no limit.
	MaxRequestsPerClient int
	// Timeout bounds the work on one request once its body is read: the
	// wait for a slot, decoding, the evaluation (waiting for an instance
	// included), the patch and encoding. The timeout the API server sends
	// in the URL (?timeout=10s) lowers it, never raises it. Default:
	// engine.DefaultTimeout (2 s).
	Timeout time.Duration
	// Monitor admits what the policy refuses, and what it could not
	// evaluate, as Kubewarden's monitor mode does: the object passes as it
	// was sent (a refused request's mutation is not applied), with the
	// warning "monitor mode: would be refused: <message>", the audit
	// annotation monitor="would be refused", a count in
	// yunikorn_userinfo_monitor_would_refuse_total and a log line naming
	// the submitter, the claimed identity and the rule. Accepted requests,
	// patches included, are answered as without it. Default: false.
	Monitor bool
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = engine.DefaultTimeout
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxBodyBytesInFlight <= 0 {
		o.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = runtime.GOMAXPROCS(0)
	}
	if o.LargeRequestBytes <= 0 {
		o.LargeRequestBytes = DefaultLargeRequestBytes
	}
	if o.MaxConcurrentLarge <= 0 {
		o.MaxConcurrentLarge = max(1, o.MaxConcurrent/2)
	}
	o.MaxConcurrentLarge = min(o.MaxConcurrentLarge, o.MaxConcurrent)
	if o.MaxRequestsPerClient == 0 {
		o.MaxRequestsPerClient = DefaultMaxRequestsPerClient
	}
}

// target is what the Handler evaluates with, set once by Start.
type target struct {
	policy           Policy
	settings         func() json.RawMessage
	validateSettings func() json.RawMessage
}

// Handler is the admission webhook: POST /mutate takes an AdmissionReview
// (admission.k8s.io/v1) and always answers one; GET /healthz and /readyz
// report liveness and readiness.
//
// A Handler starts unready, answering /mutate with code 503, so that the
// server can listen (and answer probes) while the module compiles; Start
// supplies the policy and makes it ready.
type Handler struct {
	opts    Options
	target  atomic.Pointer[target]
	ready   atomic.Bool
	mux     *http.ServeMux
	metrics *Metrics
	log     *slog.Logger
	// bodyBytes is the buffer capacity charged to the bodies in flight.
	bodyBytes atomic.Int64
	// slots holds one token per request being worked on, largeSlots one
	// per large request among them.
	slots, largeSlots chan struct{}
	// waitingLarge counts the requests waiting for a large slot (tests
	// wait on it instead of sleeping).
	waitingLarge atomic.Int32
	// clients counts the requests in flight per client.
	clients *clientCounts
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns an unready Handler.
func NewHandler(opts Options) *Handler {
	opts.setDefaults()
	h := &Handler{opts: opts, metrics: opts.Metrics, log: opts.Logger,
		slots: make(chan struct{}, opts.MaxConcurrent), largeSlots: make(chan struct{}, opts.MaxConcurrentLarge),
		clients: newClientCounts(max(0, opts.MaxRequestsPerClient), 0)}
	h.mux = http.NewServeMux()
	h.mux.HandleFunc(PathMutate, func(w http.ResponseWriter, r *http.Request) { h.serveReview(w, r, stageMutate) })
	h.mux.HandleFunc(PathValidate, func(w http.ResponseWriter, r *http.Request) { h.serveReview(w, r, stageValidate) })
	h.mux.HandleFunc(PathHealthz, h.serveHealthz)
	h.mux.HandleFunc(PathReadyz, h.serveReadyz)
	h.metrics.setReady(false)
	return h
}

// Start makes the handler evaluate with policy and the settings returned
// by settings (called once per request, so they may change), and marks it
// ready. Call it once the module is compiled and its settings accepted.
func (h *Handler) Start(policy Policy, settings func() json.RawMessage) {
	h.StartWithValidate(policy, settings, settings)
}

// StartWithValidate is Start with other settings for PathValidate, such as
// the policy's own validate-only mode.
func (h *Handler) StartWithValidate(policy Policy, settings, validateSettings func() json.RawMessage) {
	h.target.Store(&target{policy: policy, settings: settings, validateSettings: validateSettings})
	h.SetReady(true)
}

// The two stages a review is answered at.
const (
	stageMutate   = "mutate"
	stageValidate = "validate"
)

// SetReady sets what /readyz reports. A server shutting down sets it false
// first, so the API server's endpoints stop sending before the listener
// closes; /mutate keeps answering meanwhile.
func (h *Handler) SetReady(ready bool) {
	h.ready.Store(ready && h.target.Load() != nil)
	h.metrics.setReady(h.ready.Load())
}

// Ready reports whether /readyz answers 200.
func (h *Handler) Ready() bool { return h.ready.Load() }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok")
}

func (h *Handler) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	if !h.ready.Load() {
		writeText(w, http.StatusServiceUnavailable, "not ready")
		return
	}
	writeText(w, http.StatusOK, "ok")
}

func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body+"\n")
}

// rejection is a request refused before evaluation: its HTTP status, the
// metric cause and the message.
type rejection struct {
	status int
	cause  string
	err    error
}

// serveReview answers one AdmissionReview at the given stage. Whatever happens, the body is an
// AdmissionReview: for a request that could not be read (wrong method,
// media type or size, malformed review) with an HTTP 4xx status, or 503
// when the server is too busy to take it, and an errored response naming
// the problem; otherwise with HTTP 200, the request's uid, and the
// policy's verdict or, if the evaluation failed, allowed=false with code
// 500.
//
// The work on a request is bounded four ways: it counts against its
// client's MaxRequestsPerClient from the start; its body is charged to a
// byte budget shared by all requests as its bytes arrive (nothing before);
// everything after reading it (decoding, the evaluation, the patch,
// encoding) happens holding one of MaxConcurrent slots, and for a large
// body one of MaxConcurrentLarge first; and all of that runs under the
// request's deadline.
func (h *Handler) serveReview(w http.ResponseWriter, r *http.Request, stage string) {
	start := time.Now()
	h.metrics.inFlightAdd(1)
	defer h.metrics.inFlightAdd(-1)
	ctx := r.Context()

	// The body's buffer goes back to the pool last, once the answer is
	// written: the decoded request is made of slices of it.
	var body []byte
	defer func() { putBody(body) }()

	var read *admission.Request // set once the review is decoded
	defer func() {
		// A bug must cost one request, not the process. A review that was
		// read is answered like any failed evaluation: HTTP 200, its uid,
		// allowed=false and code 500.
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			h.log.ErrorContext(ctx, "admission handler panicked", "panic", fmt.Sprint(p))
			h.metrics.error(CauseInternal)
			err := fmt.Errorf("internal error: %v", p)
			if read != nil {
				h.metrics.observe(stage, read.Kind.Kind, read.Operation, OutcomeError, time.Since(start).Seconds())
				h.writeReview(w, http.StatusOK, admission.Errored(read.UID, admission.CodeEvaluationFailed, err))
				return
			}
			h.writeReview(w, http.StatusInternalServerError, admission.Errored("", admission.CodeEvaluationFailed, err))
		}
	}()

	if h.opts.MaxRequestsPerClient > 0 {
		ip := clientIP(r.RemoteAddr)
		if h.clients.acquire(ip) != "" {
			h.refuse(w, r, start, &rejection{http.StatusTooManyRequests, CauseClientBusy,
				fmt.Errorf("too many requests in flight from %s: at most %d at once", ip, h.opts.MaxRequestsPerClient)})
			return
		}
		defer h.clients.release(ip)
	}

	body, charged, rej := h.readRequest(w, r)
	defer h.bodyBytes.Add(-charged)
	if rej != nil {
		h.refuse(w, r, start, rej)
		return
	}

	// From here on the request holds a slot and runs under its deadline.
	evalCtx, cancel := context.WithTimeout(ctx, h.deadline(r))
	defer cancel()
	if int64(len(body)) >= h.opts.LargeRequestBytes {
		h.waitingLarge.Add(1)
		select {
		case h.largeSlots <- struct{}{}:
			h.waitingLarge.Add(-1)
			defer func() { <-h.largeSlots }()
		case <-evalCtx.Done():
			h.waitingLarge.Add(-1)
			h.refuse(w, r, start, &rejection{http.StatusServiceUnavailable, CauseBusy,
				fmt.Errorf("the webhook is busy: no slot for large requests became free within the deadline (%d large requests at once)", h.opts.MaxConcurrentLarge)})
			return
		}
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	case <-evalCtx.Done():
		h.refuse(w, r, start, &rejection{http.StatusServiceUnavailable, CauseBusy,
			fmt.Errorf("the webhook is busy: no slot became free within the deadline (%d requests at once)", h.opts.MaxConcurrent)})
		return
	}

	req, rej := h.decodeReview(body)
	if rej != nil {
		h.refuse(w, r, start, rej)
		return
	}
	read = req

	t := h.target.Load()
	if t == nil {
		h.metrics.error(CauseNotReady)
		h.metrics.observe(stage, req.Kind.Kind, req.Operation, OutcomeError, time.Since(start).Seconds())
		h.writeReview(w, http.StatusOK, admission.Errored(req.UID, http.StatusServiceUnavailable,
			errors.New("the webhook is starting: the policy is not loaded yet")))
		return
	}

	resp, cause, err := evaluate(evalCtx, t, req, stage)
	outcome := outcomeOf(resp, err)
	elapsed := time.Since(start)
	if err != nil {
		h.metrics.error(cause)
	}
	h.metrics.observe(stage, req.Kind.Kind, req.Operation, outcome, elapsed.Seconds())
	if outcome == OutcomeDenied {
		h.metrics.denied(stage)
	}
	h.logAdmission(ctx, req, resp, stage, outcome, elapsed, err)
	if h.opts.Monitor {
		resp = h.monitor(ctx, req, resp, stage, err)
	}
	h.writeReview(w, http.StatusOK, resp)
}

// monitor is the answer of monitor mode to resp (see Options.Monitor): a
// refusal is counted, logged and turned into an admission.
func (h *Handler) monitor(ctx context.Context, req *admission.Request, resp *admission.Response, stage string, err error) *admission.Response {
	out, admitted := admission.Monitor(resp)
	if !admitted {
		return resp
	}
	rule := resp.AuditAnnotations[auditRule]
	if err != nil {
		rule = RuleEvaluationFailed
	}
	h.metrics.monitorAdmitted(stage, RuleLabel(rule))
	if h.log.Enabled(ctx, slog.LevelWarn) {
		attrs := append(requestAttrs(req, stage),
			slog.String("claimed", clipLog(resp.AuditAnnotations[auditClaimed])),
			slog.String("rule", clipLog(rule)))
		if resp.Status != nil {
			attrs = append(attrs, slog.String("message", clipLog(resp.Status.Message)))
		}
		h.log.LogAttrs(ctx, slog.LevelWarn, "monitor mode: would be refused", attrs...)
	}
	return out
}

// Audit annotation keys the yunikorn-userinfo policy answers with (any
// module may): the rule that decided and the identity the request claimed.
const (
	auditRule    = "rule"
	auditClaimed = "claimed"
)

// refuse answers a request that was not evaluated.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, start time.Time, rej *rejection) {
	h.metrics.error(rej.cause)
	h.metrics.observe("", "", "", OutcomeInvalid, time.Since(start).Seconds())
	h.log.WarnContext(r.Context(), "admission request refused", "remote", r.RemoteAddr,
		"status", rej.status, "cause", rej.cause, "error", rej.err)
	if rej.status == http.StatusServiceUnavailable || rej.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", RetryAfterSeconds)
	}
	h.writeReview(w, rej.status, admission.Errored("", int32(rej.status), rej.err))
}

// readRequest checks the transport-level properties of the request and
// reads its body. charged is what the body was charged to the byte
// budget, to be given back once the answer is written, also when the
// request is refused.
func (h *Handler) readRequest(w http.ResponseWriter, r *http.Request) (body []byte, charged int64, rej *rejection) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, 0, &rejection{http.StatusMethodNotAllowed, CauseMethod,
			fmt.Errorf("method %s is not allowed: send the AdmissionReview with POST", r.Method)}
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		return nil, 0, &rejection{http.StatusUnsupportedMediaType, CauseContentType,
			fmt.Errorf("content type %q is not supported: want application/json", ct)}
	}
	if r.ContentLength > h.opts.MaxRequestBytes {
		return nil, 0, &rejection{http.StatusRequestEntityTooLarge, CauseTooLarge,
			fmt.Errorf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, h.opts.MaxRequestBytes)}
	}
	body, charged, err := readBody(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes), h.opts.MaxRequestBytes, &h.bodyBytes, h.opts.MaxBodyBytesInFlight)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, charged, &rejection{http.StatusRequestEntityTooLarge, CauseTooLarge,
				fmt.Errorf("request body exceeds the limit of %d bytes", h.opts.MaxRequestBytes)}
		case errors.Is(err, errBudget):
			return nil, charged, &rejection{http.StatusServiceUnavailable, CauseOverloaded,
				fmt.Errorf("the webhook is busy: request bodies in flight would exceed %d bytes", h.opts.MaxBodyBytesInFlight)}
		}
		return nil, charged, &rejection{http.StatusBadRequest, CauseBadRequest, fmt.Errorf("read request body: %w", err)}
	}
	if len(body) == 0 {
		return nil, charged, &rejection{http.StatusBadRequest, CauseBadRequest, errors.New("request body is empty: want an AdmissionReview")}
	}
	return body, charged, nil
}

// decodeReview decodes the AdmissionReview in body.
func (h *Handler) decodeReview(body []byte) (*admission.Request, *rejection) {
	req, err := admission.ParseReviewDepth(body, h.opts.MaxDepth)
	if err != nil {
		return nil, &rejection{http.StatusBadRequest, CauseBadRequest, err}
	}
	return req, nil
}

// isJSON reports whether a Content-Type header names JSON. The API server
// sends "application/json"; a charset parameter is tolerated.
func isJSON(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || cs == "utf-8" || cs == "UTF-8"
}

// deadline is the evaluation's time budget: Options.Timeout, or the
// API server's own timeout for the call when that is shorter.
func (h *Handler) deadline(r *http.Request) time.Duration {
	d := h.opts.Timeout
	if v := r.URL.Query().Get("timeout"); v != "" {
		if api, err := time.ParseDuration(v); err == nil && api > 0 && api < d {
			d = api
		}
	}
	return d
}

// evaluate runs the policy on req. It returns the response to send and,
// when the evaluation failed, the metric cause and the error (the response
// is then allowed=false, code 500).
func evaluate(ctx context.Context, t *target, req *admission.Request, stage string) (*admission.Response, string, error) {
	settings := t.settings
	if stage == stageValidate {
		settings = t.validateSettings
	}
	resp, err := admission.Evaluate(ctx, t.policy.Validate, req, settings())
	if err != nil {
		return resp, causeOf(err), err
	}
	if stage == stageValidate && resp.Patch != nil {
		return refuseChange(resp), "", nil
	}
	return resp, "", nil
}

// refuseChange turns an answer that would change the object at the
// validating stage into a refusal, as Kubewarden's policy-server does for a
// policy that is not allowed to mutate. The policy wanting a change there
// means a mutating webhook that ran after it undid its work, and nothing
// after a validating webhook would apply it.
func refuseChange(resp *admission.Response) *admission.Response {
	audit := maps.Clone(resp.AuditAnnotations)
	if audit == nil {
		audit = map[string]string{}
	}
	if rule := audit[auditRule]; rule != "" {
		audit[auditRule] = RuleValidatingStage + "; " + rule
	} else {
		audit[auditRule] = RuleValidatingStage
	}
	return &admission.Response{
		UID:     resp.UID,
		Allowed: false,
		Status: &admission.Status{Code: http.StatusForbidden, Message: "refused at the validating stage: the policy would change the object (" +
			clipLog(string(resp.Patch)) + "); a mutating webhook that ran after it may have undone its change"},
		Warnings:         resp.Warnings,
		AuditAnnotations: audit,
	}
}

// causeOf maps an engine error to its metric cause.
func causeOf(err error) string {
	var guestErr *engine.GuestError
	switch {
	case errors.Is(err, engine.ErrTimeout):
		return CauseTimeout
	case errors.Is(err, engine.ErrInstanceUnavailable):
		if errors.Is(err, context.Canceled) {
			return CauseCanceled
		}
		return CauseNoInstance
	case errors.Is(err, engine.ErrTrap):
		return CauseTrap
	case errors.Is(err, engine.ErrExited):
		return CauseExited
	case errors.As(err, &guestErr):
		return CauseGuestError
	case errors.Is(err, context.DeadlineExceeded):
		return CauseTimeout
	case errors.Is(err, context.Canceled):
		return CauseCanceled
	case errors.Is(err, admission.ErrBadResponse):
		return CauseBadResponse
	default:
		return CauseInternal
	}
}

func outcomeOf(resp *admission.Response, err error) string {
	switch {
	case err != nil:
		return OutcomeError
	case !resp.Allowed:
		return OutcomeDenied
	case resp.Patch != nil:
		return OutcomeMutated
	default:
		return OutcomeAllowed
	}
}

// logAdmission writes the one structured line an operator searches by
// uid, user or object.
func (h *Handler) logAdmission(ctx context.Context, req *admission.Request, resp *admission.Response,
	stage, outcome string, elapsed time.Duration, err error) {
	// Failures and refusals are warnings, so that --log-level warn keeps
	// every request the webhook did not admit (in monitor mode a refusal is
	// admitted: its warning is the "would be refused" line).
	level := slog.LevelInfo
	if err != nil || (outcome == OutcomeDenied && !h.opts.Monitor) {
		level = slog.LevelWarn
	}
	if !h.log.Enabled(ctx, level) {
		return
	}
	attrs := append(requestAttrs(req, stage),
		slog.String("decision", outcome),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000))
	if req.SubResource != "" {
		attrs = append(attrs, slog.String("subresource", clipLog(req.SubResource)))
	}
	if rule := resp.AuditAnnotations[auditRule]; rule != "" {
		attrs = append(attrs, slog.String("rule", clipLog(rule)))
	}
	if resp.Status != nil {
		attrs = append(attrs, slog.Int("code", int(resp.Status.Code)), slog.String("message", clipLog(resp.Status.Message)))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	h.log.LogAttrs(ctx, level, "admission", attrs...)
}

// requestAttrs are the attributes that name a request and its submitter
// in its log lines, with room for a few more.
func requestAttrs(req *admission.Request, stage string) []slog.Attr {
	attrs := make([]slog.Attr, 0, 12)
	return append(attrs,
		slog.String("uid", clipLog(req.UID)),
		slog.String("kind", clipLog(req.Kind.Kind)),
		slog.String("namespace", clipLog(req.Namespace)),
		slog.String("name", clipLog(req.Name)),
		slog.String("user", clipLog(req.UserName)),
		slog.String("operation", clipLog(req.Operation)),
		slog.String("stage", stage))
}

// maxLogField is the most of one request field a log line carries: the
// API server's names are at most 253 bytes, and a client that sends
// megabytes in a field should not get them copied into every log line.
const maxLogField = 512

// clipLog shortens s to maxLogField bytes, saying so.
func clipLog(s string) string {
	if len(s) <= maxLogField {
		return s
	}
	return strings.ToValidUTF8(s[:maxLogField], "") + fmt.Sprintf("... (%d bytes)", len(s))
}

// writeReview sends resp wrapped in an AdmissionReview.
func (h *Handler) writeReview(w http.ResponseWriter, status int, resp *admission.Response) {
	body, err := admission.Review(resp)
	if err != nil {
		// Cannot happen with the types involved; answer something valid.
		body = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":false,"status":{"code":500,"message":"internal error: encode response"}}}`)
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errBudget is readBody's answer when the body would take the bodies in
// flight past their budget.
var errBudget = errors.New("body budget exhausted")

// Body buffers come in powers of two from minBodyChunk to maxPooledChunk;
// the classes in between are pooled, so that an ordinary review (a few
// KiB) is read without allocating or clearing a buffer.
const (
	minBodyChunk   = 1 << 10
	maxPooledChunk = 16 << 10
	bodyClasses    = 5 // 1, 2, 4, 8 and 16 KiB
)

var bodyPools [bodyClasses]sync.Pool

// bodyClass is the pool of buffers of capacity size, or -1.
func bodyClass(size int) int {
	for c, s := 0, minBodyChunk; s <= maxPooledChunk; c, s = c+1, s*2 {
		if s == size {
			return c
		}
	}
	return -1
}

// getBody returns an empty buffer of capacity size, from its pool if it
// has one.
func getBody(size int) []byte {
	if c := bodyClass(size); c >= 0 {
		if b, ok := bodyPools[c].Get().(*[]byte); ok {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, size)
}

// putBody gives a buffer back to its pool once nothing refers to it.
func putBody(body []byte) {
	if c := bodyClass(cap(body)); c >= 0 {
		body = body[:0]
		bodyPools[c].Put(&body)
	}
}

// readBody reads r to the end, charging the buffer it fills to inFlight,
// the bytes of all bodies being read or evaluated; when they would exceed
// budget, the read stops with errBudget. It returns what it charged,
// which the caller gives back once the answer is written.
//
// Nothing is charged before the first byte arrives: a request that sent
// only its headers (or an HTTP/2 stream that sent nothing) holds an empty
// 1 KiB buffer and no share of the budget, however long it waits and
// whatever length it declared. From then on the buffer doubles only when
// it is full, so what a body is charged (its buffer's capacity) is never
// more than twice the bytes it actually sent, or 1 KiB. The budget is
// therefore taken only by bytes that arrived: to fill it, a client has to
// send it.
//
// The buffer never grows past limit+1 bytes, enough for the reader (an
// http.MaxBytesReader with that limit) to notice a body that is too long.
func readBody(r io.Reader, limit int64, inFlight *atomic.Int64, budget int64) (body []byte, charged int64, err error) {
	charge := func(size int64) bool {
		if inFlight.Add(size-charged) > budget {
			inFlight.Add(charged - size)
			return false
		}
		charged = size
		return true
	}
	buf := getBody(int(min(minBodyChunk, limit+1)))
	defer func() {
		if err != nil {
			putBody(buf)
		}
	}()
	for {
		if len(buf) == cap(buf) {
			// Full: every byte of it arrived, so doubling keeps the
			// charge within twice what was received.
			size := min(2*int64(cap(buf)), limit+1)
			if size <= int64(cap(buf)) {
				size = int64(cap(buf)) + 1
			}
			if !charge(size) {
				return nil, charged, errBudget
			}
			next := getBody(int(size))[:len(buf)]
			copy(next, buf)
			putBody(buf)
			buf = next
		}
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 && charged == 0 && !charge(int64(cap(buf))) {
			return nil, 0, errBudget
		}
		if rerr == io.EOF {
			return buf, charged, nil
		}
		if rerr != nil {
			return nil, charged, rerr
		}
	}
}
