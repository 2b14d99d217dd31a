package engine

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// Guest exports the host calls. All parameters and results are i32.
//
// See https://wapc.io/docs/spec/
const (
	// exportGuestCall runs one waPC operation:
	//
	//	__guest_call(operation_len, payload_len) -> 1 (success) | 0 (failure)
	//
	// The guest allocates the two buffers and fetches their contents with
	// __guest_request.
	exportGuestCall = "__guest_call"

	// exportStart is the WASI command entry point:
	//
	//	_start()
	//
	// TinyGo's default build mode runs main here (where policies register
	// their operations) and then calls proc_exit(0).
	exportStart = "_start"

	// exportInitialize is the WASI reactor initializer, which Kubewarden's
	// policy-server never calls, and neither does this host (New warns
	// when a module exports it):
	//
	//	_initialize()
	exportInitialize = "_initialize"

	// exportWapcInit is waPC's optional initializer, called after the
	// runtime is initialized:
	//
	//	wapc_init()
	exportWapcInit = "wapc_init"
)

// Host imports in the module [moduleWapc]. All parameters and results are
// i32; pointers are offsets into the guest's memory.
const (
	// moduleWapc is the import module name of the waPC host functions.
	moduleWapc = "wapc"

	// importGuestRequest writes the operation name and the payload of the
	// current invocation into guest buffers:
	//
	//	__guest_request(operation_ptr, payload_ptr)
	importGuestRequest = "__guest_request"

	// importGuestResponse hands the host the successful result:
	//
	//	__guest_response(ptr, len)
	importGuestResponse = "__guest_response"

	// importGuestError hands the host the failure message:
	//
	//	__guest_error(ptr, len)
	importGuestError = "__guest_error"

	// importHostCall asks the host for a capability:
	//
	//	__host_call(binding_ptr, binding_len, namespace_ptr, namespace_len,
	//	            operation_ptr, operation_len, payload_ptr, payload_len) -> 1 (ok) | 0 (error)
	importHostCall = "__host_call"

	// importHostResponseLen is the length of the last host call's response:
	//
	//	__host_response_len() -> len
	importHostResponseLen = "__host_response_len"

	// importHostResponse copies the last host call's response to ptr:
	//
	//	__host_response(ptr)
	importHostResponse = "__host_response"

	// importHostErrorLen is the length of the last host call's error:
	//
	//	__host_error_len() -> len
	importHostErrorLen = "__host_error_len"

	// importHostError copies the last host call's error message to ptr:
	//
	//	__host_error(ptr)
	importHostError = "__host_error"

	// importConsoleLog logs a guest message:
	//
	//	__console_log(ptr, len)
	importConsoleLog = "__console_log"
)

// wapcImports is the set of functions the "wapc" host module provides.
var wapcImports = map[string]bool{
	importGuestRequest: true, importGuestResponse: true, importGuestError: true,
	importHostCall: true, importHostResponseLen: true, importHostResponse: true,
	importHostErrorLen: true, importHostError: true, importConsoleLog: true,
}

// invocation is the state of one call into a guest. It travels in the
// context given to the guest, which wazero passes on to host functions, so
// instances running concurrently never share state.
type invocation struct {
	operation string
	payload   []byte

	response    []byte
	guestErr    string
	hasGuestErr bool

	hostResponse []byte
	hostErr      string
}

type invocationKey struct{}

func withInvocation(ctx context.Context, inv *invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

// invocationFrom returns the invocation in ctx. The engine always sets one
// before calling into a guest, so a missing one is an engine bug; it panics,
// which wazero turns into an error of the call.
func invocationFrom(ctx context.Context) *invocation {
	inv, ok := ctx.Value(invocationKey{}).(*invocation)
	if !ok {
		panic(fmt.Errorf("%w: host function called outside of an invocation", ErrTrap))
	}
	return inv
}

// read copies length bytes at ptr out of the guest's memory. A range outside
// memory panics with an error; wazero recovers it and fails the guest call,
// so a misbehaving guest never crashes the host.
func read(m api.Module, fn string, ptr, length uint32) []byte {
	if length == 0 {
		return nil
	}
	if mem := m.Memory(); mem != nil {
		if b, ok := mem.Read(ptr, length); ok {
			return bytes.Clone(b)
		}
	}
	panic(fmt.Errorf("%s.%s: guest memory range [%d, +%d) is out of bounds", moduleWapc, fn, ptr, length))
}

// write copies b into the guest's memory at ptr, panicking like read.
func write(m api.Module, fn string, ptr uint32, b []byte) {
	if len(b) == 0 {
		return
	}
	if mem := m.Memory(); mem != nil && mem.Write(ptr, b) {
		return
	}
	panic(fmt.Errorf("%s.%s: guest memory range [%d, +%d) is out of bounds", moduleWapc, fn, ptr, len(b)))
}

// wapcHost implements the "wapc" host module.
type wapcHost struct {
	logger    *slog.Logger
	hostCalls HostCallHandler
}

func (h *wapcHost) guestRequest(ctx context.Context, m api.Module, stack []uint64) {
	inv := invocationFrom(ctx)
	write(m, importGuestRequest, api.DecodeU32(stack[0]), []byte(inv.operation))
	write(m, importGuestRequest, api.DecodeU32(stack[1]), inv.payload)
}

func (h *wapcHost) guestResponse(ctx context.Context, m api.Module, stack []uint64) {
	inv := invocationFrom(ctx)
	inv.response = read(m, importGuestResponse, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
}

func (h *wapcHost) guestError(ctx context.Context, m api.Module, stack []uint64) {
	inv := invocationFrom(ctx)
	inv.guestErr = string(read(m, importGuestError, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
	inv.hasGuestErr = true
}

func (h *wapcHost) hostCall(ctx context.Context, m api.Module, stack []uint64) {
	inv := invocationFrom(ctx)
	binding := read(m, importHostCall, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	namespace := read(m, importHostCall, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
	operation := read(m, importHostCall, api.DecodeU32(stack[4]), api.DecodeU32(stack[5]))
	payload := read(m, importHostCall, api.DecodeU32(stack[6]), api.DecodeU32(stack[7]))

	inv.hostResponse, inv.hostErr = nil, ""
	resp, err := h.hostCalls(ctx, string(binding), string(namespace), string(operation), payload)
	if err != nil {
		inv.hostErr = err.Error()
		stack[0] = 0
		return
	}
	inv.hostResponse = resp
	stack[0] = 1
}

func (h *wapcHost) hostResponseLen(ctx context.Context, _ api.Module, stack []uint64) {
	stack[0] = api.EncodeU32(uint32(len(invocationFrom(ctx).hostResponse)))
}

func (h *wapcHost) hostResponse(ctx context.Context, m api.Module, stack []uint64) {
	write(m, importHostResponse, api.DecodeU32(stack[0]), invocationFrom(ctx).hostResponse)
}

func (h *wapcHost) hostErrorLen(ctx context.Context, _ api.Module, stack []uint64) {
	stack[0] = api.EncodeU32(uint32(len(invocationFrom(ctx).hostErr)))
}

func (h *wapcHost) hostError(ctx context.Context, m api.Module, stack []uint64) {
	write(m, importHostError, api.DecodeU32(stack[0]), []byte(invocationFrom(ctx).hostErr))
}

func (h *wapcHost) consoleLog(ctx context.Context, m api.Module, stack []uint64) {
	msg := read(m, importConsoleLog, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	h.logger.LogAttrs(ctx, slog.LevelDebug, "guest console log",
		slog.String("source", "policy"), slog.String("text", string(msg)))
}

// instantiate builds and instantiates the "wapc" host module in r.
func (h *wapcHost) instantiate(ctx context.Context, r wazero.Runtime) error {
	i32 := api.ValueTypeI32
	b := r.NewHostModuleBuilder(moduleWapc)
	export := func(name string, fn api.GoModuleFunc, params, results []api.ValueType, names ...string) {
		b.NewFunctionBuilder().WithGoModuleFunction(fn, params, results).WithParameterNames(names...).Export(name)
	}
	export(importGuestRequest, h.guestRequest, []api.ValueType{i32, i32}, nil, "operation_ptr", "payload_ptr")
	export(importGuestResponse, h.guestResponse, []api.ValueType{i32, i32}, nil, "ptr", "len")
	export(importGuestError, h.guestError, []api.ValueType{i32, i32}, nil, "ptr", "len")
	export(importHostCall, h.hostCall, []api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32},
		"binding_ptr", "binding_len", "namespace_ptr", "namespace_len",
		"operation_ptr", "operation_len", "payload_ptr", "payload_len")
	export(importHostResponseLen, h.hostResponseLen, nil, []api.ValueType{i32})
	export(importHostResponse, h.hostResponse, []api.ValueType{i32}, nil, "ptr")
	export(importHostErrorLen, h.hostErrorLen, nil, []api.ValueType{i32})
	export(importHostError, h.hostError, []api.ValueType{i32}, nil, "ptr")
	export(importConsoleLog, h.consoleLog, []api.ValueType{i32, i32}, nil, "ptr", "len")
	_, err := b.Instantiate(ctx)
	return err
}

// instantiateWASI instantiates WASI preview1 in r with one change: proc_exit
// unwinds the guest with a sys.ExitError but does not close the module.
//
// wazero's own proc_exit closes the module, which breaks TinyGo's default
// build mode: its _start calls proc_exit(0) after main has registered the
// waPC operations, and the module must stay usable afterwards. The engine
// decides what an exit means (fine at start with code 0, fatal otherwise)
// and closes the instance itself.
func instantiateWASI(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	// Exporting a name again replaces the earlier export.
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(procExit), []api.ValueType{api.ValueTypeI32}, nil).
		WithParameterNames("rval").
		Export("proc_exit")
	_, err := b.Instantiate(ctx)
	return err
}

// procExit implements proc_exit(rval). wazero recovers the panic and returns
// the ExitError from the guest call unchanged.
func procExit(_ context.Context, _ api.Module, stack []uint64) {
	panic(sys.NewExitError(api.DecodeU32(stack[0])))
}
