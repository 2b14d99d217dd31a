package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/yunikorn-userinfo/userinfo/host/engine/internal/budget"
)

// Operations every Kubewarden waPC policy exports.
//
// See https://docs.kubewarden.io/reference/spec/intro-spec
const (
	// OperationProtocolVersion takes an empty payload and answers a JSON
	// string, "v1" for the current protocol.
	OperationProtocolVersion = "protocol_version"
	// OperationValidateSettings takes the raw settings JSON object and
	// answers {"valid": bool, "message": string}.
	OperationValidateSettings = "validate_settings"
	// OperationValidate takes {"request": AdmissionRequest, "settings": {...}}
	// and answers a Kubewarden ValidationResponse.
	OperationValidate = "validate"

	// ProtocolV1 is the only protocol version this engine speaks.
	ProtocolV1 = "v1"
)

// Defaults applied by Options.setDefaults.
const (
	DefaultTimeout          = 2 * time.Second
	DefaultMemoryLimitPages = 1024 // 64 MiB
	// DefaultBudget lets a tight guest loop run for roughly one to two
	// seconds on current CPUs; our policy needs well under 100,000 per
	// evaluation, even for a request near the API server's size limit.
	DefaultBudget = 1 << 31

	// maxMemoryPages is the most a 32-bit Wasm memory can hold (4 GiB).
	maxMemoryPages = 65536
	// pageSize is the size of a Wasm memory page.
	pageSize = 65536
)

// Options configure an Engine. The zero value is usable.
type Options struct {
	// Logger receives guest output (stdout, stderr, __console_log) at
	// Debug and, through the default HostCalls, policy log lines.
	// Default: a logger that discards.
	Logger *slog.Logger

	// MaxInstances is how many instances are kept, and so how many
	// invocations run concurrently. Default: runtime.GOMAXPROCS(0).
	MaxInstances int

	// Timeout is the deadline of one invocation, including the wait for a
	// free instance; an earlier deadline of the caller's ctx wins.
	// Default: DefaultTimeout (2s).
	Timeout time.Duration

	// MemoryLimitPages caps each instance's linear memory, in 64 KiB pages;
	// a guest growing beyond it gets memory.grow = -1 and usually traps.
	// A module whose memory declares a larger minimum or maximum fails to
	// compile in New. Default: DefaultMemoryLimitPages (64 MiB). At most
	// 65536.
	MemoryLimitPages uint32

	// CompilationCache, if set, lets compiled code be reused across
	// engines (and processes, if it is a directory cache). Default: none.
	CompilationCache wazero.CompilationCache

	// HostCalls answers the guest's __host_call.
	// Default: KubewardenHostCalls(Logger).
	HostCalls HostCallHandler

	// SingleUse discards every instance after one invocation, as
	// Kubewarden's policy-server does since 1.10: nothing a guest keeps in
	// memory survives to the next evaluation, at the price of
	// instantiating the module, and letting it rebuild its caches, every
	// time. Default: false (instances are reused).
	SingleUse bool

	// RecycleMemoryPages retires an instance whose linear memory has grown
	// past this many 64 KiB pages once an invocation with a request of at
	// least RecycleRequestBytes ends, and any instance past twice this many
	// (at most MemoryLimitPages) once any invocation ends: a fresh one is
	// created when needed. A guest's heap only grows, and a collector that
	// scans conservatively keeps some of the garbage of huge requests
	// alive, so an instance that served them would otherwise run out of
	// memory (and trap) on later ones, or spend seconds collecting. A heap
	// that small requests grew holds what the module keeps across calls
	// (the queue check's parsed configuration: 24-32 MiB for 250 KiB of
	// queues.yaml), which retiring the instance would make every later
	// request rebuild.
	// Default: a quarter of MemoryLimitPages (16 MiB of the default 64;
	// ordinary requests keep an instance at a few MiB).
	RecycleMemoryPages uint32

	// RecycleRequestBytes is the request size from which an invocation
	// retires an instance past RecycleMemoryPages. Default: 64 KiB.
	RecycleRequestBytes int

	// Budget is how many function calls and loop iterations one invocation
	// may run. The module is instrumented to count them itself (see
	// internal/budget): that is how a guest is stopped at its deadline
	// without wazero's per-iteration exit to Go, and it is the hard stop
	// when no CPU is free to deliver the deadline. A guest that runs out
	// fails with ErrTimeout. Modules the instrumentation does not support
	// run unmodified under wazero's context checks, and Budget does not
	// apply to them. Default: DefaultBudget.
	Budget uint64
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxInstances <= 0 {
		o.MaxInstances = runtime.GOMAXPROCS(0)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MemoryLimitPages == 0 {
		o.MemoryLimitPages = DefaultMemoryLimitPages
	}
	o.MemoryLimitPages = min(o.MemoryLimitPages, maxMemoryPages)
	if o.RecycleMemoryPages == 0 {
		o.RecycleMemoryPages = max(o.MemoryLimitPages/4, 1)
	}
	if o.RecycleRequestBytes <= 0 {
		o.RecycleRequestBytes = 64 << 10
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	if o.HostCalls == nil {
		o.HostCalls = KubewardenHostCalls(o.Logger)
	}
}

// Stats is a snapshot of an Engine's instance set.
type Stats struct {
	// Instances is the number of live instances, idle or busy.
	Instances int
	// Idle is the number of live instances waiting for an invocation.
	Idle int
	// Replacements counts instances discarded because they trapped, timed
	// out, exited or were closed.
	Replacements uint64
	// Waits counts invocations that found no free instance and had to wait.
	Waits uint64
	// Recycled counts healthy instances retired because their memory grew
	// past Options.RecycleMemoryPages.
	Recycled uint64
}

// Engine runs one compiled waPC module on a bounded set of instances. It is
// safe for concurrent use.
type Engine struct {
	opts     Options
	logger   *slog.Logger
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	// metered: the module carries the budget global (internal/budget).
	metered bool

	// slots bounds concurrent invocations, and so live instances: an
	// invocation holds a slot while it runs. It takes an idle instance if
	// there is one and otherwise creates one, so instances are created
	// lazily, only when all live ones are busy.
	slots chan struct{}
	idle  chan *instance
	done  chan struct{} // closed by Close

	instances    atomic.Int64
	idleCount    atomic.Int64
	replacements atomic.Uint64
	recycled     atomic.Uint64
	waits        atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

// New compiles wasm and prepares an Engine for it. It instantiates one
// instance right away and checks that protocol_version answers "v1", so a
// broken or foreign module fails here rather than on first use.
func New(ctx context.Context, wasm []byte, opts Options) (*Engine, error) {
	opts.setDefaults()
	metered, err := budget.Instrument(wasm)
	if err != nil {
		opts.Logger.LogAttrs(ctx, slog.LevelInfo, "module runs under wazero's context checks, which are slower",
			slog.String("reason", err.Error()))
		return newEngine(ctx, wasm, opts, false)
	}
	e, err := newEngine(ctx, metered, opts, true)
	if errors.Is(err, errCompile) {
		// The rewrite is ours; if wazero refuses it, the original may
		// still be fine (and if not, the error comes from it).
		opts.Logger.LogAttrs(ctx, slog.LevelWarn, "instrumented module failed, running the original under wazero's context checks",
			slog.String("error", err.Error()))
		return newEngine(ctx, wasm, opts, false)
	}
	return e, err
}

// errCompile marks a module wazero refused to compile.
var errCompile = errors.New("compile module")

func newEngine(ctx context.Context, wasm []byte, opts Options, metered bool) (*Engine, error) {
	cfg := wazero.NewRuntimeConfig().
		// Without the budget, wazero's checks are how deadlines stop a
		// looping guest.
		WithCloseOnContextDone(!metered).
		WithMemoryLimitPages(opts.MemoryLimitPages)
	if opts.CompilationCache != nil {
		cfg = cfg.WithCompilationCache(opts.CompilationCache)
	}
	e := &Engine{
		opts:    opts,
		logger:  opts.Logger,
		runtime: newRuntime(ctx, cfg),
		metered: metered,
		slots:   make(chan struct{}, opts.MaxInstances),
		idle:    make(chan *instance, opts.MaxInstances),
		done:    make(chan struct{}),
	}
	if err := e.init(ctx, wasm); err != nil {
		_ = e.runtime.Close(ctx)
		return nil, err
	}
	return e, nil
}

// runtimeMu serialises runtime creation: wazero v1.12 caches its own version
// in an unsynchronised package variable the first time a compiler runtime is
// created, so engines created concurrently (parallel tests, a settings
// reload while serving) would race on it.
var runtimeMu sync.Mutex

func newRuntime(ctx context.Context, cfg wazero.RuntimeConfig) wazero.Runtime {
	runtimeMu.Lock()
	defer runtimeMu.Unlock()
	return wazero.NewRuntimeWithConfig(ctx, cfg)
}

func (e *Engine) init(ctx context.Context, wasm []byte) error {
	if err := instantiateWASI(ctx, e.runtime); err != nil {
		return fmt.Errorf("instantiate wasi: %w", err)
	}
	host := &wapcHost{logger: e.logger, hostCalls: e.opts.HostCalls}
	if err := host.instantiate(ctx, e.runtime); err != nil {
		return fmt.Errorf("instantiate waPC host module: %w", err)
	}
	compiled, err := e.runtime.CompileModule(ctx, wasm)
	if err != nil {
		return fmt.Errorf("%w: %w", errCompile, err)
	}
	e.compiled = compiled
	if err := checkModule(compiled); err != nil {
		return err
	}
	if _, ok := compiled.ExportedFunctions()[exportInitialize]; ok {
		e.logger.Warn("the module exports _initialize, which Kubewarden's policy-server never calls; "+
			"this host does not call it either, so the module starts here as it would there "+
			"(a reactor build that needs it will fail: build a WASI command, TinyGo -target=wasi)",
			"source", "engine")
	}

	startCtx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	inst, err := e.newInstance(startCtx)
	cancel()
	if err != nil {
		return err
	}
	e.putIdle(inst)

	version, err := e.ProtocolVersion(ctx)
	if err != nil {
		return fmt.Errorf("check protocol version: %w", err)
	}
	if version != ProtocolV1 {
		return fmt.Errorf("check protocol version: module speaks %q, this host speaks %q", version, ProtocolV1)
	}
	return nil
}

// checkModule rejects modules that are not waPC guests or need imports
// this host does not provide, with a clearer message than instantiation
// would give.
func checkModule(compiled wazero.CompiledModule) error {
	if _, ok := compiled.ExportedFunctions()[exportGuestCall]; !ok {
		return fmt.Errorf("check module: no %s export: not a waPC module", exportGuestCall)
	}
	var missing []string
	for _, def := range compiled.ImportedFunctions() {
		module, name, _ := def.Import()
		switch {
		case module == wasi_snapshot_preview1.ModuleName:
		case module == moduleWapc && wapcImports[name]:
		default:
			missing = append(missing, module+"."+name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("check module: imports functions this host does not provide: %s", strings.Join(missing, ", "))
	}
	return nil
}

// Invoke runs the waPC operation with payload on a free instance and returns
// the guest's response.
//
// Errors: *GuestError when the guest reported a failure (the instance is
// kept); ErrTimeout, ErrTrap or ErrExited when the instance failed (it is
// discarded and replaced on a later invocation); ErrInstanceUnavailable when
// no instance became free in time; ErrClosed after Close.
func (e *Engine) Invoke(ctx context.Context, operation string, payload []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	inst, err := e.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("invoke %q: %w", operation, err)
	}
	out, err := inst.call(ctx, operation, payload)
	e.release(ctx, inst, len(payload) >= e.opts.RecycleRequestBytes)
	return out, err
}

// acquire takes a slot and an instance for it.
func (e *Engine) acquire(ctx context.Context) (*instance, error) {
	select {
	case <-e.done:
		return nil, ErrClosed
	default:
	}
	// A guest call with a done ctx would only cost the instance.
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", ErrInstanceUnavailable, context.Cause(ctx))
	}
	select {
	case e.slots <- struct{}{}:
	default:
		e.waits.Add(1)
		select {
		case e.slots <- struct{}{}:
		case <-e.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrInstanceUnavailable, context.Cause(ctx))
		}
	}
	select {
	case inst := <-e.idle:
		e.idleCount.Add(-1)
		return inst, nil
	default:
	}
	inst, err := e.newInstance(ctx)
	if err != nil {
		<-e.slots
		return nil, fmt.Errorf("create instance: %w", err)
	}
	return inst, nil
}

// release puts inst back, or discards it if it is dead or its memory grew
// too large (Options.RecycleMemoryPages; large: the request was), and
// frees the slot.
func (e *Engine) release(ctx context.Context, inst *instance, large bool) {
	defer func() { <-e.slots }()
	select {
	case <-e.done:
		// Nobody takes instances any more; Close closes the runtime.
		e.discard(ctx, inst)
		return
	default:
	}
	if inst.dead || inst.mod.IsClosed() {
		e.discard(ctx, inst)
		e.replacements.Add(1)
		return
	}
	if e.opts.SingleUse {
		e.discard(ctx, inst)
		return
	}
	limit := min(2*uint64(e.opts.RecycleMemoryPages), uint64(e.opts.MemoryLimitPages))
	if large {
		limit = uint64(e.opts.RecycleMemoryPages)
	}
	if mem := inst.mod.Memory(); mem != nil && uint64(mem.Size()) > limit*pageSize {
		e.discard(ctx, inst)
		e.recycled.Add(1)
		return
	}
	e.putIdle(inst)
}

// putIdle makes inst available. There is always room: live instances never
// outnumber slots.
func (e *Engine) putIdle(inst *instance) {
	e.idleCount.Add(1)
	e.idle <- inst
}

// discard closes inst, which must not be idle.
func (e *Engine) discard(ctx context.Context, inst *instance) {
	inst.close(ctx)
	e.instances.Add(-1)
}

// ProtocolVersion invokes protocol_version and decodes its JSON string.
func (e *Engine) ProtocolVersion(ctx context.Context) (string, error) {
	out, err := e.Invoke(ctx, OperationProtocolVersion, nil)
	if err != nil {
		return "", err
	}
	var version string
	if err := json.Unmarshal(out, &version); err != nil {
		return "", fmt.Errorf("decode %s response %q: %w", OperationProtocolVersion, out, err)
	}
	return version, nil
}

// SettingsValidation is the answer of validate_settings.
type SettingsValidation struct {
	Valid   bool   `json:"valid"`
	Message string `json:"message,omitempty"`
}

// ValidateSettings invokes validate_settings with the raw settings JSON
// (empty means {}) and decodes the answer. Invalid settings are not an
// error: check Valid and Message.
func (e *Engine) ValidateSettings(ctx context.Context, settings []byte) (SettingsValidation, error) {
	if len(bytes.TrimSpace(settings)) == 0 {
		settings = []byte("{}")
	}
	out, err := e.Invoke(ctx, OperationValidateSettings, settings)
	if err != nil {
		return SettingsValidation{}, err
	}
	var resp struct {
		Valid   *bool  `json:"valid"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return SettingsValidation{}, fmt.Errorf("decode %s response %q: %w", OperationValidateSettings, out, err)
	}
	if resp.Valid == nil {
		return SettingsValidation{}, fmt.Errorf("decode %s response %q: no \"valid\" field", OperationValidateSettings, out)
	}
	return SettingsValidation{Valid: *resp.Valid, Message: resp.Message}, nil
}

// Validate invokes validate with a ValidationRequest payload
// ({"request": ..., "settings": ...}) and returns the raw ValidationResponse.
func (e *Engine) Validate(ctx context.Context, payload []byte) ([]byte, error) {
	return e.Invoke(ctx, OperationValidate, payload)
}

// Stats returns a snapshot of the instance set.
func (e *Engine) Stats() Stats {
	return Stats{
		Instances:    int(e.instances.Load()),
		Idle:         int(e.idleCount.Load()),
		Replacements: e.replacements.Load(),
		Recycled:     e.recycled.Load(),
		Waits:        e.waits.Load(),
	}
}

// Metered reports whether the module runs instrumented with a work budget
// (Options.Budget), rather than under wazero's slower context checks.
func (e *Engine) Metered() bool { return e.metered }

// Close releases the runtime and every instance. Invocations still running
// fail; later ones return ErrClosed. Close is idempotent.
func (e *Engine) Close(ctx context.Context) error {
	e.closeOnce.Do(func() {
		close(e.done)
	drain:
		for {
			select {
			case inst := <-e.idle:
				e.idleCount.Add(-1)
				e.discard(ctx, inst)
			default:
				break drain
			}
		}
		if err := e.runtime.Close(ctx); err != nil {
			e.closeErr = fmt.Errorf("close runtime: %w", err)
		}
	})
	return e.closeErr
}
