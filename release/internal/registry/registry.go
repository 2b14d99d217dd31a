// Package registry builds CNCF distribution's registry from the Go module
// the release module pins, once per version into a cache outside the
// checkout, and runs it on 127.0.0.1 with TLS and basic authentication
// for the tests.
package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Module is the Go module the registry is built from.
const Module = "github.com/distribution/distribution/v3"

// BuildOptions say where and how the registry is built.
type BuildOptions struct {
	// ModuleDir is the release module (its go.mod pins the version).
	ModuleDir string
	// CacheRoot holds built binaries by key. Default: $YUNIKORN_REGISTRY_CACHE,
	// else ~/.cache/yunikorn-userinfo/registry.
	CacheRoot string
	// Output receives the go command's output on a cold build.
	Output io.Writer
}

// Ensure returns the path of the registry binary, building it when the
// cache has none for this version, Go toolchain and go.sum.
func Ensure(ctx context.Context, opts BuildOptions) (path string, cold bool, err error) {
	if opts.CacheRoot == "" {
		opts.CacheRoot = os.Getenv("YUNIKORN_REGISTRY_CACHE")
	}
	if opts.CacheRoot == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false, fmt.Errorf("find the cache directory: %w", err)
		}
		opts.CacheRoot = filepath.Join(home, ".cache", "yunikorn-userinfo", "registry")
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	version, err := goOutput(ctx, opts.ModuleDir, "list", "-m", "-f", "{{.Version}}", Module)
	if err != nil {
		return "", false, fmt.Errorf("registry version: %w", err)
	}
	goVersion, err := goOutput(ctx, opts.ModuleDir, "env", "GOVERSION")
	if err != nil {
		return "", false, fmt.Errorf("go version: %w", err)
	}
	sum, err := os.ReadFile(filepath.Join(opts.ModuleDir, "go.sum"))
	if err != nil {
		return "", false, fmt.Errorf("read go.sum: %w", err)
	}
	h := sha256.Sum256(sum)
	key := fmt.Sprintf("distribution-%s-%s-%s", version, goVersion, hex.EncodeToString(h[:])[:12])
	path = filepath.Join(opts.CacheRoot, key, "registry")
	if _, err := os.Stat(path); err == nil {
		return path, false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", false, fmt.Errorf("create the cache directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(opts.CacheRoot, key+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", false, fmt.Errorf("lock the cache: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", false, fmt.Errorf("lock the cache: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if _, err := os.Stat(path); err == nil {
		return path, false, nil
	}
	tmp := path + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp, Module+"/cmd/registry")
	cmd.Dir = opts.ModuleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = opts.Output, opts.Output
	if err := cmd.Run(); err != nil {
		return "", false, fmt.Errorf("build the registry %s: %w", version, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", false, fmt.Errorf("install the registry: %w", err)
	}
	return path, true, nil
}

func goOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// Options configure a running registry.
type Options struct {
	// Binary is the registry built by Ensure.
	Binary string
	// Dir holds the configuration, the storage and the log.
	Dir string
	// CertPEM and KeyPEM are the serving certificate (for 127.0.0.1).
	CertPEM, KeyPEM []byte
	// CAPEM verifies CertPEM; used to wait for readiness.
	CAPEM []byte
	// Users are the accepted user names and passwords. Without users the
	// registry takes anonymous pushes.
	Users map[string]string
}

// Registry is a running registry.
type Registry struct {
	// Host is 127.0.0.1:PORT.
	Host string
	cmd  *exec.Cmd
	done chan error
	log  string
}

// Start runs the registry and waits until it answers over TLS.
func Start(ctx context.Context, opts Options) (*Registry, error) {
	var lastErr error
	for range 3 { // the free port may be taken between probe and bind
		r, err := start(ctx, opts)
		if err == nil {
			return r, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(ctx context.Context, opts Options) (*Registry, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	host := l.Addr().String()
	l.Close()

	files := map[string][]byte{"tls.crt": opts.CertPEM, "tls.key": opts.KeyPEM}
	var auth string
	if len(opts.Users) > 0 {
		var htpasswd bytes.Buffer
		for user, password := range opts.Users {
			hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
			if err != nil {
				return nil, fmt.Errorf("hash the password of %s: %w", user, err)
			}
			fmt.Fprintf(&htpasswd, "%s:%s\n", user, hash)
		}
		files["htpasswd"] = htpasswd.Bytes()
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: yunikorn-userinfo-tests\n    path: %s\n", filepath.Join(opts.Dir, "htpasswd"))
	}
	files["config.yml"] = []byte(fmt.Sprintf(`version: 0.1
log:
  level: info
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
%s`, filepath.Join(opts.Dir, "data"), host, filepath.Join(opts.Dir, "tls.crt"), filepath.Join(opts.Dir, "tls.key"), auth))
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(opts.Dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	logPath := filepath.Join(opts.Dir, "registry.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create the registry log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(opts.Binary, "serve", filepath.Join(opts.Dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// No tracing exporter: nothing listens for one here.
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the registry: %w", err)
	}
	r := &Registry{Host: host, cmd: cmd, done: make(chan error, 1), log: logPath}
	go func() { r.done <- cmd.Wait() }()
	if err := r.waitReady(ctx, opts.CAPEM); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

func (r *Registry) waitReady(ctx context.Context, caPEM []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		Timeout:   2 * time.Second,
	}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-r.done:
			r.done <- err
			return fmt.Errorf("the registry exited: %v; log:\n%s", err, r.Log())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.Host+"/v2/", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
			return nil
		}
	}
	return fmt.Errorf("the registry on %s was not ready within 30s; log:\n%s", r.Host, r.Log())
}

// Log returns what the registry wrote so far.
func (r *Registry) Log() string {
	b, _ := os.ReadFile(r.log)
	return string(b)
}

// Stop kills the registry's process group and waits for it.
func (r *Registry) Stop() {
	if r.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
	}
}
