package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/sys"
)

var (
	// ErrTimeout means the invocation's deadline passed while the guest was
	// running. wazero closed the instance, which is discarded.
	ErrTimeout = errors.New("guest timed out")

	// ErrInstanceUnavailable means no instance became free before the
	// context was done or the invocation timed out.
	ErrInstanceUnavailable = errors.New("no guest instance available")

	// ErrTrap means the guest trapped (for example unreachable, an out of
	// bounds memory access, or memory exhaustion) or broke the waPC ABI. The
	// instance is discarded.
	ErrTrap = errors.New("guest trapped")

	// ErrExited means the guest called WASI proc_exit during a guest call, or
	// with a non-zero code while starting. The instance is discarded.
	ErrExited = errors.New("guest exited")

	// ErrClosed means the Engine was closed.
	ErrClosed = errors.New("engine closed")
)

// GuestError is a failure the guest reported itself through __guest_error
// (or by returning 0 from __guest_call). It is a normal, policy-level error:
// the instance stays in service.
type GuestError struct {
	// Operation is the waPC operation that failed, e.g. "validate".
	Operation string
	// Message is the text the guest passed to __guest_error.
	Message string
}

var _ error = (*GuestError)(nil)

// Error implements error.
func (e *GuestError) Error() string {
	return fmt.Sprintf("%s: %s", e.Operation, e.Message)
}

// classify maps an error from calling into the guest to one of the
// sentinels above, keeping the wazero error (and so the reason) in the chain.
func classify(err error) error {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return fmt.Errorf("%w: %w", ErrTimeout, err)
		case sys.ExitCodeContextCanceled:
			// The ExitError already matches context.Canceled.
			return fmt.Errorf("guest canceled: %w", err)
		default:
			return fmt.Errorf("%w: %w", ErrExited, err)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return fmt.Errorf("%w: %w", ErrTrap, err)
}
