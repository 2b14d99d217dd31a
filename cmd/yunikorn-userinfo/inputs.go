package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tetratelabs/wazero"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
	"github.com/yunikorn-userinfo/userinfo/host/webhook"
)

// embeddedName names the embedded module in logs and messages.
const embeddedName = "embedded yunikorn-user-info policy"

// Limits of --memory-limit: a 32-bit wasm memory holds at most 4 GiB.
const (
	defaultMemoryLimitMiB = 64
	maxMemoryLimitMiB     = 4096
	pagesPerMiB           = 16 // 64 KiB wasm pages
)

// evalFlags are the flags of the commands that evaluate a policy (run and
// bench), as kwctl spells them.
type evalFlags struct {
	requestPath    string
	settingsPath   string
	settingsJSON   string
	timeout        time.Duration
	memoryLimitMiB uint32
	contextDir     string
	kubeconfig     string
	// manifest builds the request instead of -r.
	manifest manifestFlags
	// flags tells which flags the command line set.
	flags *pflag.FlagSet
}

func (f *evalFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	f.flags = fs
	fs.StringVarP(&f.requestPath, "request-path", "r", "", "file with the AdmissionRequest or AdmissionReview, - for stdin (or --object)")
	fs.StringVarP(&f.settingsPath, "settings-path", "s", "", "file with the policy settings, YAML or JSON (default {})")
	fs.StringVar(&f.settingsJSON, "settings-json", "", "policy settings as a JSON object (default {})")
	fs.DurationVar(&f.timeout, "timeout", engine.DefaultTimeout, "deadline of one policy invocation")
	fs.Uint32Var(&f.memoryLimitMiB, "memory-limit", defaultMemoryLimitMiB, "memory limit of the policy instance, in MiB")
	fs.StringVar(&f.contextDir, "context-dir", "", "answer the policy's Kubernetes host capabilities (get_resource, list_resources_*, can_i) from the objects in this directory (YAML or JSON; SubjectAccessReviews with a status answer can_i)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", `answer the policy's Kubernetes host capabilities from the API server of this kubeconfig ("in-cluster": the Pod's service account)`)
	f.manifest.register(fs)
	cmd.MarkFlagsMutuallyExclusive("settings-path", "settings-json")
	cmd.MarkFlagsMutuallyExclusive("context-dir", "kubeconfig")
}

func (f *evalFlags) check() error {
	if f.timeout <= 0 {
		return fmt.Errorf("invalid --timeout %s: must be positive", f.timeout)
	}
	if f.memoryLimitMiB == 0 || f.memoryLimitMiB > maxMemoryLimitMiB {
		return fmt.Errorf("invalid --memory-limit %d: must be between 1 and %d MiB", f.memoryLimitMiB, maxMemoryLimitMiB)
	}
	return f.checkSource(f.flags)
}

// evalInputs are the inputs of an evaluation, read and checked before the
// module is compiled so that argument mistakes fail fast.
type evalInputs struct {
	moduleName string
	module     []byte
	settings   json.RawMessage
	request    *admission.Request
}

func (a *app) readEvalInputs(args []string, f *evalFlags) (*evalInputs, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	in := &evalInputs{}
	var err error
	if in.moduleName, in.module, err = a.readModule(args); err != nil {
		return nil, err
	}
	if in.settings, err = readSettings(f.settingsPath, f.settingsJSON); err != nil {
		return nil, err
	}
	if in.request, err = a.readRequest(f); err != nil {
		return nil, err
	}
	return in, nil
}

// readRequest reads the request of -r, or builds it from --object.
func (a *app) readRequest(f *evalFlags) (*admission.Request, error) {
	if f.manifest.objectPath != "" {
		review, err := manifestReview(&f.manifest)
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(review)
		if err != nil {
			return nil, fmt.Errorf("build the request of --object: %w", err)
		}
		req, err := admission.ParseRequest(data)
		if err != nil {
			return nil, fmt.Errorf("build the request of --object %s: %w", f.manifest.objectPath, err)
		}
		return req, nil
	}
	data, err := a.readFileOrStdin(f.requestPath)
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	req, err := admission.ParseRequest(data)
	if err != nil {
		return nil, fmt.Errorf("read request %s: %w", f.requestPath, err)
	}
	return req, nil
}

// readModule reads the MODULE argument: a local path (file:// optional),
// or the embedded policy without one. Modules in a registry or on a web
// server are pulled and verified first with the user's own tools (kwctl
// pull, oras pull, cosign verify), so this binary links no registry client.
func (a *app) readModule(args []string) (string, []byte, error) {
	if len(args) == 0 || args[0] == "" {
		return embeddedName, a.policy, nil
	}
	path := args[0]
	if scheme, rest, ok := strings.Cut(path, "://"); ok {
		switch scheme {
		case "file":
			path = rest
		case "registry", "https", "http":
			return "", nil, fmt.Errorf("module %q: %s:// modules are not fetched here: pull it with "+
				"`kwctl pull %s -o policy.wasm` (-k KEY to verify its signature) and pass policy.wasm", args[0], scheme, args[0])
		default:
			return "", nil, fmt.Errorf("module %q: unsupported scheme %q: want a local path (file:// optional)", args[0], scheme)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("read module: %w", err)
	}
	return path, data, nil
}

func (a *app) readFileOrStdin(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(a.stdin)
	}
	return os.ReadFile(path)
}

// readSettings returns the settings as a JSON object: {} by default, the
// --settings-json value, or the --settings-path file. A file may be JSON
// (passed on byte for byte) or YAML (converted); an empty file means {}.
func readSettings(path, inline string) (json.RawMessage, error) {
	switch {
	case inline != "":
		return settings.JSONObject("--settings-json", []byte(inline))
	case path != "":
		return settings.ReadFile(path)
	default:
		return settings.Empty, nil
	}
}

// evalSession is what run and bench share: the inputs read, the module
// compiled, and the settings accepted by the policy.
type evalSession struct {
	logger *slog.Logger
	in     *evalInputs
	eng    *engine.Engine
}

// openEval prepares an evaluation; the caller closes s.eng.
func (a *app) openEval(ctx context.Context, args []string, f *evalFlags) (*evalSession, error) {
	logger, err := a.logger()
	if err != nil {
		return nil, err
	}
	in, err := a.readEvalInputs(args, f)
	if err != nil {
		return nil, err
	}
	eng, err := a.newEngine(ctx, logger, in, f)
	if err != nil {
		return nil, err
	}
	if err := webhook.CheckSettings(ctx, logger, eng, in.settings); err != nil {
		_ = eng.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return &evalSession{logger: logger, in: in, eng: eng}, nil
}

// newEngine compiles the module for a CLI command: one instance, since the
// CLI evaluates sequentially.
func (a *app) newEngine(ctx context.Context, logger *slog.Logger, in *evalInputs, f *evalFlags) (*engine.Engine, error) {
	hostCalls, _, err := capabilityHostCalls(ctx, logger, in.module, capabilityOptions{contextDir: f.contextDir, kubeconfig: f.kubeconfig,
		settings: in.settings})
	if err != nil {
		return nil, err
	}
	return a.loadModule(ctx, in.moduleName, in.module, engine.Options{
		Logger:           logger,
		MaxInstances:     1,
		Timeout:          f.timeout,
		MemoryLimitPages: f.memoryLimitMiB * pagesPerMiB,
		HostCalls:        hostCalls,
	})
}

// loadModule compiles a module for any command but serve, with the
// compilation cache of --cache-dir or the user's cache directory (or the
// injected one).
func (a *app) loadModule(ctx context.Context, name string, module []byte, opts engine.Options) (*engine.Engine, error) {
	start := time.Now()
	opts.CompilationCache = a.compilationCache(ctx, opts.Logger, true)
	eng, err := engine.New(ctx, module, opts)
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", name, err)
	}
	opts.Logger.DebugContext(ctx, "policy loaded", "module", name, "bytes", len(module),
		"duration_ms", time.Since(start).Milliseconds(), "metered", eng.Metered())
	return eng, nil
}

// compilationCache is the wazero compilation cache to compile with: on
// disk in --cache-dir, or without the flag in the user's cache directory
// when userDefault is set (every command but serve), else the one the
// tests inject; none with --cache-dir "". A directory that cannot be
// written means compiling without a cache, logged, never a failed command.
func (a *app) compilationCache(ctx context.Context, logger *slog.Logger, userDefault bool) wazero.CompilationCache {
	dir, given := a.global.cacheDir, a.cacheDirFlag != nil && a.cacheDirFlag.Changed
	if !given {
		if !userDefault || a.userCacheDir == "" {
			return a.cache
		}
		dir = a.userCacheDir
	}
	if dir == "" {
		return nil
	}
	cache, err := openCompilationCache(dir)
	if err != nil {
		level := slog.LevelDebug
		if given {
			level = slog.LevelWarn // the user asked for this directory
		}
		logger.Log(ctx, level, "compiling without a compilation cache", "dir", dir, "error", err)
		return nil
	}
	// Not closed: wazero requires every runtime using a cache to be
	// closed first, and the process ends with the command anyway.
	return cache
}

// openCompilationCache opens the cache in dir after checking that a file
// can be written there: wazero reports a failed write as a failed
// compilation.
func openCompilationCache(dir string) (wazero.CompilationCache, error) {
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, err
	}
	probe, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return nil, err
	}
	probe.Close()
	return cache, os.Remove(probe.Name())
}
