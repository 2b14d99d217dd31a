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

// Scheduler is the name of the YuniKorn scheduler binary inside
// SchedulerResult.Dir.
const Scheduler = "yunikorn-scheduler"

// Modules of the YuniKorn build.
const (
	k8shimModule = "github.com/apache/yunikorn-k8shim"
	coreModule   = "github.com/apache/yunikorn-core"
	shimMain     = k8shimModule + "/pkg/cmd/shim"
)

// noSumDB lists the modules of the YuniKorn build that the checksum
// database does not know, and only those.
const noSumDB = "github.com/apache/yunikorn-core,github.com/apache/yunikorn-k8shim," +
	"github.com/apache/yunikorn-scheduler-interface,k8s.io/kubernetes"

// RESTAddrEnv is the environment variable the built scheduler reads its
// REST address from. yunikorn-core listens on ":9080", every interface,
// with no option to change it; the build patches that one line so the
// suite never listens beyond loopback and can pick a free port.
const RESTAddrEnv = "YUNIKORN_REST_ADDR"

// restPatchVersion names the patch in the cache key: change it when the
// patch changes.
const restPatchVersion = "rest1"

// SchedulerResult describes the scheduler EnsureScheduler found or built.
type SchedulerResult struct {
	// Path is the scheduler binary.
	Path string
	// K8shimVersion and CoreVersion are the YuniKorn versions built.
	K8shimVersion, CoreVersion string
	// Cold is true when this call built it.
	Cold bool
	// Duration is the time EnsureScheduler took, including any build.
	Duration time.Duration
}

// EnsureScheduler returns the cached YuniKorn scheduler (k8shim's
// pkg/cmd/shim with the core its module pins), building it first when the
// cache has none. opts.ModuleDir is the wrapper module e2e/yunikorn, whose
// go.mod repeats k8shim's replace directives (which `go install
// pkg@version` refuses). A cold build takes about 5.5 minutes of two cores
// and 1.3 GB of build cache.
func EnsureScheduler(ctx context.Context, opts Options) (SchedulerResult, error) {
	start := time.Now()
	if err := opts.setDefaults(); err != nil {
		return SchedulerResult{}, err
	}
	// The checksum database has no entries for these modules; the wrapper's
	// committed go.sum, verified when it was written, is what checks them.
	opts.Env = append(opts.Env, "GONOSUMDB="+noSumDB)
	sum, err := os.ReadFile(filepath.Join(opts.ModuleDir, "go.sum"))
	if err != nil {
		return SchedulerResult{}, fmt.Errorf("read go.sum: %w", err)
	}
	h := sha256.Sum256(sum)
	out, err := goOutput(ctx, opts, "list", "-m", "-f",
		"{{.Path}} {{with .Replace}}{{.Version}} {{.Dir}}{{else}}{{.Version}} {{.Dir}}{{end}}", k8shimModule, coreModule)
	if err != nil {
		return SchedulerResult{}, fmt.Errorf("list the YuniKorn versions: %w", err)
	}
	versions, dirs := map[string]string{}, map[string]string{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) == 3 {
			versions[f[0]], dirs[f[0]] = f[1], f[2]
		}
	}
	goVersion, err := goOutput(ctx, opts, "env", "GOVERSION")
	if err != nil {
		return SchedulerResult{}, fmt.Errorf("read the go version: %w", err)
	}
	res := SchedulerResult{K8shimVersion: versions[k8shimModule], CoreVersion: versions[coreModule]}
	if res.K8shimVersion == "" || res.CoreVersion == "" || dirs[coreModule] == "" {
		return SchedulerResult{}, fmt.Errorf("list the YuniKorn versions: incomplete answer %q", out)
	}
	name := fmt.Sprintf("yunikorn-%s-core%s-%s-%s-%s", res.K8shimVersion, strings.TrimPrefix(res.CoreVersion, "v"),
		strings.TrimSpace(goVersion), restPatchVersion, hex.EncodeToString(h[:])[:12])
	dir := filepath.Join(opts.CacheRoot, name)
	res.Path = filepath.Join(dir, Scheduler)
	done := func() bool {
		_, errStamp := os.Stat(filepath.Join(dir, stampFile))
		_, errBin := os.Stat(res.Path)
		return errStamp == nil && errBin == nil
	}
	cold, err := lockedBuild(ctx, opts, name, done, func() error {
		opts.Log.Info("building the YuniKorn scheduler (cold, about 5.5 minutes on 2 cores)", "dir", dir)
		return buildScheduler(ctx, opts, dirs[coreModule], name, dir)
	})
	if err != nil {
		return SchedulerResult{}, err
	}
	res.Cold = cold
	res.Duration = time.Since(start)
	return res, nil
}

// buildScheduler copies yunikorn-core from the module cache, patches its
// REST address, and builds the shim against the copy with a temporary
// go.mod that points the core's replace directive at it.
func buildScheduler(ctx context.Context, opts Options, coreDir, name, final string) error {
	tmp, err := os.MkdirTemp(opts.CacheRoot, name+".tmp-")
	if err != nil {
		return fmt.Errorf("create the build directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	began := time.Now()

	core := filepath.Join(tmp, "core")
	if err := os.CopyFS(core, os.DirFS(coreDir)); err != nil {
		return fmt.Errorf("copy yunikorn-core: %w", err)
	}
	if err := patchRESTAddr(core); err != nil {
		return err
	}
	mod, err := os.ReadFile(filepath.Join(opts.ModuleDir, "go.mod"))
	if err != nil {
		return fmt.Errorf("read go.mod: %w", err)
	}
	var patched []string
	replaced := false
	for line := range strings.Lines(string(mod)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == coreModule && f[1] == "=>" {
			line = "\t" + coreModule + " => " + core + "\n"
			replaced = true
		}
		patched = append(patched, line)
	}
	if !replaced {
		return fmt.Errorf("patch go.mod: no replace directive for %s", coreModule)
	}
	modfile := filepath.Join(tmp, "go.mod")
	if err := os.WriteFile(modfile, []byte(strings.Join(patched, "")), 0o644); err != nil {
		return fmt.Errorf("write the build go.mod: %w", err)
	}
	sum, err := os.ReadFile(filepath.Join(opts.ModuleDir, "go.sum"))
	if err != nil {
		return fmt.Errorf("read go.sum: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.sum"), sum, 0o644); err != nil {
		return fmt.Errorf("write the build go.sum: %w", err)
	}
	bin := filepath.Join(tmp, Scheduler)
	opts.Log.Info("go build", "binary", Scheduler)
	if err := runGo(ctx, opts, "build", "-modfile", modfile, "-mod=readonly", "-buildvcs=false", "-trimpath",
		"-ldflags", "-s -w", "-o", bin, shimMain); err != nil {
		return fmt.Errorf("build %s: %w", Scheduler, err)
	}
	if err := os.RemoveAll(core); err != nil {
		return fmt.Errorf("remove the core copy: %w", err)
	}
	for _, f := range []string{modfile, filepath.Join(tmp, "go.sum")} {
		_ = os.Remove(f)
	}
	st := map[string]any{"key": name, "builtAt": time.Now().UTC(), "seconds": time.Since(began).Round(time.Second).Seconds(),
		"patch": "yunikorn-core pkg/webservice: REST address from $" + RESTAddrEnv + ", default 127.0.0.1:9080"}
	if err := publish(tmp, final, st); err != nil {
		return err
	}
	opts.Log.Info("built", "binary", Scheduler, "took", time.Since(began).Round(time.Second))
	return nil
}

// restListen is the line of yunikorn-core's webservice.go the patch
// replaces, and restAddrFile the function it calls instead.
const (
	restListen   = `Addr:              ":9080",`
	restAddrFile = `package webservice

import "os"

// restAddr is where the REST API listens. Added by the yunikorn-userinfo
// end-to-end build: upstream listens on ":9080", every interface.
func restAddr() string {
	if addr := os.Getenv("` + RESTAddrEnv + `"); addr != "" {
		return addr
	}
	return "127.0.0.1:9080"
}
`
)

// patchRESTAddr makes the copied core listen where RESTAddrEnv says.
func patchRESTAddr(core string) error {
	ws := filepath.Join(core, "pkg", "webservice")
	path := filepath.Join(ws, "webservice.go")
	// The module cache is read-only; the copy keeps its modes.
	if err := makeWritable(core); err != nil {
		return fmt.Errorf("make the core copy writable: %w", err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if strings.Count(string(src), restListen) != 1 {
		return fmt.Errorf("patch yunikorn-core: %q not found once in pkg/webservice/webservice.go", restListen)
	}
	out := strings.Replace(string(src), restListen, "Addr:              restAddr(),", 1)
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		return fmt.Errorf("patch yunikorn-core: %w", err)
	}
	if err := os.WriteFile(filepath.Join(ws, "e2e_rest_addr.go"), []byte(restAddrFile), 0o644); err != nil {
		return fmt.Errorf("patch yunikorn-core: %w", err)
	}
	return nil
}

// makeWritable gives a copy of a module from the read-only module cache
// the modes of an ordinary source tree.
func makeWritable(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
}
