package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/yunikorn-userinfo/userinfo/host/certwatch"
	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/kubecap"
	"github.com/yunikorn-userinfo/userinfo/host/registration"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
	"github.com/yunikorn-userinfo/userinfo/host/webhook"
)

// envPrefix starts the environment variable of every serve flag:
// --cert-file is YUNIKORN_USERINFO_CERT_FILE.
const envPrefix = "YUNIKORN_USERINFO_"

// serveFlags are the flags of `serve`.
type serveFlags struct {
	listen          string
	metricsListen   string
	certFile        string
	keyFile         string
	clientCAFile    string
	selfSigned      bool
	selfSignedDir   string
	settingsPath    string
	settingsJSON    string
	settingsCM      string
	validateOverlay string
	kubeconfig      string
	contextDir      string
	cache           string
	syncBeforeReady []string
	settingsReload  time.Duration
	monitor         bool
	certReload      time.Duration
	instances       int
	timeout         time.Duration
	memoryLimitMiB  uint32
	maxRequestBytes int64
	maxDepth        int
	maxBodyInFlight int64
	largeRequest    int64
	maxLarge        int
	maxConnsClient  int
	maxConns        int
	reservedConns   int
	maxPending      int
	trustedCIDRs    []string
	trustedSources  []netip.Prefix
	maxReqsClient   int
	maxStreams      int
	headerTimeout   time.Duration
	idleTimeout     time.Duration
	shutdownDelay   time.Duration
	shutdownTimeout time.Duration
	pprof           bool
	watchReg        []string
	regInterval     time.Duration
}

func newServeCommand(a *app) *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve [MODULE] --cert-file FILE --key-file FILE [-s SETTINGS]",
		Short: "Serve a policy as an HTTPS Kubernetes admission webhook",
		Long: `Serve a Kubewarden waPC policy (the embedded yunikorn-user-info policy
without MODULE) as a Kubernetes admission webhook.

HTTPS on --listen: POST /mutate takes an AdmissionReview (admission.k8s.io/v1)
and always answers one; GET /healthz reports the process alive; GET /readyz
answers 200 once the module is compiled, its protocol version checked, its
settings accepted by validate_settings and the caches of --sync-before-ready
synced, and 503 again while shutting down.
Plain HTTP on --metrics-listen: GET /metrics (Prometheus).

The certificate and key are reloaded when their files change, and so are the
client CA (--client-ca-file, which makes client certificates mandatory) and
the settings file. New settings are checked with validate_settings first;
invalid ones are logged and ignored. Settings from --settings-path that are
invalid at start do not stop the program: it serves not ready (/readyz 503
with the policy's message, every review refused with code 503 and it) and
reads the file again every --settings-reload-interval until it holds
settings the policy accepts. Invalid --settings-json, or a settings file
that cannot be read at all, stops it. The settings
in force are logged with their SHA-256, which
yunikorn_userinfo_settings_info reports too.

POST /settings reviews writes of the ConfigMap named by
--settings-configmap (a ValidatingWebhookConfiguration for that one
ConfigMap sends them): one whose settings the policy refuses is refused
with the policy's message, so a kubectl edit with a typo is never stored.

With --monitor, what the policy refuses (or fails to evaluate) is admitted
unchanged, with the warning "monitor mode: would be refused: <message>",
a warn line naming the submitter, the claimed identity and the rule, and a
count in yunikorn_userinfo_monitor_would_refuse_total; accepted requests
are answered as without it. Watch with it before enforcing.

On SIGTERM or SIGINT: /readyz turns 503, requests are still served for
--shutdown-delay, then no new connections are accepted and in-flight requests
get up to --shutdown-timeout to finish.

Every flag can also be set with an environment variable: YUNIKORN_USERINFO_
followed by the flag name in upper case with _ for -, for example
YUNIKORN_USERINFO_CERT_FILE. A flag on the command line wins.

Unlike the other commands, serve logs JSON at info level (one line per
admission) unless --log-format or --log-level say otherwise.

For a local try-out, --self-signed creates a CA and a certificate for
localhost, 127.0.0.1 and ::1 in --self-signed-dir and serves with them.`,
		Args: cobra.MaximumNArgs(1),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			// An operator reads a webhook's log with a log system: JSON and
			// the admission lines (Info) unless asked otherwise.
			if !cmd.Flags().Changed("log-format") {
				a.global.logFormat = "json"
			}
			if !cmd.Flags().Changed("log-level") {
				a.global.logLevel = "info"
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runServe(cmd.Context(), args, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", webhook.DefaultAddr, "HTTPS address of /mutate, /healthz and /readyz")
	fs.StringVar(&f.metricsListen, "metrics-listen", ":9090", `plain HTTP address of /metrics; "" disables it`)
	fs.StringVar(&f.certFile, "cert-file", "", "PEM serving certificate (chain), reloaded when it changes")
	fs.StringVar(&f.keyFile, "key-file", "", "PEM private key of the serving certificate, reloaded when it changes")
	fs.StringVar(&f.clientCAFile, "client-ca-file", "", "PEM CA bundle; when set, clients must present a certificate it signed (reloaded when it changes)")
	fs.BoolVar(&f.selfSigned, "self-signed", false, "for local use: create a CA and a localhost certificate in --self-signed-dir and serve with them")
	fs.StringVar(&f.selfSignedDir, "self-signed-dir", filepath.Join(os.TempDir(), binaryName+"-self-signed"), "where --self-signed writes ca.crt, tls.crt and tls.key")
	fs.StringVarP(&f.settingsPath, "settings-path", "s", "", "policy settings file, YAML or JSON, reloaded when it changes (default {})")
	fs.StringVar(&f.settingsJSON, "settings-json", "", "policy settings as a JSON object (default {})")
	fs.StringVar(&f.settingsCM, "settings-configmap", "", "NAMESPACE/NAME of the ConfigMap --settings-path is mounted from: "+
		webhook.PathSettings+" then refuses a CREATE or UPDATE of it whose settings (the key named as the file) the policy refuses")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", `API server for the policy's Kubernetes host capabilities: a kubeconfig file, or "in-cluster" `+
		`(default: in-cluster when the Pod has a service account token mounted, none otherwise)`)
	fs.StringVar(&f.cache, "cache", "", "how the host caches the kinds the policy reads, as a JSON list of {apiVersion, kind, watch (cluster or namespace), fields, labelIndex}; "+
		"each entry replaces the module's own declaration of its kind (metadata annotation "+kubecap.CacheAnnotation+")")
	fs.StringSliceVar(&f.syncBeforeReady, "sync-before-ready", nil, "kinds (apiVersion/Kind, as v1/Pod) to watch over all namespaces from the start; /readyz answers 200 only once their caches have synced")
	fs.StringVar(&f.contextDir, "context-dir", "", "answer the policy's Kubernetes host capabilities from this directory of objects instead of an API server (for local use and tests)")
	fs.StringVar(&f.validateOverlay, "validate-overlay", "", "settings keys, as a JSON object, set over the settings for /validate, the validating webhook "+
		`(for this policy's validating twin: '{"validateOnly":true}'); without it /validate uses the settings as they are`)
	fs.DurationVar(&f.settingsReload, "settings-reload-interval", settings.DefaultInterval, "how often the settings file is checked for changes")
	fs.DurationVar(&f.certReload, "cert-reload-interval", certwatch.DefaultInterval, "how often the certificate, key and client CA files are checked for changes")
	fs.IntVar(&f.instances, "instances", runtime.GOMAXPROCS(0), "policy instances, and so concurrent evaluations; the default is the number of CPUs")
	fs.DurationVar(&f.timeout, "timeout", engine.DefaultTimeout, "deadline of one evaluation, waiting for an instance included; the API server's ?timeout= can only shorten it")
	fs.Uint32Var(&f.memoryLimitMiB, "memory-limit", defaultMemoryLimitMiB, "memory limit of each policy instance, in MiB")
	fs.Int64Var(&f.maxRequestBytes, "max-request-bytes", webhook.DefaultMaxRequestBytes, "largest accepted request body, in bytes")
	fs.IntVar(&f.maxDepth, "max-json-depth", webhook.DefaultMaxDepth, "deepest nesting of arrays and objects accepted in a request")
	fs.Int64Var(&f.maxBodyInFlight, "max-body-bytes-in-flight", webhook.DefaultMaxBodyBytesInFlight, "memory all request bodies being read or evaluated may take at once, in bytes, large ones at most half of it; past it, reviews are refused with code 429")
	fs.Int64Var(&f.largeRequest, "large-request-bytes", webhook.DefaultLargeRequestBytes, "body size from which a request is large: large requests are evaluated at most --max-concurrent-large at once")
	fs.IntVar(&f.maxLarge, "max-concurrent-large", 0, "large requests evaluated at once; the others wait within their deadline (default half of --instances, at least 1)")
	fs.IntVar(&f.maxConnsClient, "max-conns-per-client", webhook.DefaultMaxConnsPerClient, "connections one source address may hold on each port; past it, new ones are closed at once (-1: no limit)")
	fs.IntVar(&f.maxConns, "max-conns", webhook.DefaultMaxConns, "connections all clients together may hold on each port (on the webhook port: trusted ones, and those that sent a request); past it an idle one is closed to make room, or with none idle the new one (-1: no limit)")
	fs.IntVar(&f.reservedConns, "reserved-conns", webhook.DefaultReservedConns, "of --max-conns, the connections only trusted clients may hold (from --trusted-source-cidrs, "+
		"or with a client certificate --client-ca-file verified); in force only with one of them (-1: none)")
	fs.IntVar(&f.maxPending, "max-pending-conns", webhook.DefaultMaxPendingConns, "untrusted connections that have not finished their TLS handshake or not sent a request yet; "+
		"past it a newcomer from the source address holding the most is closed at once, one from a lighter source takes the place of that source's oldest (-1: no limit)")
	fs.StringSliceVar(&f.trustedCIDRs, "trusted-source-cidrs", nil, "source address ranges of the API servers (as 10.0.0.0/24,fd00::/64): their connections are trusted, "+
		"exempt from --max-conns-per-client and may take the --reserved-conns")
	fs.IntVar(&f.maxReqsClient, "max-requests-per-client", webhook.DefaultMaxRequestsPerClient, "requests one source address may have in flight, HTTP/2 streams on all its connections included; past it, 429 (-1: no limit)")
	fs.IntVar(&f.maxStreams, "max-concurrent-streams", webhook.DefaultMaxConcurrentStreams, "requests in flight on one HTTP/2 connection")
	fs.DurationVar(&f.headerTimeout, "read-header-timeout", webhook.DefaultReadHeaderTimeout, "time a client has to send a request's headers, counted from its first byte (from the connection's start for the first request)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", webhook.DefaultIdleTimeout, "how long a connection with no request in flight stays open")
	fs.DurationVar(&f.shutdownDelay, "shutdown-delay", 0, "on SIGTERM, how long to keep serving with /readyz at 503 (each HTTP/1 response closing its connection) before closing the listener")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", webhook.DefaultShutdownTimeout, "on SIGTERM, how long in-flight requests may take to finish")
	fs.BoolVar(&f.pprof, "pprof", false, "serve /debug/pprof/ on the metrics address")
	fs.BoolVar(&f.monitor, "monitor", false, "monitor mode: admit what the policy refuses (unchanged, with a warning, a log line and "+
		"yunikorn_userinfo_monitor_would_refuse_total), to watch before enforcing")
	fs.StringSliceVar(&f.watchReg, "watch-registration", nil, "webhook configurations this webhook answers for, as mutating/NAME or validating/NAME: "+
		"read every --registration-interval (get, by name) to export the failurePolicy of each of their webhooks as "+
		"yunikorn_userinfo_registration_failure_policy (needs an API server, as --kubeconfig)")
	fs.DurationVar(&f.regInterval, "registration-interval", registration.DefaultInterval, "how often --watch-registration reads the webhook configurations")
	cmd.MarkFlagsMutuallyExclusive("settings-path", "settings-json")
	cmd.MarkFlagsMutuallyExclusive("self-signed", "cert-file")
	cmd.MarkFlagsMutuallyExclusive("self-signed", "key-file")
	return cmd
}

// applyEnv sets every flag not given on the command line from its
// environment variable, if set.
func applyEnv(cmd *cobra.Command) error {
	var errs []error
	visit := func(fl *pflag.Flag) {
		if fl.Changed || fl.Name == "help" {
			return
		}
		name := envPrefix + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if err := cmd.Flags().Set(fl.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("invalid %s: %w", name, err))
			}
		}
	}
	cmd.Flags().VisitAll(visit)
	return errors.Join(errs...)
}

func (f *serveFlags) check() error {
	switch {
	case f.selfSigned:
	case f.certFile == "" && f.keyFile == "":
		return errors.New("missing --cert-file and --key-file: serve needs a certificate (or --self-signed for a local try-out)")
	case f.certFile == "":
		return errors.New("missing --cert-file: --key-file needs its certificate")
	case f.keyFile == "":
		return errors.New("missing --key-file: --cert-file needs its key")
	}
	if f.instances <= 0 {
		return fmt.Errorf("invalid --instances %d: must be at least 1", f.instances)
	}
	if f.timeout <= 0 {
		return fmt.Errorf("invalid --timeout %s: must be positive", f.timeout)
	}
	if f.memoryLimitMiB == 0 || f.memoryLimitMiB > maxMemoryLimitMiB {
		return fmt.Errorf("invalid --memory-limit %d: must be between 1 and %d MiB", f.memoryLimitMiB, maxMemoryLimitMiB)
	}
	if f.maxRequestBytes <= 0 {
		return fmt.Errorf("invalid --max-request-bytes %d: must be positive", f.maxRequestBytes)
	}
	if f.maxDepth <= 0 {
		return fmt.Errorf("invalid --max-json-depth %d: must be positive", f.maxDepth)
	}
	if f.maxBodyInFlight < f.maxRequestBytes {
		return fmt.Errorf("invalid --max-body-bytes-in-flight %d: must be at least --max-request-bytes (%d)", f.maxBodyInFlight, f.maxRequestBytes)
	}
	if f.largeRequest <= 0 || f.maxLarge < 0 || f.maxStreams <= 0 {
		return errors.New("invalid limit: --large-request-bytes and --max-concurrent-streams must be positive, --max-concurrent-large must not be negative")
	}
	for name, v := range map[string]int{"--max-conns-per-client": f.maxConnsClient, "--max-conns": f.maxConns, "--max-requests-per-client": f.maxReqsClient,
		"--reserved-conns": f.reservedConns, "--max-pending-conns": f.maxPending} {
		if v == 0 || v < -1 {
			return fmt.Errorf("invalid %s %d: must be positive, or -1 for no limit", name, v)
		}
	}
	f.trustedSources = f.trustedSources[:0]
	for i, cidr := range f.trustedCIDRs {
		p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
		if err != nil {
			return fmt.Errorf("invalid --trusted-source-cidrs[%d] %q: %w", i, cidr, err)
		}
		if p.Bits() == 0 {
			return fmt.Errorf("invalid --trusted-source-cidrs[%d] %q: trusts every address, leaving nothing reserved", i, cidr)
		}
		f.trustedSources = append(f.trustedSources, p.Masked())
	}
	if (len(f.trustedSources) > 0 || f.clientCAFile != "") && f.maxConns > 0 && f.reservedConns >= f.maxConns {
		return fmt.Errorf("invalid --reserved-conns %d: must be less than --max-conns (%d)", f.reservedConns, f.maxConns)
	}
	if f.headerTimeout <= 0 || f.idleTimeout <= 0 {
		return errors.New("invalid timeout: --read-header-timeout and --idle-timeout must be positive")
	}
	if f.settingsReload <= 0 || f.certReload <= 0 {
		return errors.New("invalid reload interval: --settings-reload-interval and --cert-reload-interval must be positive")
	}
	if f.regInterval <= 0 {
		return fmt.Errorf("invalid --registration-interval %s: must be positive", f.regInterval)
	}
	if f.shutdownDelay < 0 || f.shutdownTimeout <= 0 {
		return errors.New("invalid shutdown timing: --shutdown-delay must not be negative and --shutdown-timeout must be positive")
	}
	return nil
}

func (a *app) runServe(ctx context.Context, args []string, f *serveFlags) error {
	logger, err := a.logger()
	if err != nil {
		return err
	}
	policyLines := newPolicyLogLines()
	logger = slog.New(policyLogCounter{next: logger.Handler(), lines: policyLines})
	if err := f.check(); err != nil {
		return err
	}
	applyMemoryLimit(logger)
	name, module, err := a.readModule(args)
	if err != nil {
		return err
	}
	initial, err := readSettings(f.settingsPath, f.settingsJSON)
	var unreadable error
	if err != nil {
		// A file that does not decode is a typo like any other: serve
		// waits, not ready, for it to be fixed (webhook.Run). One that
		// cannot be read (a wrong path) is not, and stops it.
		var pathErr *fs.PathError
		if f.settingsPath == "" || errors.As(err, &pathErr) {
			return err
		}
		initial, unreadable = nil, err
	}
	var settingsCM *webhook.SettingsConfigMap
	if f.settingsCM != "" {
		cm, err := webhook.ParseSettingsConfigMap("--settings-configmap", f.settingsCM, filepath.Base(f.settingsPath))
		if err != nil {
			return err
		}
		settingsCM = &cm
	}
	var overlay json.RawMessage
	if f.validateOverlay != "" {
		if overlay, err = settings.JSONObject("--validate-overlay", []byte(f.validateOverlay)); err != nil {
			return err
		}
	}
	if f.selfSigned {
		if f.certFile, f.keyFile, err = writeSelfSigned(f.selfSignedDir); err != nil {
			return err
		}
		logger.InfoContext(ctx, "serving with a self-signed certificate; trust its CA with curl --cacert",
			"ca_file", filepath.Join(f.selfSignedDir, "ca.crt"))
	}
	cache := a.compilationCache(ctx, logger, false)
	kubeconfig := f.kubeconfig
	if kubeconfig == "" && f.contextDir == "" && inClusterCredentials() {
		kubeconfig = "in-cluster"
	}
	capMetrics := kubecap.NewMetrics("yunikorn_userinfo_")
	hostCalls, warm, err := capabilityHostCalls(ctx, logger, module, capabilityOptions{contextDir: f.contextDir, kubeconfig: kubeconfig,
		cache: f.cache, syncBeforeReady: f.syncBeforeReady, observe: capMetrics.Observe, settings: initial})
	if err != nil {
		return err
	}
	collectors := append(capMetrics.Collectors(), policyLines)
	if len(f.watchReg) > 0 {
		w, err := registrationWatcher(logger, kubeconfig, f)
		if err != nil {
			return err
		}
		collectors = append(collectors, w.Collectors()...)
		go w.Run(ctx)
	}
	logger.InfoContext(ctx, "starting", "module", name, "settings", settingsSource(f), "monitor", f.monitor)
	return webhook.Run(ctx, webhook.RunOptions{
		Module:     module,
		ModuleName: name,
		Engine: engine.Options{
			MaxInstances:     f.instances,
			Timeout:          f.timeout,
			MemoryLimitPages: f.memoryLimitMiB * pagesPerMiB,
			CompilationCache: cache,
			HostCalls:        hostCalls,
		},
		Settings:           initial,
		SettingsUnreadable: unreadable,
		SettingsConfigMap:  settingsCM,
		ValidateOverlay:    overlay,
		SettingsPath:       f.settingsPath,
		SettingsInterval:   f.settingsReload,
		CertFile:           f.certFile,
		KeyFile:            f.keyFile,
		ClientCAFile:       f.clientCAFile,
		CertInterval:       f.certReload,
		Handler: webhook.Options{
			MaxRequestBytes:      f.maxRequestBytes,
			MaxDepth:             f.maxDepth,
			MaxBodyBytesInFlight: f.maxBodyInFlight,
			LargeRequestBytes:    f.largeRequest,
			MaxConcurrentLarge:   f.maxLarge,
			MaxRequestsPerClient: f.maxReqsClient,
			Monitor:              f.monitor,
		},
		Server: webhook.ServerOptions{
			Addr:                 f.listen,
			MetricsAddr:          f.metricsListen,
			ShutdownDelay:        f.shutdownDelay,
			ShutdownTimeout:      f.shutdownTimeout,
			MaxConnsPerClient:    f.maxConnsClient,
			MaxConns:             f.maxConns,
			ReservedConns:        f.reservedConns,
			MaxPendingConns:      f.maxPending,
			TrustedSources:       f.trustedSources,
			MaxConcurrentStreams: f.maxStreams,
			ReadHeaderTimeout:    f.headerTimeout,
			IdleTimeout:          f.idleTimeout,
		},
		Collectors:  collectors,
		Pprof:       f.pprof,
		BeforeReady: warm,
		Version:     buildVersion(),
		Logger:      logger,
		OnListen:    a.onListen,
	})
}

// registrationWatcher reads the webhook configurations of
// --watch-registration from the API server of --kubeconfig (or the
// in-cluster one).
func registrationWatcher(logger *slog.Logger, kubeconfig string, f *serveFlags) (*registration.Watcher, error) {
	refs, err := registration.ParseRefs("--watch-registration", f.watchReg)
	if err != nil {
		return nil, err
	}
	if kubeconfig == "" {
		return nil, errors.New("--watch-registration needs an API server (--kubeconfig, or serve in a Pod with a service account token)")
	}
	cfg, err := kubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--watch-registration: API client: %w", err)
	}
	return registration.New(client, refs, f.regInterval, logger.With("component", "registration"), "yunikorn_userinfo_"), nil
}

func settingsSource(f *serveFlags) string {
	switch {
	case f.settingsPath != "":
		return f.settingsPath
	case f.settingsJSON != "":
		return "--settings-json"
	default:
		return "{}"
	}
}

// writeSelfSigned creates a CA and a serving certificate for the loopback
// names in dir, and returns the certificate and key paths.
func writeSelfSigned(dir string) (certFile, keyFile string, err error) {
	ca, err := certwatch.NewCA(binaryName+" local CA", 7*24*time.Hour)
	if err != nil {
		return "", "", fmt.Errorf("create self-signed CA: %w", err)
	}
	certPEM, keyPEM, err := ca.Issue(certwatch.IssueOptions{
		CommonName:  "localhost",
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		Validity:    7 * 24 * time.Hour,
	})
	if err != nil {
		return "", "", fmt.Errorf("create self-signed certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("create self-signed directory: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for path, data := range map[string][]byte{
		filepath.Join(dir, "ca.crt"): ca.CertPEM(),
		certFile:                     certPEM,
		keyFile:                      keyPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return "", "", fmt.Errorf("write self-signed files: %w", err)
		}
	}
	return certFile, keyFile, nil
}
