package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// instance is one instantiated guest. It is used by one goroutine at a time
// (whoever took it from the pool).
type instance struct {
	mod       api.Module
	guestCall api.Function
	stdout    *logWriter
	stderr    *logWriter
	// dead means the instance must not be reused: it trapped, timed out,
	// exited or was closed.
	dead bool
}

// newInstance instantiates the compiled module and runs its initializers:
// _initialize if exported, otherwise _start (where an exit with code 0 is
// the normal end of a TinyGo command), then wapc_init if exported.
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
	if err := inst.init(ctx); err != nil {
		inst.close(ctx)
		return nil, err
	}
	inst.guestCall = mod.ExportedFunction(exportGuestCall)
	e.instances.Add(1)
	return inst, nil
}

func (i *instance) init(ctx context.Context) error {
	if fn := i.mod.ExportedFunction(exportInitialize); fn != nil {
		if _, err := fn.Call(ctx); err != nil {
			return fmt.Errorf("call %s: %w", exportInitialize, classify(err))
		}
	} else if fn := i.mod.ExportedFunction(exportStart); fn != nil {
		if _, err := fn.Call(ctx); err != nil {
			var exit *sys.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 0 {
				return fmt.Errorf("call %s: %w", exportStart, classify(err))
			}
		}
	}
	if i.mod.IsClosed() {
		// Our proc_exit never closes the module; something else did.
		return fmt.Errorf("start module: %w: module closed during start", ErrExited)
	}
	if fn := i.mod.ExportedFunction(exportWapcInit); fn != nil {
		if _, err := fn.Call(ctx); err != nil {
			return fmt.Errorf("call %s: %w", exportWapcInit, classify(err))
		}
	}
	return nil
}

// call runs one waPC operation. On a trap, timeout or exit it marks the
// instance dead; a GuestError leaves it in service.
func (i *instance) call(ctx context.Context, operation string, payload []byte) ([]byte, error) {
	if uint64(len(operation)) > math.MaxUint32 || uint64(len(payload)) > math.MaxUint32 {
		return nil, fmt.Errorf("invoke %q: operation or payload does not fit 32-bit wasm", operation)
	}
	inv := &invocation{operation: operation, payload: payload}
	results, err := i.guestCall.Call(withInvocation(ctx, inv), uint64(len(operation)), uint64(len(payload)))
	if err != nil {
		i.dead = true
		return nil, fmt.Errorf("invoke %q: %w", operation, classify(err))
	}
	// The call succeeded, but the deadline may have closed the module
	// right after it: the answer is good, the instance is not.
	if i.mod.IsClosed() {
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

func (i *instance) close(ctx context.Context) {
	i.stdout.Flush()
	i.stderr.Flush()
	// The ctx may be done already (a timeout); closing must still happen.
	// Closing twice, or after wazero closed it, is fine.
	_ = i.mod.Close(context.WithoutCancel(ctx))
}
