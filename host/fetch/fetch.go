// Package fetch gets Kubewarden policy modules from where kwctl and
// policy-server get them (local files, HTTPS servers and OCI registries)
// and pushes a module to a registry as the artifact `kwctl push` writes.
//
// Registry traffic goes through oras-go; sources files (insecure hosts and
// private certificate authorities) and the protocol fallbacks follow
// Kubewarden's policy fetcher. Every module read from the network is
// checked against the digest its manifest declares before it is used, and
// kept in a local store (by default under the user's cache directory).
package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// Options configure a Fetcher. The zero value is usable.
type Options struct {
	// StoreDir is where fetched modules are kept. Default: the
	// yunikorn-userinfo/store directory under os.UserCacheDir.
	StoreDir string
	// Sources lists insecure hosts and private authorities. Default: none.
	Sources *Sources
	// DockerConfigDir is the directory of the config.json that holds
	// registry credentials, as docker login writes it. Default: $DOCKER_CONFIG,
	// else ~/.docker. A missing file means anonymous access.
	DockerConfigDir string
	// Credential, if set, replaces the docker configuration (tests).
	Credential auth.CredentialFunc
	// Timeout bounds one fetch or push. Default: 2 minutes.
	Timeout time.Duration
	// MaxModuleBytes bounds the module a fetch accepts. Default: 64 MiB.
	MaxModuleBytes int64
	// Logger receives each fetch and protocol fallback. Default: discard.
	Logger *slog.Logger
	// Verification, if set, is what registry modules must be signed with;
	// modules from anywhere else are then refused. Default: no checks.
	Verification *Verification
}

// Defaults of Options.
const (
	DefaultTimeout        = 2 * time.Minute
	DefaultMaxModuleBytes = 64 << 20
)

// Fetcher fetches and pushes modules.
type Fetcher struct {
	opts Options
	cred auth.CredentialFunc
}

// New returns a Fetcher. It reads the docker configuration once, now.
func New(opts Options) (*Fetcher, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxModuleBytes <= 0 {
		opts.MaxModuleBytes = DefaultMaxModuleBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StoreDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("locate the module store: %w (set a store directory)", err)
		}
		opts.StoreDir = filepath.Join(dir, "yunikorn-userinfo", "store")
	}
	f := &Fetcher{opts: opts, cred: opts.Credential}
	if f.cred == nil {
		cred, err := dockerCredentials(opts.DockerConfigDir)
		if err != nil {
			return nil, err
		}
		f.cred = cred
	}
	return f, nil
}

func dockerCredentials(dir string) (auth.CredentialFunc, error) {
	var (
		store credentials.Store
		err   error
	)
	if dir != "" {
		store, err = credentials.NewStore(filepath.Join(dir, "config.json"), credentials.StoreOptions{})
	} else {
		store, err = credentials.NewStoreFromDocker(credentials.StoreOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("read registry credentials: %w", err)
	}
	return credentials.Credential(store), nil
}

// Module is a fetched module.
type Module struct {
	// Location is where it came from.
	Location Location
	// Wasm is the module.
	Wasm []byte
	// Digest is the sha256 digest of Wasm (for a registry module, the digest
	// of the layer its manifest names, checked).
	Digest digest.Digest
	// Manifest is the digest of the registry manifest, empty otherwise.
	Manifest digest.Digest
	// Path is the file the module was read from or stored in.
	Path string
}

// Fetch reads the module at raw (see ParseLocation).
func (f *Fetcher) Fetch(ctx context.Context, raw string) (*Module, error) {
	loc, err := ParseLocation(raw)
	if err != nil {
		return nil, err
	}
	if f.opts.Verification != nil && loc.Scheme != SchemeRegistry {
		return nil, fmt.Errorf("fetch %s: signature verification is configured, and only registry:// modules carry signatures", raw)
	}
	if loc.Scheme == SchemeFile {
		wasm, err := os.ReadFile(loc.Path)
		if err != nil {
			return nil, fmt.Errorf("read module: %w", err)
		}
		return &Module{Location: loc, Wasm: wasm, Digest: digest.FromBytes(wasm), Path: loc.Path}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	var m *Module
	switch loc.Scheme {
	case SchemeRegistry:
		m, err = f.pullPolicy(ctx, loc)
	case SchemeHTTPS:
		m, err = f.download(ctx, loc)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", raw, err)
	}
	if m.Path, err = f.store(loc, m.Wasm); err != nil {
		return nil, fmt.Errorf("fetch %s: %w", raw, err)
	}
	f.opts.Logger.InfoContext(ctx, "module fetched", "module", raw, "digest", m.Digest.String(),
		"manifest", m.Manifest.String(), "stored", m.Path)
	return m, nil
}

// storePath is where a remote module is kept: the layout of kwctl's store,
// STORE/SCHEME/HOST[:PORT]/PATH, with the tag or digest in the file name.
func (f *Fetcher) storePath(loc Location) (string, error) {
	var rel string
	switch loc.Scheme {
	case SchemeRegistry:
		rel = filepath.Join("registry", loc.Ref.Registry, refName(loc.Ref))
	case SchemeHTTPS:
		rel = filepath.Join("https", loc.URL.Host, filepath.FromSlash(path.Clean("/"+loc.URL.Path)))
	default:
		return "", fmt.Errorf("no store path for %s", loc.Raw)
	}
	clean := filepath.Clean(rel)
	if !filepath.IsLocal(clean) {
		return "", fmt.Errorf("store path of %q leaves the store", loc.Raw)
	}
	return filepath.Join(f.opts.StoreDir, clean), nil
}

func (f *Fetcher) store(loc Location, wasm []byte) (string, error) {
	dest, err := f.storePath(loc)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", fmt.Errorf("store module: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".fetch-*")
	if err != nil {
		return "", fmt.Errorf("store module: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(wasm); err != nil {
		tmp.Close()
		return "", fmt.Errorf("store module: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("store module: %w", err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return "", fmt.Errorf("store module: %w", err)
	}
	return dest, nil
}

// protocol is one way of reaching a host.
type protocol struct {
	name      string
	client    *http.Client
	plainHTTP bool
}

// protocols are the ways host is tried, in order: HTTPS verified against
// the system's authorities and the host's own; then, for an insecure
// source only, HTTPS unverified and plain HTTP.
func (f *Fetcher) protocols(host string) []protocol {
	verified := &tls.Config{MinVersion: tls.VersionTLS12}
	if extra := f.opts.Sources.authority(host); len(extra) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		for _, c := range extra {
			pool.AddCert(c)
		}
		verified.RootCAs = pool
	}
	ps := []protocol{{name: "https", client: httpClient(verified)}}
	if f.opts.Sources.IsInsecure(host) {
		ps = append(ps,
			protocol{name: "https without certificate verification", client: httpClient(&tls.Config{InsecureSkipVerify: true})}, //nolint:gosec // insecure_sources asks for it
			protocol{name: "http", client: httpClient(nil), plainHTTP: true},
		)
	}
	return ps
}

func httpClient(cfg *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	tr.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = 15 * time.Second
	tr.ResponseHeaderTimeout = 60 * time.Second
	return &http.Client{Transport: tr}
}

// permanent marks an error that another protocol would not change: the
// server answered, so falling back (perhaps to plain HTTP, with the
// credentials) would only repeat the question less safely.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

func isPermanent(err error) bool {
	var p permanent
	var resp *errcode.ErrorResponse
	return errors.As(err, &p) || errors.As(err, &resp) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// withProtocols runs op over each protocol of host until one works.
func (f *Fetcher) withProtocols(ctx context.Context, host string, op func(protocol) error) error {
	var errs []error
	for _, p := range f.protocols(host) {
		err := op(p)
		if err == nil {
			return nil
		}
		if isPermanent(err) || !f.opts.Sources.IsInsecure(host) {
			return err
		}
		f.opts.Logger.InfoContext(ctx, "registry operation failed, trying the next protocol of an insecure source",
			"host", host, "protocol", p.name, "error", err)
		errs = append(errs, fmt.Errorf("over %s: %w", p.name, err))
	}
	return errors.Join(errs...)
}

// download fetches an https module.
func (f *Fetcher) download(ctx context.Context, loc Location) (*Module, error) {
	var wasm []byte
	err := f.withProtocols(ctx, loc.Host(), func(p protocol) error {
		u := *loc.URL
		if p.plainHTTP {
			u.Scheme = "http"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return permanent{err}
		}
		resp, err := p.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return permanent{fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)}
		}
		if wasm, err = readLimited(resp.Body, f.opts.MaxModuleBytes); err != nil {
			return permanent{fmt.Errorf("GET %s: %w", u.Redacted(), err)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Module{Location: loc, Wasm: wasm, Digest: digest.FromBytes(wasm)}, nil
}

func readLimited(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("module larger than %d bytes", limit)
	}
	return data, nil
}
