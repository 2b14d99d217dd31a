package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

// Paths the Handler serves.
const (
	PathMutate  = "/mutate"
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
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

// Policy evaluates a Kubewarden validate payload and returns the policy's
// ValidationResponse. *engine.Engine implements it.
type Policy interface {
	Validate(ctx context.Context, payload []byte) ([]byte, error)
}

var _ Policy = (*engine.Engine)(nil)

// Options configure a Handler.
type Options struct {
	// Logger receives one line per admission (Info for evaluated requests,
	// Warn for failures). Default: discard.
	Logger *slog.Logger
	// Metrics, if set, records every request. Default: none.
	Metrics *Metrics
	// MaxRequestBytes limits the body of a request. Default:
	// DefaultMaxRequestBytes (7 MiB).
	MaxRequestBytes int64
	// MaxDepth limits the nesting of arrays and objects in a request.
	// Default: DefaultMaxDepth (512).
	MaxDepth int
	// Timeout bounds one evaluation, waiting for an instance included; the
	// timeout the API server sends in the URL (?timeout=10s) lowers it,
	// never raises it. Default: engine.DefaultTimeout (2 s).
	Timeout time.Duration
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
}

// target is what the Handler evaluates with, set once by Start.
type target struct {
	policy   Policy
	settings func() json.RawMessage
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
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns an unready Handler.
func NewHandler(opts Options) *Handler {
	opts.setDefaults()
	h := &Handler{opts: opts, metrics: opts.Metrics, log: opts.Logger}
	h.mux = http.NewServeMux()
	h.mux.HandleFunc(PathMutate, h.serveMutate)
	h.mux.HandleFunc(PathHealthz, h.serveHealthz)
	h.mux.HandleFunc(PathReadyz, h.serveReadyz)
	h.metrics.setReady(false)
	return h
}

// Start makes the handler evaluate with policy and the settings returned
// by settings (called once per request, so they may change), and marks it
// ready. Call it once the module is compiled and its settings accepted.
func (h *Handler) Start(policy Policy, settings func() json.RawMessage) {
	h.target.Store(&target{policy: policy, settings: settings})
	h.SetReady(true)
}

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

// serveMutate answers one AdmissionReview. Whatever happens, the body is an
// AdmissionReview: for a request that could not be read (wrong method,
// media type or size, malformed review) with an HTTP 4xx status and an
// errored response naming the problem; otherwise with HTTP 200, the
// request's uid, and the policy's verdict or, if the evaluation failed,
// allowed=false with code 500.
func (h *Handler) serveMutate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h.metrics.inFlightAdd(1)
	defer h.metrics.inFlightAdd(-1)
	ctx := r.Context()

	defer func() {
		// A bug must cost one request, not the process.
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			h.log.ErrorContext(ctx, "admission handler panicked", "panic", fmt.Sprint(p))
			h.metrics.error(CauseInternal)
			h.writeReview(w, http.StatusInternalServerError,
				admission.Errored("", admission.CodeEvaluationFailed, fmt.Errorf("internal error: %v", p)))
		}
	}()

	req, rej := h.readReview(w, r)
	if rej != nil {
		h.metrics.error(rej.cause)
		h.metrics.observe("", "", OutcomeInvalid, time.Since(start).Seconds())
		h.log.WarnContext(ctx, "admission request refused", "remote", r.RemoteAddr,
			"status", rej.status, "cause", rej.cause, "error", rej.err)
		h.writeReview(w, rej.status, admission.Errored("", int32(rej.status), rej.err))
		return
	}

	t := h.target.Load()
	if t == nil {
		h.metrics.error(CauseNotReady)
		h.metrics.observe(req.Kind.Kind, req.Operation, OutcomeError, time.Since(start).Seconds())
		h.writeReview(w, http.StatusOK, admission.Errored(req.UID, http.StatusServiceUnavailable,
			errors.New("the webhook is starting: the policy is not loaded yet")))
		return
	}

	evalCtx, cancel := context.WithTimeout(ctx, h.deadline(r))
	defer cancel()
	resp, cause, err := evaluate(evalCtx, t, req)
	outcome := outcomeOf(resp, err)
	elapsed := time.Since(start)
	if err != nil {
		h.metrics.error(cause)
	}
	h.metrics.observe(req.Kind.Kind, req.Operation, outcome, elapsed.Seconds())
	h.logAdmission(ctx, req, resp, outcome, elapsed, err)
	h.writeReview(w, http.StatusOK, resp)
}

// readReview checks the transport-level properties of the request and
// decodes the AdmissionReview.
func (h *Handler) readReview(w http.ResponseWriter, r *http.Request) (*admission.Request, *rejection) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, &rejection{http.StatusMethodNotAllowed, CauseMethod,
			fmt.Errorf("method %s is not allowed: send the AdmissionReview with POST", r.Method)}
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		return nil, &rejection{http.StatusUnsupportedMediaType, CauseContentType,
			fmt.Errorf("content type %q is not supported: want application/json", ct)}
	}
	if r.ContentLength > h.opts.MaxRequestBytes {
		return nil, &rejection{http.StatusRequestEntityTooLarge, CauseTooLarge,
			fmt.Errorf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, h.opts.MaxRequestBytes)}
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes), r.ContentLength)
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return nil, &rejection{http.StatusRequestEntityTooLarge, CauseTooLarge,
				fmt.Errorf("request body exceeds the limit of %d bytes", h.opts.MaxRequestBytes)}
		}
		return nil, &rejection{http.StatusBadRequest, CauseBadRequest, fmt.Errorf("read request body: %w", err)}
	}
	if len(body) == 0 {
		return nil, &rejection{http.StatusBadRequest, CauseBadRequest, errors.New("request body is empty: want an AdmissionReview")}
	}
	if err := admission.CheckDepth(body, h.opts.MaxDepth); err != nil {
		return nil, &rejection{http.StatusBadRequest, CauseBadRequest, fmt.Errorf("decode admission review: %w", err)}
	}
	req, err := admission.ParseReview(body)
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
func evaluate(ctx context.Context, t *target, req *admission.Request) (*admission.Response, string, error) {
	resp, err := admission.Evaluate(ctx, t.policy.Validate, req, t.settings())
	if err != nil {
		return resp, causeOf(err), err
	}
	return resp, "", nil
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
	outcome string, elapsed time.Duration, err error) {
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	if !h.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("uid", req.UID),
		slog.String("kind", req.Kind.Kind),
		slog.String("namespace", req.Namespace),
		slog.String("name", req.Name),
		slog.String("user", req.UserName),
		slog.String("operation", req.Operation),
		slog.String("decision", outcome),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
	}
	if req.SubResource != "" {
		attrs = append(attrs, slog.String("subresource", req.SubResource))
	}
	if resp.Status != nil {
		attrs = append(attrs, slog.Int("code", int(resp.Status.Code)), slog.String("message", resp.Status.Message))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	h.log.LogAttrs(ctx, level, "admission", attrs...)
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

// readBody reads r to the end into a buffer sized from the Content-Length
// (already checked against the limit), so a large review is not copied
// over and over as the buffer grows.
func readBody(r io.Reader, contentLength int64) ([]byte, error) {
	var buf bytes.Buffer
	if contentLength > 0 {
		buf.Grow(int(contentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}
