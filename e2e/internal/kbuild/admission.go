package kbuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// AdmissionController is the name of YuniKorn's admission controller
// binary (k8shim's pkg/cmd/admissioncontroller) inside its cache directory.
const AdmissionController = "yunikorn-admission-controller"

// admissionMain is the admission controller's main package.
const admissionMain = k8shimModule + "/pkg/cmd/admissioncontroller"

// AdmissionControllerResult describes the admission controller
// EnsureAdmissionController found or built.
type AdmissionControllerResult struct {
	// Path is the binary.
	Path string
	// K8shimVersion is the k8shim version built.
	K8shimVersion string
	// Cold is true when this call built it.
	Cold bool
	// Duration is the time EnsureAdmissionController took, including any
	// build.
	Duration time.Duration
}

// EnsureAdmissionController returns the cached YuniKorn admission
// controller, building it first when the cache has none. It is built from
// the same wrapper module as the scheduler (opts.ModuleDir, e2e/yunikorn),
// so it is the k8shim version the scheduler is, with the same pinned
// dependencies; the cache key is that version, the Go version and the
// wrapper's go.sum hash. Unlike the scheduler it is built unmodified: it
// listens on every interface of its network namespace (":9089"), and the
// suite gives it a namespace of its own (cluster.StartAdmissionController).
// A cold build reuses the scheduler's compiled dependencies from Go's build
// cache and costs about a minute of two cores.
func EnsureAdmissionController(ctx context.Context, opts Options) (AdmissionControllerResult, error) {
	start := time.Now()
	if err := opts.setDefaults(); err != nil {
		return AdmissionControllerResult{}, err
	}
	opts.Env = append(opts.Env, "GONOSUMDB="+noSumDB)
	sum, err := os.ReadFile(filepath.Join(opts.ModuleDir, "go.sum"))
	if err != nil {
		return AdmissionControllerResult{}, fmt.Errorf("read go.sum: %w", err)
	}
	h := sha256.Sum256(sum)
	out, err := goOutput(ctx, opts, "list", "-m", "-f", "{{.Version}}", k8shimModule)
	if err != nil {
		return AdmissionControllerResult{}, fmt.Errorf("list the k8shim version: %w", err)
	}
	goVersion, err := goOutput(ctx, opts, "env", "GOVERSION")
	if err != nil {
		return AdmissionControllerResult{}, fmt.Errorf("read the go version: %w", err)
	}
	res := AdmissionControllerResult{K8shimVersion: strings.TrimSpace(out)}
	if res.K8shimVersion == "" || strings.ContainsAny(res.K8shimVersion, " \n/") {
		return AdmissionControllerResult{}, fmt.Errorf("list the k8shim version: unexpected answer %q", out)
	}
	name := fmt.Sprintf("yunikorn-admission-%s-%s-%s", res.K8shimVersion, strings.TrimSpace(goVersion), hex.EncodeToString(h[:])[:12])
	dir := filepath.Join(opts.CacheRoot, name)
	res.Path = filepath.Join(dir, AdmissionController)
	done := func() bool {
		_, errStamp := os.Stat(filepath.Join(dir, stampFile))
		_, errBin := os.Stat(res.Path)
		return errStamp == nil && errBin == nil
	}
	cold, err := lockedBuild(ctx, opts, name, done, func() error {
		opts.Log.Info("building YuniKorn's admission controller (cold)", "dir", dir)
		return buildAdmissionController(ctx, opts, name, dir)
	})
	if err != nil {
		return AdmissionControllerResult{}, err
	}
	res.Cold = cold
	res.Duration = time.Since(start)
	return res, nil
}

// buildAdmissionController builds the admission controller into a
// temporary directory next to final and publishes it there. The flags are
// the scheduler's (-trimpath, cgo off), so the packages both share are
// compiled once.
func buildAdmissionController(ctx context.Context, opts Options, name, final string) error {
	tmp, err := os.MkdirTemp(opts.CacheRoot, name+".tmp-")
	if err != nil {
		return fmt.Errorf("create the build directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	began := time.Now()
	opts.Log.Info("go build", "binary", AdmissionController)
	if err := runGo(ctx, opts, "build", "-mod=readonly", "-buildvcs=false", "-trimpath",
		"-ldflags", "-s -w", "-o", filepath.Join(tmp, AdmissionController), admissionMain); err != nil {
		return fmt.Errorf("build %s: %w", AdmissionController, err)
	}
	st := map[string]any{"key": name, "builtAt": time.Now().UTC(), "seconds": time.Since(began).Round(time.Second).Seconds(),
		"package": admissionMain, "patch": "none"}
	if err := publish(tmp, final, st); err != nil {
		return err
	}
	opts.Log.Info("built", "binary", AdmissionController, "took", time.Since(began).Round(time.Second))
	return nil
}
