package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/yunikorn-userinfo/userinfo/host/certwatch"
	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
)

// RunOptions configure Run: a policy module served as an admission webhook,
// with its settings and TLS files reloaded as they change and its metrics.
// The zero value of every field but Module, CertFile and KeyFile is usable.
type RunOptions struct {
	// Module is the Kubewarden waPC module to serve. Required.
	Module []byte
	// ModuleName names the module in logs and errors. Default: "policy".
	ModuleName string
	// Engine configures the policy instances: how many, their deadline,
	// memory and compilation cache. Its Logger defaults to Logger with
	// component=policy.
	Engine engine.Options

	// Settings are the policy settings to start with, a JSON object.
	// Default: {}.
	Settings json.RawMessage
	// SettingsPath, if set, is the file Settings came from: it is read
	// again every SettingsInterval, and changed settings are applied once
	// the policy's validate_settings accepts them. Default: none.
	SettingsPath string
	// SettingsInterval is how often SettingsPath is read. Default:
	// settings.DefaultInterval.
	SettingsInterval time.Duration
	// ValidateOverlay holds settings keys that PathValidate, the policy's
	// validating twin, evaluates with on top of the settings in force (for
	// the yunikorn-userinfo policy, {"validateOnly":true}). Settings are
	// only accepted, at start and on reload, when the policy accepts them
	// both with and without it. Default: none: /validate evaluates with
	// the settings as they are (and refuses whatever the policy would
	// change).
	ValidateOverlay json.RawMessage
	// SettingsUnreadable, if set, is why the settings could not be read
	// from SettingsPath at start (the file does not decode): Run then
	// starts not ready, as with settings the policy refuses, and waits for
	// the file to change. Settings is not used.
	SettingsUnreadable error
	// SettingsConfigMap, if set, is the ConfigMap SettingsPath is mounted
	// from: PathSettings refuses a write of it whose settings the policy
	// refuses. Default: none (PathSettings admits every write).
	SettingsConfigMap *SettingsConfigMap

	// CertFile and KeyFile are the PEM serving certificate and key.
	// Required. ClientCAFile, if set, makes clients present a certificate
	// it signed. All three are read again every CertInterval. Default:
	// certwatch.DefaultInterval.
	CertFile, KeyFile, ClientCAFile string
	CertInterval                    time.Duration

	// Handler configures /mutate. Run sets its Logger and Metrics;
	// MaxConcurrent defaults to Engine.MaxInstances (more requests at
	// once would only wait for an instance, holding their decoded review)
	// and Timeout to Engine.Timeout.
	Handler Options
	// Server configures the listeners, HTTP limits and shutdown. Run sets
	// its TLS configuration, handlers, Logger and OnShutdown.
	Server ServerOptions
	// Pprof serves /debug/pprof/ next to /metrics. Default: false.
	Pprof bool
	// Version is reported by yunikorn_userinfo_build_info. Default: "".
	Version string
	// Collectors are more metrics to serve on /metrics, such as those of
	// the host capabilities in Engine.HostCalls. Default: none.
	Collectors []prometheus.Collector

	// Logger receives the server's lifecycle and one line per admission.
	// Default: discard.
	Logger *slog.Logger
	// BeforeReady, if set, is waited for before /readyz turns 200 (the
	// policy's caches syncing); it returns an error only when ctx ends.
	BeforeReady func(ctx context.Context) error
	// OnListen, if set, is called with the webhook and metrics addresses
	// once they are listening, before the module is compiled.
	OnListen func(addr, metricsAddr net.Addr)
}

func (o *RunOptions) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ModuleName == "" {
		o.ModuleName = "policy"
	}
	if o.Engine.Logger == nil {
		o.Engine.Logger = o.Logger.With("component", "policy")
	}
	if o.Engine.MaxInstances <= 0 {
		o.Engine.MaxInstances = runtime.GOMAXPROCS(0)
	}
	if o.Engine.Timeout <= 0 {
		o.Engine.Timeout = engine.DefaultTimeout
	}
	if o.Settings == nil {
		o.Settings = settings.Empty
	}
	if o.Handler.MaxConcurrent <= 0 {
		o.Handler.MaxConcurrent = o.Engine.MaxInstances
	}
	if o.Handler.Timeout <= 0 {
		o.Handler.Timeout = o.Engine.Timeout
	}
	o.Handler.Logger = o.Logger
}

// Run serves opts.Module until ctx is done, then shuts down gracefully
// (see Server.Serve). It listens first and answers probes (not ready)
// while the module compiles and validate_settings checks the settings;
// /readyz turns 200 once both succeeded. Settings and TLS files are
// reloaded as they change, keeping the ones in force when new ones are
// refused. Settings from SettingsPath that the policy refuses at start
// (or that do not decode) do not stop it: it stays up not ready, /readyz
// and every review saying why, until the file holds settings the policy
// accepts (a replica rescheduled while a typo stands must not crash-loop).
//
// It returns an error if the TLS files or the module cannot be loaded, if
// settings not from a file are refused (each naming the step), if a
// listener fails, or if in-flight requests had to be cut off at shutdown;
// nil after a clean shutdown.
func Run(ctx context.Context, opts RunOptions) error {
	opts.setDefaults()
	log := opts.Logger
	if len(opts.Module) == 0 {
		return errors.New("run webhook: a module is required")
	}

	// Everything the server needs before it can listen.
	reg := prometheus.NewRegistry()
	var eng atomic.Pointer[engine.Engine]
	stats := func() engine.Stats {
		if e := eng.Load(); e != nil {
			return e.Stats()
		}
		return engine.Stats{}
	}
	metrics, err := NewMetrics(reg, stats, opts.Engine.MaxInstances, opts.Version)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	for _, c := range opts.Collectors {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	var certs *certwatch.Watcher
	recordExpiry := func() { metrics.SetCertificateExpiry(float64(certs.Certificate().NotAfter.Unix())) }
	certs, err = certwatch.New(certwatch.Options{
		CertFile:     opts.CertFile,
		KeyFile:      opts.KeyFile,
		ClientCAFile: opts.ClientCAFile,
		Interval:     opts.CertInterval,
		Logger:       log.With("component", "tls"),
		OnReload: func(what string, err error) {
			metrics.TLSReloaded(what, err)
			if what == certwatch.ReloadCertificate && err == nil {
				recordExpiry()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("load TLS files: %w", err)
	}
	recordExpiry()

	opts.Handler.Metrics = metrics
	handler := NewHandler(opts.Handler)
	if opts.SettingsConfigMap != nil {
		handler.CheckSettingsConfigMap(*opts.SettingsConfigMap, func() settings.Validator {
			if e := eng.Load(); e != nil {
				return settingsValidator(e, opts.ValidateOverlay)
			}
			return nil
		})
	}
	tlsConfig := certs.TLSConfig()
	// Offered explicitly so that HTTP/2 is available with a client CA too:
	// http.Server only adds "h2" to its own copy of the configuration, not
	// to the per-handshake ones that verify client certificates.
	tlsConfig.NextProtos = []string{"h2", "http/1.1"}
	so := opts.Server
	so.TLSConfig = tlsConfig
	so.Handler = handler
	so.MetricsHandler = metricsMux(reg, opts.Pprof)
	so.Logger = log
	so.OnShutdown = func() { handler.SetReady(false) }
	so.OnConnRefused = metrics.ConnectionRefused
	so.OnConnEvicted = metrics.ConnectionEvicted
	// With a client CA every client must present a certificate it signed:
	// a connection that finished its handshake is the API server's.
	so.TrustClientCerts = so.TrustClientCerts || opts.ClientCAFile != ""
	srv, err := NewServer(so)
	if err != nil {
		return err
	}
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricPrefix + "connections_open",
		Help: "Connections open on the webhook port (counted by the connection limits; 0 without them).",
	}, func() float64 { return float64(srv.Connections()) })); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	if opts.OnListen != nil {
		opts.OnListen(srv.Addr(), srv.MetricsAddr())
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	stop := func(err error) error {
		cancel()
		<-served
		return err
	}

	e, err := startPolicy(ctx, log, &opts)
	if err != nil {
		return stop(err)
	}
	eng.Store(e)
	defer e.Close(context.WithoutCancel(ctx))

	refused := opts.SettingsUnreadable
	if refused == nil {
		var invalid *settings.InvalidError
		if refused = checkStartSettings(ctx, log, e, &opts); refused != nil && (!errors.As(refused, &invalid) || opts.SettingsPath == "") {
			// The guest failed, or the settings came from no file that
			// could change: nothing to wait for.
			return stop(refused)
		}
	}
	var (
		store   *settings.Store
		settled = make(chan struct{})
		once    sync.Once
	)
	storeOpts := settings.Options{
		Path:     opts.SettingsPath,
		Interval: opts.SettingsInterval,
		Validate: settingsValidator(e, opts.ValidateOverlay),
		Logger:   log.With("component", "settings"),
		OnReload: func(outcome string) {
			metrics.SettingsReloaded(outcome)
			if outcome == settings.ReloadApplied {
				settingsInForce(ctx, log, metrics, store.Current(), "reload")
				once.Do(func() { close(settled) })
			}
		},
	}
	if refused != nil {
		log.ErrorContext(ctx, "settings refused at start: serving not ready until the settings file holds settings the policy accepts",
			"component", "settings", "path", opts.SettingsPath, "error", refused.Error(),
			"retry_interval", storeOpts.Interval.String())
		handler.SetNotReady(refused.Error())
		var initial json.RawMessage
		if opts.SettingsUnreadable == nil {
			initial = opts.Settings
		}
		store, err = settings.NewRefusedStore(initial, storeOpts)
	} else {
		store, err = settings.NewStore(opts.Settings, storeOpts)
	}
	if err != nil {
		return stop(err)
	}
	if refused == nil {
		settingsInForce(ctx, log, metrics, store.Current(), "start")
	}
	go store.Run(ctx)
	go certs.Run(ctx)
	if refused != nil {
		select {
		case <-settled:
		case err := <-served:
			return err
		}
	}
	if opts.BeforeReady != nil {
		began := time.Now()
		if err := opts.BeforeReady(ctx); err != nil {
			if ctx.Err() != nil {
				return stop(nil)
			}
			return stop(fmt.Errorf("before ready: %w", err))
		}
		log.InfoContext(ctx, "caches synced", "duration_ms", time.Since(began).Milliseconds())
	}
	handler.StartWithValidate(e, store.Current, validateSettings(store.Current, opts.ValidateOverlay))
	log.InfoContext(ctx, "webhook ready", "module", opts.ModuleName, "instances", e.Stats().Instances,
		"max_instances", opts.Engine.MaxInstances, "timeout", opts.Handler.Timeout.String())
	return <-served
}

// settingsInForce logs the settings that now apply, as the JSON they were
// given as, with their SHA-256, and makes yunikorn_userinfo_settings_info
// report that hash: an audit of which settings decided, from the log or
// the metric alone.
func settingsInForce(ctx context.Context, log *slog.Logger, metrics *Metrics, raw json.RawMessage, when string) {
	sum := SettingsHash(raw)
	metrics.SetSettings(sum)
	log.InfoContext(ctx, "settings in force", "component", "settings", "loaded", when,
		"sha256", sum, "settings", string(raw))
}

// SettingsHash is the SHA-256, in hex, of settings as they are given.
func SettingsHash(raw json.RawMessage) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// validateSettings returns the settings of PathValidate: current with
// overlay set over it, computed again only when current changes.
func validateSettings(current func() json.RawMessage, overlay json.RawMessage) func() json.RawMessage {
	if overlay == nil {
		return current
	}
	type merged struct{ from, to json.RawMessage }
	var last atomic.Pointer[merged]
	return func() json.RawMessage {
		cur := current()
		if m := last.Load(); m != nil && unsafe.SliceData(m.from) == unsafe.SliceData(cur) && len(m.from) == len(cur) {
			return m.to
		}
		// The settings in force were checked with the overlay when they
		// were accepted, so this cannot fail. If it did, /validate would
		// still refuse every object the policy would change.
		to, err := settings.Overlay(cur, overlay)
		if err != nil {
			to = cur
		}
		last.Store(&merged{from: cur, to: to})
		return to
	}
}

// startPolicy compiles the module: the first thing /readyz waits for.
func startPolicy(ctx context.Context, log *slog.Logger, opts *RunOptions) (*engine.Engine, error) {
	start := time.Now()
	e, err := engine.New(ctx, opts.Module, opts.Engine)
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", opts.ModuleName, err)
	}
	log.DebugContext(ctx, "policy loaded", "module", opts.ModuleName, "bytes", len(opts.Module),
		"duration_ms", time.Since(start).Milliseconds(), "metered", e.Metered())
	return e, nil
}

// checkStartSettings checks the settings Run starts with, with and without
// the validate overlay: a *settings.InvalidError (possibly wrapped) when
// the policy refuses them, another error when it could not be asked. A
// remark is logged once, also when both checks make it.
func checkStartSettings(ctx context.Context, log *slog.Logger, e *engine.Engine, opts *RunOptions) error {
	remark, err := checkSettings(ctx, e, opts.Settings)
	if err != nil {
		return err
	}
	logRemark(ctx, log, remark)
	if opts.ValidateOverlay == nil {
		return nil
	}
	twin, err := settings.Overlay(opts.Settings, opts.ValidateOverlay)
	var twinRemark string
	if err == nil {
		twinRemark, err = checkSettings(ctx, e, twin)
	}
	if err != nil {
		return fmt.Errorf("settings with the validate overlay: %w", err)
	}
	if twinRemark != remark {
		logRemark(ctx, log, twinRemark)
	}
	return nil
}

// settingsValidator asks the policy about settings as Run accepts them:
// valid as they are and, with an overlay, with it set over them.
func settingsValidator(e *engine.Engine, overlay json.RawMessage) settings.Validator {
	return func(ctx context.Context, raw json.RawMessage) (bool, string, error) {
		sv, err := e.ValidateSettings(ctx, raw)
		if err != nil || !sv.Valid || overlay == nil {
			return sv.Valid, sv.Message, err
		}
		twin, err := settings.Overlay(raw, overlay)
		if err != nil {
			return false, err.Error(), nil
		}
		tv, err := e.ValidateSettings(ctx, twin)
		if err != nil || !tv.Valid {
			return tv.Valid, "with the validate overlay: " + tv.Message, err
		}
		return sv.Valid, sv.Message, nil
	}
}

// CheckSettings runs the policy's validate_settings on raw: settings it
// refuses are a *settings.InvalidError with the policy's message, the
// error kwctl gives; a message on valid settings (a warning) is logged.
func CheckSettings(ctx context.Context, log *slog.Logger, e *engine.Engine, raw json.RawMessage) error {
	remark, err := checkSettings(ctx, e, raw)
	if err != nil {
		return err
	}
	logRemark(ctx, log, remark)
	return nil
}

// checkSettings is CheckSettings returning the remark instead of logging it.
func checkSettings(ctx context.Context, e *engine.Engine, raw json.RawMessage) (remark string, err error) {
	sv, err := e.ValidateSettings(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("validate settings: %w", err)
	}
	if !sv.Valid {
		return "", &settings.InvalidError{Message: sv.Message}
	}
	return sv.Message, nil
}

// logRemark logs the policy's message on settings it accepted, if any: its
// warnings (what is probably a mistake) as a warning, its notes (what a
// deliberate setting implies) at info level.
func logRemark(ctx context.Context, log *slog.Logger, remark string) {
	warnings, notes := settings.SplitRemark(remark)
	if warnings != "" {
		log.WarnContext(ctx, "the policy accepted the settings with a remark", "message", warnings)
	}
	if notes != "" {
		log.InfoContext(ctx, "the policy's note on the settings", "message", notes)
	}
}

// metricsMux serves /metrics, and /debug/pprof/ when asked.
func metricsMux(reg *prometheus.Registry, withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
