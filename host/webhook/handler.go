package webhook

import (
	"bytes"
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
// never for the length it declares. Large bodies (see LargeRequestBytes)
// may hold at most half of it, so that the other half always remains for
// the ordinary reviews, whatever one user sends.
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
// the answers it cannot give as a review (no uid could be read: see
// serveReview).
const RetryAfterSeconds = "1"

// uidWait is how long a refused request's body may take to bring the uid
// of its review when nothing of it was read yet. The API server sends the
// body with its headers; a client that sends nothing is answered without
// a review after it.
const uidWait = time.Second

// uidPrefixBytes is how much of a body is read for the uid of a review
// refused before its evaluation: the API server writes kind, apiVersion
// and request.uid first, in under 200 bytes.
const uidPrefixBytes = 4 << 10

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
	// read or evaluated at once. Large bodies (declared, or received, past
	// LargeRequestBytes) are charged against a reserve of their own, half
	// of it (at least one body of MaxRequestBytes), so that the other half
	// always remains for ordinary reviews. A request whose body would take
	// the total, or the large bodies, past their bound is refused with code
	// 429 (see serveReview). Default: DefaultMaxBodyBytesInFlight (32 MiB).
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
	// it is refused with code 429 as soon as the uid of its review is read
	// (as many again may wait for theirs, for uidWait at most), holding
	// no slot and no body budget. Default: DefaultMaxRequestsPerClient
	// (256); negative: no limit.
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
	// bodyBytes is the buffer capacity charged to the bodies in flight,
	// largeBodyBytes that of the large ones among them.
	bodyBytes, largeBodyBytes atomic.Int64
	budget                    bodyBudget
	// slots holds one token per request being worked on, largeSlots one
	// per large request among them.
	slots, largeSlots chan struct{}
	// waitingLarge counts the requests waiting for a large slot (tests
	// wait on it instead of sleeping).
	waitingLarge atomic.Int32
	// clients counts the requests in flight per client, refusing those
	// refused past it that wait for the uid of their review.
	clients, refusing *clientCounts
	// notReady is why there is no target yet (SetNotReady), and
	// settingsCheck what PathSettings judges with (settingsreview.go).
	notReady      atomic.Pointer[string]
	settingsCheck atomic.Pointer[settingsCheck]
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns an unready Handler.
func NewHandler(opts Options) *Handler {
	opts.setDefaults()
	h := &Handler{opts: opts, metrics: opts.Metrics, log: opts.Logger,
		slots: make(chan struct{}, opts.MaxConcurrent), largeSlots: make(chan struct{}, opts.MaxConcurrentLarge),
		clients: newClientCounts(max(0, opts.MaxRequestsPerClient), 0), refusing: newClientCounts(max(0, opts.MaxRequestsPerClient), 0)}
	h.budget = newBodyBudget(&h.opts, &h.bodyBytes, &h.largeBodyBytes)
	h.mux = http.NewServeMux()
	h.mux.HandleFunc(PathMutate, func(w http.ResponseWriter, r *http.Request) { h.serveReview(w, r, stageMutate) })
	h.mux.HandleFunc(PathValidate, func(w http.ResponseWriter, r *http.Request) { h.serveReview(w, r, stageValidate) })
	h.mux.HandleFunc(PathHealthz, h.serveHealthz)
	h.mux.HandleFunc(PathReadyz, h.serveReadyz)
	h.mux.HandleFunc(PathSettings, h.serveSettingsReview)
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
		if reason := h.notReadyReason(); reason != "" {
			writeText(w, http.StatusServiceUnavailable, "not ready: "+reason)
			return
		}
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

// rejection is a request refused before evaluation: its HTTP status (the
// code of the review), the metric cause and the message. review: it was
// refused for what the webhook holds, or for its size or depth, not for
// its form, so it may be a review the API server sent: it is answered
// with its uid at HTTP 200 when one can be read.
type rejection struct {
	status int
	cause  string
	err    error
	review bool
}

// serveReview answers one AdmissionReview at the given stage. Whatever
// happens, the body is an AdmissionReview with allowed=false unless the
// policy admitted it:
//
//   - with HTTP 200 and the request's uid: the policy's verdict, or code
//     500 if the evaluation failed; and every refusal of a review the API
//     server may have sent, read far enough for its uid (its first bytes):
//     code 429 when the webhook is busy (the client's requests in flight,
//     the body budget, no slot within the deadline), 413 past the size
//     limit, 400 past the depth limit. The API server applies a refusal
//     inside an HTTP 200 whatever the failurePolicy: only a webhook that
//     cannot answer at all is skipped under Ignore;
//   - with an HTTP 4xx status and no uid only for what is not a review
//     (wrong method or media type, no body, malformed JSON, not an
//     AdmissionReview v1 as the API server writes it), or a refusal whose
//     body did not bring a uid within uidWait (429 and 503 with
//     Retry-After).
//
// The work on a request is bounded four ways: it counts against its
// client's MaxRequestsPerClient from the start; its body is charged to a
// byte budget as its bytes arrive (nothing before), a large body to a
// reserve of its own; everything after reading it (decoding, the
// evaluation, the patch, encoding) happens holding one of MaxConcurrent
// slots, and for a large body one of MaxConcurrentLarge first; and all of
// that runs under the request's deadline.
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
			rej := &rejection{http.StatusTooManyRequests, CauseClientBusy,
				fmt.Errorf("the webhook is busy: too many requests in flight from %s: at most %d at once", ip, h.opts.MaxRequestsPerClient), true}
			// As many refused requests again may wait for their uid;
			// past that, one is answered at once, without it.
			if h.refusing.acquire(ip) == "" {
				defer h.refusing.release(ip)
			} else {
				rej.review = false
			}
			h.refuse(w, r, start, rej, nil)
			return
		}
		defer h.clients.release(ip)
	}

	body, charged, rej := h.readRequest(w, r)
	defer h.budget.release(charged)
	if rej != nil {
		h.refuse(w, r, start, rej, body)
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
			h.refuse(w, r, start, &rejection{http.StatusTooManyRequests, CauseBusy,
				fmt.Errorf("the webhook is busy: no slot for large requests became free within the deadline (%d large requests at once)", h.opts.MaxConcurrentLarge), true}, body)
			return
		}
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	case <-evalCtx.Done():
		h.refuse(w, r, start, &rejection{http.StatusTooManyRequests, CauseBusy,
			fmt.Errorf("the webhook is busy: no slot became free within the deadline (%d requests at once)", h.opts.MaxConcurrent), true}, body)
		return
	}

	req, rej := h.decodeReview(body)
	if rej != nil {
		h.refuse(w, r, start, rej, body)
		return
	}
	read = req

	t := h.target.Load()
	if t == nil {
		h.metrics.error(CauseNotReady)
		h.metrics.observe(stage, req.Kind.Kind, req.Operation, OutcomeError, time.Since(start).Seconds())
		why := errors.New("the webhook is starting: the policy is not loaded yet")
		if reason := h.notReadyReason(); reason != "" {
			why = errors.New("this webhook replica is not ready: " + reason)
		}
		h.writeReview(w, http.StatusOK, admission.Errored(req.UID, http.StatusServiceUnavailable, why))
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

// refuse answers a request that was not evaluated; read is what was read
// of its body.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, start time.Time, rej *rejection, read []byte) {
	h.metrics.error(rej.cause)
	h.metrics.observe("", "", "", OutcomeInvalid, time.Since(start).Seconds())
	uid := ""
	if rej.review {
		uid = refusedUID(w, r, read)
	}
	h.log.WarnContext(r.Context(), "admission request refused", "remote", r.RemoteAddr, "uid", clipLog(uid),
		"status", rej.status, "cause", rej.cause, "error", rej.err)
	if uid != "" {
		h.writeReview(w, http.StatusOK, admission.Errored(uid, int32(rej.status), rej.err))
		return
	}
	if rej.status == http.StatusServiceUnavailable || rej.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", RetryAfterSeconds)
	}
	h.writeReview(w, rej.status, admission.Errored("", int32(rej.status), rej.err))
}

// refusedUID is the uid of the review a refused request's body begins
// with, "" if it does not begin as one: from read, what was read of it,
// or else from its first uidPrefixBytes, waiting uidWait at most for
// them. The rest of the body is left unread (the server closes an HTTP/1
// connection or resets an HTTP/2 stream after the answer).
func refusedUID(w http.ResponseWriter, r *http.Request, read []byte) string {
	if uid := reviewUID(read); uid != "" || len(read) >= uidPrefixBytes || r.Body == nil {
		return uid
	}
	buf := getBody(uidPrefixBytes)[:uidPrefixBytes]
	defer putBody(buf)
	n := copy(buf, read)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(uidWait))
	m, _ := io.ReadFull(r.Body, buf[n:])
	return reviewUID(buf[:n+m])
}

// reviewUID reads the uid of an AdmissionReview v1 from the first bytes
// of its JSON, as the API server writes it: kind and apiVersion, then
// request with its uid first. It returns "" for anything else.
func reviewUID(body []byte) string {
	d := json.NewDecoder(bytes.NewReader(body[:min(len(body), uidPrefixBytes)]))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for {
		tok, err := d.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return ""
		}
		value, err := d.Token()
		if err != nil {
			return ""
		}
		switch key {
		case "kind":
			if value != "AdmissionReview" {
				return ""
			}
		case "apiVersion":
			if value != admissionV1 {
				return ""
			}
		case "request":
			if value != json.Delim('{') || !seen["kind"] || !seen["apiVersion"] {
				return ""
			}
			if k, err := d.Token(); err != nil || k != "uid" {
				return ""
			}
			v, err := d.Token()
			if uid, ok := v.(string); err == nil && ok {
				return uid
			}
			return ""
		default:
			return ""
		}
		seen[key] = true
	}
}

// admissionV1 is the apiVersion of the reviews the webhook answers.
const admissionV1 = "admission.k8s.io/v1"

// readRequest checks the transport-level properties of the request and
// reads its body. charged is what the body was charged to the byte
// budget, to be given back once the answer is written, also when the
// request is refused; body is what was read, also then.
func (h *Handler) readRequest(w http.ResponseWriter, r *http.Request) (body []byte, charged charge, rej *rejection) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, charge{}, &rejection{http.StatusMethodNotAllowed, CauseMethod,
			fmt.Errorf("method %s is not allowed: send the AdmissionReview with POST", r.Method), false}
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		return nil, charge{}, &rejection{http.StatusUnsupportedMediaType, CauseContentType,
			fmt.Errorf("content type %q is not supported: want application/json", ct), false}
	}
	if r.ContentLength > h.opts.MaxRequestBytes {
		return nil, charge{}, &rejection{http.StatusRequestEntityTooLarge, CauseTooLarge,
			fmt.Errorf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, h.opts.MaxRequestBytes), true}
	}
	body, charged, err := readBody(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes), h.opts.MaxRequestBytes, &h.budget,
		r.ContentLength >= h.opts.LargeRequestBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return body, charged, &rejection{http.StatusRequestEntityTooLarge, CauseTooLarge,
				fmt.Errorf("request body exceeds the limit of %d bytes", h.opts.MaxRequestBytes), true}
		case errors.Is(err, errBudget):
			what := "request bodies in flight"
			limit := h.budget.limit
			if charged.large || errors.Is(err, errLargeBudget) {
				what, limit = "large request bodies in flight", h.budget.largeLimit
			}
			return body, charged, &rejection{http.StatusTooManyRequests, CauseOverloaded,
				fmt.Errorf("the webhook is busy: %s would exceed %d bytes", what, limit), true}
		}
		return body, charged, &rejection{http.StatusBadRequest, CauseBadRequest, fmt.Errorf("read request body: %w", err), true}
	}
	if len(body) == 0 {
		return body, charged, &rejection{http.StatusBadRequest, CauseBadRequest, errors.New("request body is empty: want an AdmissionReview"), false}
	}
	return body, charged, nil
}

// decodeReview decodes the AdmissionReview in body.
func (h *Handler) decodeReview(body []byte) (*admission.Request, *rejection) {
	req, err := admission.ParseReviewDepth(body, h.opts.MaxDepth)
	if err != nil {
		return nil, &rejection{http.StatusBadRequest, CauseBadRequest, err, true}
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
// flight past their budget, errLargeBudget (an errBudget) when a large
// body would take the large ones past their reserve.
var (
	errBudget      = errors.New("body budget exhausted")
	errLargeBudget = fmt.Errorf("%w: large bodies", errBudget)
)

// bodyBudget is the memory the bodies in flight may take: all of them
// (all, at most limit), and the large ones among them (large, at most
// largeLimit), so that large bodies, which wait for one of few slots,
// cannot take what the ordinary reviews need.
type bodyBudget struct {
	all, large        *atomic.Int64
	limit, largeLimit int64
	// largeFrom: a buffer of more bytes than this is a large body's.
	largeFrom int64
}

// newBodyBudget is the budget of opts, counted in all and large: large
// bodies hold at most half of it, and at least one body of the largest
// size.
func newBodyBudget(opts *Options, all, large *atomic.Int64) bodyBudget {
	return bodyBudget{all: all, large: large, limit: opts.MaxBodyBytesInFlight,
		largeLimit: min(opts.MaxBodyBytesInFlight, max(opts.MaxBodyBytesInFlight/2, opts.MaxRequestBytes+1)),
		largeFrom:  opts.LargeRequestBytes}
}

// charge is what one body holds of a bodyBudget.
type charge struct {
	bytes int64
	// large: the bytes are charged to the large bodies too.
	large bool
}

// grow makes c size bytes, charged to the large bodies too when large
// (or c already is); it returns errBudget or errLargeBudget, with c
// unchanged, when that would take a total past its bound.
func (b *bodyBudget) grow(c *charge, size int64, large bool) error {
	large = large || c.large
	var heldLarge int64
	if c.large {
		heldLarge = c.bytes
	}
	if large && b.large.Add(size-heldLarge) > b.largeLimit {
		b.large.Add(heldLarge - size)
		return errLargeBudget
	}
	if b.all.Add(size-c.bytes) > b.limit {
		b.all.Add(c.bytes - size)
		if large {
			b.large.Add(heldLarge - size)
		}
		return errBudget
	}
	c.bytes, c.large = size, large
	return nil
}

// release gives back what c holds.
func (b *bodyBudget) release(c charge) {
	b.all.Add(-c.bytes)
	if c.large {
		b.large.Add(-c.bytes)
	}
}

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

// readBody reads r to the end, charging the buffer it fills to b: to
// the large bodies too when declaredLarge (its Content-Length is past
// LargeRequestBytes), or once the buffer is. When that would take a total
// past its bound, the read stops with errBudget (or errLargeBudget). It
// returns what it read and what it charged, also on an error; the caller
// gives the charge back once the answer is written.
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
// A large body is read as it arrives, like any other, and waits for its
// slot holding its bytes in the large bodies' reserve: waiting unread, it
// would hold the HTTP/2 connection's flow-control window, which the API
// server's ordinary reviews on the same connection need.
//
// The buffer never grows past limit+1 bytes, enough for the reader (an
// http.MaxBytesReader with that limit) to notice a body that is too long.
func readBody(r io.Reader, limit int64, b *bodyBudget, declaredLarge bool) (body []byte, charged charge, err error) {
	grow := func(size int64) error { return b.grow(&charged, size, declaredLarge || size > b.largeFrom) }
	buf := getBody(int(min(minBodyChunk, limit+1)))
	for {
		if len(buf) == cap(buf) {
			// Full: every byte of it arrived, so doubling keeps the
			// charge within twice what was received.
			size := min(2*int64(cap(buf)), limit+1)
			if size <= int64(cap(buf)) {
				size = int64(cap(buf)) + 1
			}
			if err := grow(size); err != nil {
				return buf, charged, err
			}
			next := getBody(int(size))[:len(buf)]
			copy(next, buf)
			putBody(buf)
			buf = next
		}
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 && charged.bytes == 0 {
			if err := grow(int64(cap(buf))); err != nil {
				return buf, charged, err
			}
		}
		if rerr == io.EOF {
			return buf, charged, nil
		}
		if rerr != nil {
			return buf, charged, rerr
		}
	}
}
