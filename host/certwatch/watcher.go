package certwatch

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is how often [Watcher.Run] reads the files. Kubernetes
// itself takes up to a minute (the kubelet sync period plus its cache TTL)
// to update a mounted Secret, so a shorter period gains little.
const DefaultInterval = 10 * time.Second

// What [Options.OnReload] reports as the thing it tried to reload.
const (
	// ReloadCertificate is the serving certificate and key pair.
	ReloadCertificate = "certificate"
	// ReloadClientCA is the client CA bundle.
	ReloadClientCA = "client_ca"
)

// Options configures a [Watcher].
type Options struct {
	// CertFile is the PEM serving certificate, leaf first, optionally
	// followed by intermediates. Required.
	CertFile string

	// KeyFile is the PEM private key of the leaf in CertFile. Required.
	KeyFile string

	// ClientCAFile is a PEM bundle of CA certificates. When set, every
	// client must present a certificate for client authentication issued
	// by one of them. Default: empty, no client certificate is asked for.
	ClientCAFile string

	// Interval is the poll period of [Watcher.Run]. Default:
	// DefaultInterval (10s).
	Interval time.Duration

	// Logger receives successful reloads at Info and failed ones, expired
	// certificates included, at Warn. Default: a logger that discards.
	Logger *slog.Logger

	// OnReload, if set, is called after every reload attempt that saw
	// changed file contents, with what set to ReloadCertificate or
	// ReloadClientCA and err nil on success. It is meant for metrics. It is
	// not called for the initial load in New, and not again for contents
	// that did not change since the last attempt. It is called with no lock
	// held but from the goroutine calling Reload, so it should be quick.
	// Default: nil.
	OnReload func(what string, err error)
}

func (o *Options) setDefaults() {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Watcher holds the current certificate and client CA pool and replaces
// them when the files change. It is safe for concurrent use.
type Watcher struct {
	opts Options

	cert atomic.Pointer[tls.Certificate]
	pool atomic.Pointer[x509.CertPool] // nil when no ClientCAFile

	// mu serializes Reload; the fields below are only used under it.
	mu         sync.Mutex
	certSeen   attempt
	clientSeen attempt
}

// attempt remembers the contents last tried and how that went, so that an
// unchanged bad file is neither re-parsed nor re-logged on every poll.
type attempt struct {
	sum [sha256.Size]byte
	err error
}

// New loads the certificate, key and, if configured, client CA files. The
// error names the file and the problem; an expired or not yet valid
// certificate is only logged at Warn, because refusing to start would not
// bring a renewed certificate any sooner.
func New(opts Options) (*Watcher, error) {
	opts.setDefaults()
	if opts.CertFile == "" || opts.KeyFile == "" {
		return nil, errors.New("new certificate watcher: certificate file and key file are required")
	}
	w := &Watcher{opts: opts}

	sum, cert, err := loadKeyPair(opts.CertFile, opts.KeyFile)
	if err != nil {
		return nil, err
	}
	w.certSeen = attempt{sum: sum}
	w.cert.Store(cert)
	w.warnValidity(cert.Leaf)

	if opts.ClientCAFile != "" {
		sum, pool, _, err := loadClientCAs(opts.ClientCAFile)
		if err != nil {
			return nil, err
		}
		w.clientSeen = attempt{sum: sum}
		w.pool.Store(pool)
	}
	return w, nil
}

// Run calls Reload every Options.Interval until ctx is done. Failures are
// logged by Reload and retried on the next tick.
func (w *Watcher) Run(ctx context.Context) {
	ticker := time.NewTicker(w.opts.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			_ = w.Reload()
		}
	}
}

// Reload reads the files once and installs whatever changed and loads.
// It returns nil when the files on disk are what is being served, and
// otherwise the error that keeps them from being served: the same error
// again, without logging or calling OnReload again, while the contents stay
// unchanged.
func (w *Watcher) Reload() error {
	w.mu.Lock()
	certChanged, certErr := w.reloadCertificate()
	var caChanged bool
	var caErr error
	if w.opts.ClientCAFile != "" {
		caChanged, caErr = w.reloadClientCAs()
	}
	w.mu.Unlock()

	if hook := w.opts.OnReload; hook != nil {
		if certChanged {
			hook(ReloadCertificate, certErr)
		}
		if caChanged {
			hook(ReloadClientCA, caErr)
		}
	}
	return errors.Join(certErr, caErr)
}

// reloadCertificate reports whether the file contents were new to this
// attempt and the error standing against them.
func (w *Watcher) reloadCertificate() (bool, error) {
	sum, cert, err := loadKeyPair(w.opts.CertFile, w.opts.KeyFile)
	if sum == w.certSeen.sum {
		return false, w.certSeen.err
	}
	w.certSeen = attempt{sum: sum, err: err}
	log := w.opts.Logger.With("cert_file", w.opts.CertFile, "key_file", w.opts.KeyFile)
	if err != nil {
		log.Warn("certificate reload failed, keeping the previous certificate", "error", err)
		return true, err
	}
	w.cert.Store(cert)
	log.Info("certificate reloaded",
		"subject", cert.Leaf.Subject.String(),
		"serial", cert.Leaf.SerialNumber.String(),
		"not_after", cert.Leaf.NotAfter)
	w.warnValidity(cert.Leaf)
	return true, nil
}

func (w *Watcher) reloadClientCAs() (bool, error) {
	sum, pool, n, err := loadClientCAs(w.opts.ClientCAFile)
	if sum == w.clientSeen.sum {
		return false, w.clientSeen.err
	}
	w.clientSeen = attempt{sum: sum, err: err}
	log := w.opts.Logger.With("client_ca_file", w.opts.ClientCAFile)
	if err != nil {
		log.Warn("client CA reload failed, keeping the previous client CAs", "error", err)
		return true, err
	}
	w.pool.Store(pool)
	log.Info("client CAs reloaded", "certificates", n)
	return true, nil
}

func (w *Watcher) warnValidity(leaf *x509.Certificate) {
	now := time.Now()
	switch {
	case now.After(leaf.NotAfter):
		w.opts.Logger.Warn("serving certificate has expired",
			"cert_file", w.opts.CertFile, "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter)
	case now.Before(leaf.NotBefore):
		w.opts.Logger.Warn("serving certificate is not valid yet",
			"cert_file", w.opts.CertFile, "serial", leaf.SerialNumber.String(), "not_before", leaf.NotBefore)
	}
}

// Certificate returns the leaf certificate being served, for logs and
// metrics (NotAfter). It must not be modified.
func (w *Watcher) Certificate() *x509.Certificate {
	return w.cert.Load().Leaf
}

// TLSConfig returns a new server configuration with MinVersion TLS 1.2 that
// serves the current certificate through GetCertificate. Do not set
// Certificates on it: crypto/tls prefers Certificates over GetCertificate
// when the client sends no server name, as clients dialing an IP do.
//
// With a ClientCAFile, GetConfigForClient hands each handshake a clone of
// the returned configuration that requires and verifies a client
// certificate against the current CA pool. That clone also disables session
// tickets, so a connection cannot be resumed on the strength of a CA that
// has since been rotated out. Fields the caller sets on the returned
// configuration before serving (NextProtos, CipherSuites, ...) carry over
// into the clones; http.Server adds "h2" only to its own copy, so to offer
// HTTP/2 with a client CA set NextProtos here.
func (w *Watcher) TLSConfig() *tls.Config {
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: w.getCertificate,
	}
	if w.opts.ClientCAFile != "" {
		base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cfg := base.Clone()
			cfg.GetConfigForClient = nil
			cfg.GetCertificate = w.getCertificate
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
			cfg.ClientCAs = w.pool.Load()
			cfg.SessionTicketsDisabled = true
			return cfg, nil
		}
	}
	return base
}

func (w *Watcher) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return w.cert.Load(), nil
}

// loadKeyPair reads and parses the pair. The sum covers both files' bytes,
// or read errors, so that it changes whenever what Reload would see
// changes. The files may be mid-update (certificate written, key not yet):
// that is simply a failed attempt, and the next poll sees new contents.
func loadKeyPair(certFile, keyFile string) ([sha256.Size]byte, *tls.Certificate, error) {
	certPEM, keyPEM := readFile(certFile), readFile(keyFile)
	sum := contentSum(certPEM, keyPEM)
	if certPEM.err != nil {
		return sum, nil, fmt.Errorf("read certificate: %w", certPEM.err)
	}
	if keyPEM.err != nil {
		return sum, nil, fmt.Errorf("read key: %w", keyPEM.err)
	}
	cert, err := parseKeyPair(certFile, certPEM.data, keyFile, keyPEM.data)
	return sum, cert, err
}

func parseKeyPair(certFile string, certPEM []byte, keyFile string, keyPEM []byte) (*tls.Certificate, error) {
	// Check each file on its own first so that the error names the file at
	// fault; tls.X509KeyPair only says "certificate input" or "key input".
	certs, err := parseCertificates(certPEM)
	if err != nil {
		return nil, fmt.Errorf("parse certificate %s: %w", certFile, err)
	}
	if !hasPEMKey(keyPEM) {
		return nil, fmt.Errorf("parse key %s: no PEM private key block", keyFile)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("match key %s with certificate %s: %w", keyFile, certFile, err)
	}
	// X509KeyPair fills Leaf since Go 1.23 unless GODEBUG
	// x509keypairleaf=0; the first certificate parsed above is the same.
	pair.Leaf = certs[0]
	return &pair, nil
}

func loadClientCAs(file string) ([sha256.Size]byte, *x509.CertPool, int, error) {
	content := readFile(file)
	sum := contentSum(content)
	if content.err != nil {
		return sum, nil, 0, fmt.Errorf("read client CA: %w", content.err)
	}
	certs, err := parseCertificates(content.data)
	if err != nil {
		return sum, nil, 0, fmt.Errorf("parse client CA %s: %w", file, err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return sum, pool, len(certs), nil
}

// fileContent is what one read of a file saw: its bytes or the error.
type fileContent struct {
	data []byte
	err  error
}

func readFile(path string) fileContent {
	data, err := os.ReadFile(path)
	return fileContent{data: data, err: err}
}

// contentSum hashes what the reads saw. Each part is length-prefixed so
// that moving bytes from one file to the next changes the sum, and a read
// error hashes as its message so that a file that went missing and came
// back counts as a change.
func contentSum(files ...fileContent) [sha256.Size]byte {
	h := sha256.New()
	for _, f := range files {
		b := f.data
		if f.err != nil {
			b = []byte("error: " + f.err.Error())
		}
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
