// Package kbuild builds the cluster binaries of the end-to-end tests (etcd,
// kube-apiserver, kube-controller-manager) from the e2e module's pinned
// dependencies, once, into a cache outside the repository.
//
// A cold build takes about 8 minutes of two cores, so the result is kept in
// a directory named after everything that determines it: the Kubernetes and
// etcd versions, the Go version and a hash of e2e/go.sum. CI clones the
// repository afresh for every run; the cache lives in the home directory so
// those clones share it. A build is written into a temporary directory and
// renamed into place with a stamp file, so an interrupted build never looks
// finished, and a lock file keeps two runs from building the same key at
// once.
package kbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Names of the built binaries inside Result.Dir.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
)

// Module paths whose versions name the cache directory.
const (
	kubernetesModule = "k8s.io/kubernetes"
	etcdModule       = "go.etcd.io/etcd/server/v3"
)

// stampFile marks a finished build; its content records how it was made.
const stampFile = "stamp.json"

// Options configure Ensure.
type Options struct {
	// ModuleDir is the e2e module (the directory of its go.mod). Required.
	ModuleDir string
	// CacheRoot holds one directory per build key. Default:
	// $YUNIKORN_E2E_CACHE, else $HOME/.cache/yunikorn-userinfo/e2e.
	CacheRoot string
	// Go is the go command. Default: "go".
	Go string
	// Nice is the niceness of the build processes, so a cold build does
	// not starve the rest of a shared machine. Default: 10. Ignored when
	// nice(1) is missing.
	Nice int
	// LockTimeout bounds the wait for another run building the same key.
	// Default: 30 minutes.
	LockTimeout time.Duration
	// Log receives progress. Default: discarded.
	Log *slog.Logger
	// Output receives the go command's own output. Default: discarded.
	Output io.Writer
	// Env is added to the go command's environment. Default: none.
	Env []string
}

func (o *Options) setDefaults() error {
	if o.ModuleDir == "" {
		return errors.New("module directory is required")
	}
	if o.CacheRoot == "" {
		o.CacheRoot = os.Getenv("YUNIKORN_E2E_CACHE")
	}
	if o.CacheRoot == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("find the cache directory: %w", err)
		}
		o.CacheRoot = filepath.Join(home, ".cache", "yunikorn-userinfo", "e2e")
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Nice == 0 {
		o.Nice = 10
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = 30 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Output == nil {
		o.Output = io.Discard
	}
	return nil
}

// Result describes the binaries Ensure found or built.
type Result struct {
	// Dir holds the binaries (Etcd, KubeAPIServer, KubeControllerManager).
	Dir string
	// Key is the name of Dir: the versions and the go.sum hash.
	Key string
	// KubernetesVersion is the version reported by the binaries (gitVersion).
	KubernetesVersion string
	// Cold is true when this call built the binaries.
	Cold bool
	// Duration is the time Ensure took, including any build.
	Duration time.Duration
}

// stamp is the content of stampFile.
type stamp struct {
	Key               string             `json:"key"`
	KubernetesVersion string             `json:"kubernetesVersion"`
	EtcdVersion       string             `json:"etcdVersion"`
	GoVersion         string             `json:"goVersion"`
	GoSumSHA256       string             `json:"goSumSHA256"`
	BuiltAt           time.Time          `json:"builtAt"`
	Seconds           map[string]float64 `json:"seconds"`
}

// Ensure returns the cached binaries for the module's pinned versions,
// building them first when the cache has none.
func Ensure(ctx context.Context, opts Options) (Result, error) {
	start := time.Now()
	if err := opts.setDefaults(); err != nil {
		return Result{}, err
	}
	k, err := computeKey(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	res := Result{Dir: filepath.Join(opts.CacheRoot, k.name), Key: k.name, KubernetesVersion: k.kubernetes}
	if finished(res.Dir) {
		res.Duration = time.Since(start)
		return res, nil
	}
	if err := os.MkdirAll(opts.CacheRoot, 0o755); err != nil {
		return Result{}, fmt.Errorf("create the cache directory: %w", err)
	}
	unlock, err := lock(ctx, filepath.Join(opts.CacheRoot, k.name+".lock"), opts.LockTimeout)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	// Another run may have finished the same build while this one waited.
	if finished(res.Dir) {
		res.Duration = time.Since(start)
		return res, nil
	}
	opts.Log.Info("building the cluster binaries (cold, about 8 minutes on 2 cores)", "dir", res.Dir)
	if err := build(ctx, opts, k, res.Dir); err != nil {
		return Result{}, err
	}
	res.Cold = true
	res.Duration = time.Since(start)
	return res, nil
}

// key is what determines a build.
type key struct {
	name, kubernetes, etcd, goVersion, goSum string
}

func computeKey(ctx context.Context, opts Options) (key, error) {
	sum, err := os.ReadFile(filepath.Join(opts.ModuleDir, "go.sum"))
	if err != nil {
		return key{}, fmt.Errorf("read go.sum: %w", err)
	}
	h := sha256.Sum256(sum)
	out, err := goOutput(ctx, opts, "list", "-m", "-f", "{{.Path}} {{.Version}}", kubernetesModule, etcdModule)
	if err != nil {
		return key{}, fmt.Errorf("list the pinned versions: %w", err)
	}
	versions := map[string]string{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) == 2 {
			versions[f[0]] = f[1]
		}
	}
	goVersion, err := goOutput(ctx, opts, "env", "GOVERSION")
	if err != nil {
		return key{}, fmt.Errorf("read the go version: %w", err)
	}
	k := key{
		kubernetes: versions[kubernetesModule],
		etcd:       versions[etcdModule],
		goVersion:  strings.TrimSpace(goVersion),
		goSum:      hex.EncodeToString(h[:]),
	}
	if k.kubernetes == "" || k.etcd == "" || k.goVersion == "" {
		return key{}, fmt.Errorf("list the pinned versions: incomplete answer %q, go version %q", out, goVersion)
	}
	k.name = fmt.Sprintf("%s-etcd%s-%s-%s", k.kubernetes, strings.TrimPrefix(k.etcd, "v"), k.goVersion, k.goSum[:12])
	return k, nil
}

// finished reports whether dir holds a complete build: the rename that
// publishes a build happens only after the stamp is written.
func finished(dir string) bool {
	for _, name := range []string{stampFile, Etcd, KubeAPIServer, KubeControllerManager} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// build compiles the three binaries into a temporary directory next to
// final and renames it into place.
func build(ctx context.Context, opts Options, k key, final string) error {
	tmp, err := os.MkdirTemp(opts.CacheRoot, k.name+".tmp-")
	if err != nil {
		return fmt.Errorf("create the build directory: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed

	versionFlags, err := versionLDFlags(k.kubernetes)
	if err != nil {
		return err
	}
	targets := []struct{ name, pkg, ldflags string }{
		// etcd/server/v3's main package calls etcdmain.Main.
		{Etcd, etcdModule, "-s -w"},
		{KubeAPIServer, kubernetesModule + "/cmd/kube-apiserver", "-s -w " + versionFlags},
		{KubeControllerManager, kubernetesModule + "/cmd/kube-controller-manager", "-s -w " + versionFlags},
	}
	st := stamp{
		Key: k.name, KubernetesVersion: k.kubernetes, EtcdVersion: k.etcd, GoVersion: k.goVersion,
		GoSumSHA256: k.goSum, Seconds: map[string]float64{},
	}
	for _, t := range targets {
		began := time.Now()
		opts.Log.Info("go build", "binary", t.name)
		args := []string{"build", "-mod=readonly", "-buildvcs=false", "-ldflags", t.ldflags, "-o", filepath.Join(tmp, t.name), t.pkg}
		if err := runGo(ctx, opts, args...); err != nil {
			return fmt.Errorf("build %s: %w", t.name, err)
		}
		took := time.Since(began).Round(time.Second)
		st.Seconds[t.name] = took.Seconds()
		opts.Log.Info("built", "binary", t.name, "took", took)
	}
	st.BuiltAt = time.Now().UTC()
	return publish(tmp, final, st)
}

// publish writes the stamp into the finished build directory tmp and
// renames it to final: a build is visible only once complete.
func publish(tmp, final string, st any) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the stamp: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, stampFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the stamp: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("open up the build directory: %w", err)
	}
	// An incomplete leftover under the final name (a crash between an older
	// layout's steps) would make the rename fail; the caller found it is not
	// a build.
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("remove an incomplete build: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("publish the build: %w", err)
	}
	return nil
}

// versionLDFlags sets what hack/lib/version.sh would, so /version reports
// the real version instead of v0.0.0-master+$Format:%H$.
func versionLDFlags(version string) (string, error) {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return "", fmt.Errorf("parse kubernetes version %q: want vMAJOR.MINOR.PATCH", version)
	}
	var b strings.Builder
	for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
		for _, kv := range [][2]string{
			{"gitVersion", version},
			{"gitMajor", parts[0]},
			{"gitMinor", parts[1]},
			{"gitCommit", strings.Repeat("0", 40)},
			{"gitTreeState", "clean"},
			{"buildDate", "1970-01-01T00:00:00Z"},
		} {
			fmt.Fprintf(&b, " -X %s.%s=%s", pkg, kv[0], kv[1])
		}
	}
	return strings.TrimSpace(b.String()), nil
}

// goCommand prepares a go command in the module, niced when nice(1)
// exists, with cgo off: static binaries that need no C toolchain.
func goCommand(ctx context.Context, opts Options, args ...string) *exec.Cmd {
	name, full := opts.Go, args
	if nice, err := exec.LookPath("nice"); err == nil && opts.Nice > 0 {
		name, full = nice, append([]string{"-n", fmt.Sprint(opts.Nice), opts.Go}, args...)
	}
	cmd := exec.CommandContext(ctx, name, full...)
	cmd.Dir = opts.ModuleDir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), opts.Env...)
	// The go command's children (compile, link) are in its process group:
	// on cancellation the whole group goes. If the test process dies
	// without cancelling, the kernel kills the go command (Pdeathsig).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

func runGo(ctx context.Context, opts Options, args ...string) error {
	cmd := goCommand(ctx, opts, args...)
	var stderr bytes.Buffer
	cmd.Stdout = opts.Output
	cmd.Stderr = io.MultiWriter(opts.Output, &stderr)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return nil
}

func goOutput(ctx context.Context, opts Options, args ...string) (string, error) {
	cmd := goCommand(ctx, opts, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return string(out), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lock takes an exclusive flock on path, polling so the wait honours ctx
// and timeout. The kernel drops the lock if this process dies.
func lock(ctx context.Context, path string, timeout time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the build lock: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("take the build lock: %w", err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("wait for another build of the same binaries (%s): %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}
