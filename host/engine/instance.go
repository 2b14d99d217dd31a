package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/yunikorn-userinfo/userinfo/host/engine/internal/budget"
)

// instance is one instantiated guest. It is used by one goroutine at a time
// (whoever took it from the pool).
type instance struct {
	mod       api.Module
	guestCall api.Function
	// budget is the instrumented module's work counter (nil when the
	// module runs under wazero's context checks instead).
	budget    api.MutableGlobal
	budgetMax uint64
	stdout    *logWriter
	stderr    *logWriter
	// dead means the instance must not be reused: it trapped, timed out,
	// exited or was closed.
	dead bool
}

// newInstance instantiates the compiled module and runs its initializers
// as Kubewarden's policy-server does: _start if exported (an exit with code
// 0 is the normal end of a TinyGo command), then wapc_init if exported.
// _initialize is never called: policy-server does not call it either, so a
// module that needs it would work here and fail there (New warns).
func (e *Engine) newInstance(ctx context.Context) (*instance, error) {
	inst := &instance{
		stdout: newLogWriter(e.logger, "stdout"),
		stderr: newLogWriter(e.logger, "stderr"),
	}
	cfg := wazero.NewModuleConfig().
		WithName("").         // anonymous, so one runtime holds many instances
		WithStartFunctions(). // init runs them, treating proc_exit(0) as success
		WithStdout(inst.stdout).
		WithStderr(inst.stderr).
		// Policies may check certificates or generate IDs: give them the
		// real clock and randomness. Sleeping stays a no-op (the default),
		// since a sleeping host function would not notice the deadline.
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader)

	// Initializers may log through host calls, which need an invocation.
	ctx = withInvocation(ctx, &invocation{})
	mod, err := e.runtime.InstantiateModule(ctx, e.compiled, cfg)
	if err != nil {
		return nil, fmt.Errorf("instantiate module: %w", err)
	}
	inst.mod = mod
	if e.metered {
		g, ok := mod.ExportedGlobal(budget.Export).(api.MutableGlobal)
		if !ok {
			inst.close(ctx)
			return nil, fmt.Errorf("instantiate module: instrumented module lacks the mutable global %s", budget.Export)
		}
		inst.budget, inst.budgetMax = g, e.opts.Budget
	}
	if err := inst.init(ctx); err != nil {
		inst.close(ctx)
		return nil, err
	}
	inst.guestCall = mod.ExportedFunction(exportGuestCall)
	e.instances.Add(1)
	return inst, nil
}

func (i *instance) init(ctx context.Context) error {
	stop := i.arm(ctx)
	step, err := i.start(ctx)
	exhausted := stop()
	switch {
	case err == nil:
		return nil
	case step == "":
		return err
	case exhausted:
		return fmt.Errorf("call %s: %w", step, i.budgetError(ctx, err))
	}
	return fmt.Errorf("call %s: %w", step, classify(err))
}

// start runs the initializers. It returns the failing export and the raw
// error from the call, or an empty step with an error that needs no
// classifying.
func (i *instance) start(ctx context.Context) (step string, err error) {
	if fn := i.mod.ExportedFunction(exportStart); fn != nil {
		if _, err := fn.Call(ctx); err != nil {
			var exit *sys.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 0 {
				return exportStart, err
			}
		}
	}
	if i.mod.IsClosed() {
		// Our proc_exit never closes the module; something else did.
		return "", fmt.Errorf("start module: %w: module closed during start", ErrExited)
	}
	if fn := i.mod.ExportedFunction(exportWapcInit); fn != nil {
		if _, err := fn.Call(ctx); err != nil {
			return exportWapcInit, err
		}
	}
	return "", nil
}

// call runs one waPC operation. On a trap, timeout or exit it marks the
// instance dead; a GuestError leaves it in service.
func (i *instance) call(ctx context.Context, operation string, payload []byte) ([]byte, error) {
	if uint64(len(operation)) > math.MaxUint32 || uint64(len(payload)) > math.MaxUint32 {
		return nil, fmt.Errorf("invoke %q: operation or payload does not fit 32-bit wasm", operation)
	}
	inv := &invocation{operation: operation, payload: payload}
	stop := i.arm(ctx)
	results, err := i.guestCall.Call(withInvocation(ctx, inv), uint64(len(operation)), uint64(len(payload)))
	exhausted := stop()
	if err != nil {
		i.dead = true
		if exhausted {
			return nil, fmt.Errorf("invoke %q: %w", operation, i.budgetError(ctx, err))
		}
		return nil, fmt.Errorf("invoke %q: %w", operation, classify(err))
	}
	// The call succeeded, but the deadline may have closed the module
	// right after it: the answer is good, the instance is not. Under
	// wazero's context checks (no budget), wazero's watcher may even have
	// seen the ctx done before the call ended and close the module at any
	// moment now, after it is back in the pool; a ctx still live here was
	// live when the watcher stopped, so only a done one needs the retiring.
	if i.mod.IsClosed() || (i.budget == nil && ctx.Err() != nil) {
		i.dead = true
	}
	if api.DecodeU32(results[0]) == 1 {
		return inv.response, nil
	}
	msg := inv.guestErr
	if !inv.hasGuestErr {
		msg = fmt.Sprintf("call to %q was unsuccessful", operation)
	}
	return nil, &GuestError{Operation: operation, Message: msg}
}

// arm gives a metered instance its budget for one call, and zeroes the
// budget when ctx is done so the guest traps at its next yield point (at
// most budget.YieldEvery loop iterations or calls later). The returned stop must be called when the call returns;
// it reports whether the budget ran out or was zeroed (so a trap was the
// budget's doing, not the guest's).
func (i *instance) arm(ctx context.Context) (stop func() bool) {
	if i.budget == nil {
		return func() bool { return false }
	}
	i.budget.Set(i.budgetMax)
	fired := make(chan struct{})
	finished := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		defer close(fired)
		// The guest decrements the counter with a plain load and store,
		// so one zeroing could be overwritten by an iteration already
		// in flight: repeat until the call returns.
		for {
			i.budget.Set(0)
			select {
			case <-finished:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	return func() bool {
		close(finished)
		if !stopAfter() {
			<-fired // the zeroing ran; wait so it cannot race the next call
		}
		return int64(i.budget.Get()) <= 0
	}
}

// budgetError classifies a trap caused by the budget, as classify does the
// errors of wazero's own context checks: the deadline, a cancellation, or
// a guest that ran out of budget first.
func (i *instance) budgetError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		if errors.Is(cause, context.DeadlineExceeded) {
			return fmt.Errorf("%w: %w: %w", ErrTimeout, cause, err)
		}
		return fmt.Errorf("guest canceled: %w: %w", cause, err)
	}
	return fmt.Errorf("%w: work budget of %d function calls and loop iterations used up: %w", ErrTimeout, i.budgetMax, err)
}

func (i *instance) close(ctx context.Context) {
	i.stdout.Flush()
	i.stderr.Flush()
	// The ctx may be done already (a timeout); closing must still happen.
	// Closing twice, or after wazero closed it, is fine.
	_ = i.mod.Close(context.WithoutCancel(ctx))
}
