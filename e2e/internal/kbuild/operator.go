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

// Operator is one Kubernetes operator the suite builds from its Go module,
// through a wrapper module of its own under e2e/operators (each pins other
// Kubernetes libraries than the suite and than each other).
type Operator struct {
	// Name names the binary and its cache directory.
	Name string
	// Module is the operator's module, whose version names the build.
	Module string
	// Main is its main package.
	Main string
	// CRDs is the directory of its CustomResourceDefinitions inside the
	// module; the build copies them next to the binary.
	CRDs string
}

// The operators of the workloads scenarios.
var (
	KubeRay = Operator{Name: "kuberay-operator", Module: "github.com/ray-project/kuberay/ray-operator",
		Main: "github.com/ray-project/kuberay/ray-operator", CRDs: "config/crd/bases"}
	JobSet = Operator{Name: "jobset-controller", Module: "sigs.k8s.io/jobset",
		Main: "sigs.k8s.io/jobset", CRDs: "config/components/crd/bases"}
)

// OperatorResult describes the operator EnsureOperator found or built.
type OperatorResult struct {
	// Path is the binary; CRDDir holds the CRD manifests it serves.
	Path, CRDDir string
	// Version is the operator module's version.
	Version string
	// Cold is true when this call built it; Duration includes the build.
	Cold     bool
	Duration time.Duration
}

// EnsureOperator returns the cached build of op, building it first when
// the cache has none. opts.ModuleDir is op's wrapper module; the cache key
// holds the operator's version, the go version and a hash of the wrapper's
// go.sum.
func EnsureOperator(ctx context.Context, opts Options, op Operator) (OperatorResult, error) {
	start := time.Now()
	if err := opts.setDefaults(); err != nil {
		return OperatorResult{}, err
	}
	sum, err := os.ReadFile(filepath.Join(opts.ModuleDir, "go.sum"))
	if err != nil {
		return OperatorResult{}, fmt.Errorf("read go.sum: %w", err)
	}
	h := sha256.Sum256(sum)
	out, err := goOutput(ctx, opts, "list", "-m", "-f", "{{.Version}} {{.Dir}}", op.Module)
	if err != nil {
		return OperatorResult{}, fmt.Errorf("list the %s version: %w", op.Name, err)
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		// .Dir is empty until the module is downloaded.
		if _, err := goOutput(ctx, opts, "mod", "download", op.Module); err != nil {
			return OperatorResult{}, fmt.Errorf("download %s: %w", op.Module, err)
		}
		if out, err = goOutput(ctx, opts, "list", "-m", "-f", "{{.Version}} {{.Dir}}", op.Module); err != nil {
			return OperatorResult{}, fmt.Errorf("list the %s version: %w", op.Name, err)
		}
		if f = strings.Fields(out); len(f) != 2 {
			return OperatorResult{}, fmt.Errorf("list the %s version: unexpected answer %q", op.Name, out)
		}
	}
	goVersion, err := goOutput(ctx, opts, "env", "GOVERSION")
	if err != nil {
		return OperatorResult{}, fmt.Errorf("read the go version: %w", err)
	}
	name := fmt.Sprintf("%s-%s-%s-%s", op.Name, f[0], strings.TrimSpace(goVersion), hex.EncodeToString(h[:])[:12])
	dir := filepath.Join(opts.CacheRoot, name)
	res := OperatorResult{Path: filepath.Join(dir, op.Name), CRDDir: filepath.Join(dir, "crds"), Version: f[0]}
	if operatorFinished(dir, op.Name) {
		res.Duration = time.Since(start)
		return res, nil
	}
	if err := os.MkdirAll(opts.CacheRoot, 0o755); err != nil {
		return OperatorResult{}, fmt.Errorf("create the cache directory: %w", err)
	}
	unlock, err := lock(ctx, filepath.Join(opts.CacheRoot, name+".lock"), opts.LockTimeout)
	if err != nil {
		return OperatorResult{}, err
	}
	defer unlock()
	if operatorFinished(dir, op.Name) {
		res.Duration = time.Since(start)
		return res, nil
	}
	tmp, err := os.MkdirTemp(opts.CacheRoot, name+".tmp-")
	if err != nil {
		return OperatorResult{}, fmt.Errorf("create the build directory: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	began := time.Now()
	opts.Log.Info("go build", "binary", op.Name, "version", f[0])
	if err := runGo(ctx, opts, "build", "-mod=readonly", "-buildvcs=false", "-trimpath", "-ldflags", "-s -w",
		"-o", filepath.Join(tmp, op.Name), op.Main); err != nil {
		return OperatorResult{}, fmt.Errorf("build %s: %w", op.Name, err)
	}
	if err := copyYAML(filepath.Join(f[1], op.CRDs), filepath.Join(tmp, "crds")); err != nil {
		return OperatorResult{}, fmt.Errorf("copy the %s CRDs: %w", op.Name, err)
	}
	st := map[string]any{"key": name, "module": op.Module, "version": f[0], "builtAt": time.Now().UTC(),
		"seconds": time.Since(began).Round(time.Second).Seconds()}
	if err := publish(tmp, dir, st); err != nil {
		return OperatorResult{}, err
	}
	opts.Log.Info("built", "binary", op.Name, "took", time.Since(began).Round(time.Second))
	res.Cold = true
	res.Duration = time.Since(start)
	return res, nil
}

// copyYAML copies the .yaml files of src (not its subdirectories) to dst.
func copyYAML(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") || e.Name() == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no CRDs in %s", src)
	}
	return nil
}

// operatorFinished reports whether dir holds a finished build of name.
func operatorFinished(dir, name string) bool {
	for _, f := range []string{stampFile, name, "crds"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}
