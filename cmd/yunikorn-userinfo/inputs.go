package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/tetratelabs/wazero"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/fetch"
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
}

func (f *evalFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&f.requestPath, "request-path", "r", "", "file with the AdmissionRequest or AdmissionReview, - for stdin (required)")
	fs.StringVarP(&f.settingsPath, "settings-path", "s", "", "file with the policy settings, YAML or JSON (default {})")
	fs.StringVar(&f.settingsJSON, "settings-json", "", "policy settings as a JSON object (default {})")
	fs.DurationVar(&f.timeout, "timeout", engine.DefaultTimeout, "deadline of one policy invocation")
	fs.Uint32Var(&f.memoryLimitMiB, "memory-limit", defaultMemoryLimitMiB, "memory limit of the policy instance, in MiB")
	fs.StringVar(&f.contextDir, "context-dir", "", "answer the policy's Kubernetes host capabilities (get_resource, list_resources_*, can_i) from the objects in this directory (YAML or JSON; SubjectAccessReviews with a status answer can_i)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", `answer the policy's Kubernetes host capabilities from the API server of this kubeconfig ("in-cluster": the Pod's service account)`)
	_ = cmd.MarkFlagRequired("request-path")
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
	return nil
}

// evalInputs are the inputs of an evaluation, read and checked before the
// module is compiled so that argument mistakes fail fast.
type evalInputs struct {
	moduleName string
	module     []byte
	settings   json.RawMessage
	request    *admission.Request
}

func (a *app) readEvalInputs(ctx context.Context, args []string, f *evalFlags) (*evalInputs, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	in := &evalInputs{}
	var err error
	if in.moduleName, in.module, err = a.readModule(ctx, args); err != nil {
		return nil, err
	}
	if in.settings, err = readSettings(f.settingsPath, f.settingsJSON); err != nil {
		return nil, err
	}
	data, err := a.readFileOrStdin(f.requestPath)
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	if in.request, err = admission.ParseRequest(data); err != nil {
		return nil, fmt.Errorf("read request %s: %w", f.requestPath, err)
	}
	return in, nil
}

// readModule reads the MODULE argument: a local path (file:// optional),
// https://HOST/PATH or registry://HOST/REPOSITORY[:TAG|@DIGEST], as kwctl
// accepts them, or the embedded policy without one. Remote modules are
// checked against their digest and kept in the module store.
func (a *app) readModule(ctx context.Context, args []string) (string, []byte, error) {
	verifying := a.global.verificationConfig != "" || len(a.global.verificationKeys) > 0
	if len(args) == 0 || args[0] == "" {
		if verifying {
			return "", nil, errors.New("signature verification applies to registry:// modules; name one (the embedded policy is part of this binary)")
		}
		return embeddedName, a.policy, nil
	}
	loc, err := fetch.ParseLocation(args[0])
	if err != nil {
		return "", nil, err
	}
	if loc.Scheme == fetch.SchemeFile && !verifying {
		data, err := os.ReadFile(loc.Path)
		if err != nil {
			return "", nil, fmt.Errorf("read module: %w", err)
		}
		return loc.Path, data, nil
	}
	f, err := a.fetcher()
	if err != nil {
		return "", nil, err
	}
	m, err := f.Fetch(ctx, args[0])
	if err != nil {
		return "", nil, err
	}
	name := args[0]
	if m.Manifest != "" {
		name += " (manifest " + m.Manifest.String() + ")"
	}
	return name, m.Wasm, nil
}

// fetcher builds the module fetcher from the global flags.
func (a *app) fetcher() (*fetch.Fetcher, error) {
	logger, err := a.logger()
	if err != nil {
		return nil, err
	}
	opts := fetch.Options{
		StoreDir:        a.global.storeDir,
		DockerConfigDir: a.global.dockerConfigDir,
		Logger:          logger,
	}
	path := a.global.sourcesPath
	if path == "" {
		// Like kwctl, a sources file in the user's configuration directory
		// applies without the flag.
		if dir, err := os.UserConfigDir(); err == nil {
			if candidate := filepath.Join(dir, "yunikorn-userinfo", "sources.yaml"); fileExists(candidate) {
				path = candidate
			}
		}
	}
	if path != "" {
		if opts.Sources, err = fetch.ReadSources(path); err != nil {
			return nil, err
		}
	}
	if opts.Verification, err = a.verification(); err != nil {
		return nil, err
	}
	return fetch.New(opts)
}

// verification builds the signature requirements from the global flags:
// a config file, or keys (with annotations), not both.
func (a *app) verification() (*fetch.Verification, error) {
	g := a.global
	switch {
	case g.verificationConfig != "" && len(g.verificationKeys) > 0:
		return nil, errors.New("--verification-config-path and --verification-key exclude each other: put the keys in the config")
	case g.verificationConfig != "":
		if len(g.verificationAnnotations) > 0 {
			return nil, errors.New("--verification-annotation goes with --verification-key; a config file states annotations per signature")
		}
		return fetch.ReadVerification(g.verificationConfig)
	case len(g.verificationKeys) > 0:
		keys := map[string][]byte{}
		for _, path := range g.verificationKeys {
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("read --verification-key: %w", err)
			}
			keys["--verification-key "+path] = data
		}
		return fetch.KeysVerification(keys, g.verificationAnnotations)
	case len(g.verificationAnnotations) > 0:
		return nil, errors.New("--verification-annotation needs --verification-key")
	}
	return nil, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
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
	in, err := a.readEvalInputs(ctx, args, f)
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

// loadModule compiles a module for any command, with the compilation cache
// of --cache-dir (or the injected one) so every command honours it.
func (a *app) loadModule(ctx context.Context, name string, module []byte, opts engine.Options) (*engine.Engine, error) {
	start := time.Now()
	cache, err := a.compilationCache()
	if err != nil {
		return nil, err
	}
	opts.CompilationCache = cache
	eng, err := engine.New(ctx, module, opts)
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", name, err)
	}
	opts.Logger.DebugContext(ctx, "policy loaded", "module", name, "bytes", len(module),
		"duration_ms", time.Since(start).Milliseconds(), "metered", eng.Metered())
	return eng, nil
}

// compilationCache is the wazero compilation cache to compile with: the
// one the tests inject, or one on disk with --cache-dir, or none.
func (a *app) compilationCache() (wazero.CompilationCache, error) {
	if a.global.cacheDir == "" {
		return a.cache, nil
	}
	cache, err := wazero.NewCompilationCacheWithDir(a.global.cacheDir)
	if err != nil {
		return nil, fmt.Errorf("open compilation cache %s: %w", a.global.cacheDir, err)
	}
	// Not closed: wazero requires every runtime using a cache to be
	// closed first, and the process ends with the command anyway.
	return cache, nil
}
