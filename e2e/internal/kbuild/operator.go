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
	// Patch, when set, changes a copy of the module's source before the
	// build (the build then replaces the module with the copy), and
	// PatchVersion names the patch in the cache key.
	Patch        func(srcDir string) error
	PatchVersion string
}

// The operators of the workloads scenarios.
var (
	KubeRay = Operator{Name: "kuberay-operator", Module: "github.com/ray-project/kuberay/ray-operator",
		Main: "github.com/ray-project/kuberay/ray-operator", CRDs: "config/crd/bases"}
	JobSet = Operator{Name: "jobset-controller", Module: "sigs.k8s.io/jobset",
		Main: "sigs.k8s.io/jobset", CRDs: "config/components/crd/bases"}
	TrainingOperator = Operator{Name: "training-operator", Module: "github.com/kubeflow/training-operator",
		Main: "github.com/kubeflow/training-operator/cmd/training-operator.v1", CRDs: "manifests/base/crds",
		Patch: patchTrainingOperator, PatchVersion: "loopback1"}
)

// TrainingWebhookCertDirEnv is where the patched training operator reads
// its webhook serving certificate (tls.crt, tls.key).
const TrainingWebhookCertDirEnv = "E2E_WEBHOOK_CERT_DIR"

// patchTrainingOperator makes the training operator runnable outside the
// cluster within the suite's rules: upstream, its webhook server listens on
// every interface, and its controllers wait until a certificate rotator has
// filled a Secret that, out of the cluster, nothing mounts. The patch binds
// the server to 127.0.0.1 with a certificate from $E2E_WEBHOOK_CERT_DIR and
// marks the certificates ready at once. Nothing else changes.
func patchTrainingOperator(src string) error {
	main := filepath.Join(src, "cmd", "training-operator.v1", "main.go")
	b, err := os.ReadFile(main)
	if err != nil {
		return err
	}
	text := string(b)
	for _, r := range [][2]string{
		{"webhook.NewServer(webhook.Options{\n\t\t\tPort: webhookServerPort,\n\t\t})", "webhook.NewServer(e2eWebhookOptions(webhookServerPort))"},
		{"\tdefer close(certsReady)\n", ""},
		{"cert.ManageCerts(mgr, certGenerationConfig, certsReady)", "e2eManageCerts(mgr, certGenerationConfig, certsReady)"},
	} {
		if strings.Count(text, r[0]) != 1 {
			return fmt.Errorf("patch %s: %q is not there exactly once", main, r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	if err := os.WriteFile(main, []byte(text), 0o644); err != nil {
		return err
	}
	added := `package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kubeflow/training-operator/pkg/cert"
)

// Added by the yunikorn-userinfo end-to-end build (e2e/internal/kbuild):
// the webhook server on loopback, with the certificate in $` + TrainingWebhookCertDirEnv + `,
// and no certificate rotation, which needs the cluster to mount a Secret.
func e2eWebhookOptions(port int) webhook.Options {
	return webhook.Options{Host: "127.0.0.1", Port: port, CertDir: os.Getenv("` + TrainingWebhookCertDirEnv + `")}
}

func e2eManageCerts(_ ctrl.Manager, _ cert.Config, ready chan struct{}) error {
	close(ready)
	return nil
}
`
	return os.WriteFile(filepath.Join(filepath.Dir(main), "e2e_patch.go"), []byte(added), 0o644)
}

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
	if op.Patch != nil {
		name += "-" + op.PatchVersion
	}
	dir := filepath.Join(opts.CacheRoot, name)
	res := OperatorResult{Path: filepath.Join(dir, op.Name), CRDDir: filepath.Join(dir, "crds"), Version: f[0]}
	done := func() bool { return operatorFinished(dir, op.Name) }
	cold, err := lockedBuild(ctx, opts, name, done, func() error { return buildOperator(ctx, opts, op, f[0], f[1], name, dir) })
	if err != nil {
		return OperatorResult{}, err
	}
	res.Cold = cold
	res.Duration = time.Since(start)
	return res, nil
}

// buildOperator builds op (version, from the module in modDir) and copies
// its CRDs into a temporary directory that it publishes as dir.
func buildOperator(ctx context.Context, opts Options, op Operator, version, modDir, name, dir string) error {
	tmp, err := os.MkdirTemp(opts.CacheRoot, name+".tmp-")
	if err != nil {
		return fmt.Errorf("create the build directory: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	began := time.Now()
	args := []string{"build", "-mod=readonly", "-buildvcs=false", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(tmp, op.Name)}
	if op.Patch != nil {
		modfile, err := patchedModule(opts, op, modDir, tmp)
		if err != nil {
			return err
		}
		args = append(args, "-modfile", modfile)
	}
	opts.Log.Info("go build", "binary", op.Name, "version", version)
	if err := runGo(ctx, opts, append(args, op.Main)...); err != nil {
		return fmt.Errorf("build %s: %w", op.Name, err)
	}
	for _, leftover := range []string{"src", "go.mod", "go.sum"} {
		if err := os.RemoveAll(filepath.Join(tmp, leftover)); err != nil {
			return fmt.Errorf("remove the patched source: %w", err)
		}
	}
	if err := copyYAML(filepath.Join(modDir, op.CRDs), filepath.Join(tmp, "crds")); err != nil {
		return fmt.Errorf("copy the %s CRDs: %w", op.Name, err)
	}
	st := map[string]any{"key": name, "module": op.Module, "version": version, "builtAt": time.Now().UTC(),
		"seconds": time.Since(began).Round(time.Second).Seconds()}
	if err := publish(tmp, dir, st); err != nil {
		return err
	}
	opts.Log.Info("built", "binary", op.Name, "took", time.Since(began).Round(time.Second))
	return nil
}

// patchedModule copies op's module into tmp/src, patches it, and writes a
// go.mod (the wrapper's, replacing the module with the copy) and go.sum
// into tmp; it returns the go.mod's path.
func patchedModule(opts Options, op Operator, modDir, tmp string) (string, error) {
	src := filepath.Join(tmp, "src")
	if err := os.CopyFS(src, os.DirFS(modDir)); err != nil {
		return "", fmt.Errorf("copy %s: %w", op.Module, err)
	}
	// The module cache is read-only: the copy must be writable to patch.
	if err := makeWritable(src); err != nil {
		return "", fmt.Errorf("make the copy of %s writable: %w", op.Module, err)
	}
	if err := op.Patch(src); err != nil {
		return "", fmt.Errorf("patch %s: %w", op.Module, err)
	}
	mod, err := os.ReadFile(filepath.Join(opts.ModuleDir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("read go.mod: %w", err)
	}
	mod = append(mod, fmt.Sprintf("\nreplace %s => %s\n", op.Module, src)...)
	modfile := filepath.Join(tmp, "go.mod")
	if err := os.WriteFile(modfile, mod, 0o644); err != nil {
		return "", fmt.Errorf("write the build go.mod: %w", err)
	}
	sum, err := os.ReadFile(filepath.Join(opts.ModuleDir, "go.sum"))
	if err != nil {
		return "", fmt.Errorf("read go.sum: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.sum"), sum, 0o644); err != nil {
		return "", fmt.Errorf("write the build go.sum: %w", err)
	}
	return modfile, nil
}

// lockedBuild runs build holding the cache lock of name, unless done says
// the build is there already (before or after waiting for the lock, which
// another run may hold while it builds the same key). cold is true when
// build ran.
func lockedBuild(ctx context.Context, opts Options, name string, done func() bool, build func() error) (cold bool, err error) {
	if done() {
		return false, nil
	}
	if err := os.MkdirAll(opts.CacheRoot, 0o755); err != nil {
		return false, fmt.Errorf("create the cache directory: %w", err)
	}
	unlock, err := lock(ctx, filepath.Join(opts.CacheRoot, name+".lock"), opts.LockTimeout)
	if err != nil {
		return false, err
	}
	defer unlock()
	if done() {
		return false, nil
	}
	return true, build()
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
