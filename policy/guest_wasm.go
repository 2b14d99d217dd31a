//go:build tinygo.wasm

package main

import "unsafe"

// The waPC guest ABI, written here rather than taken from
// wapc-guest-tinygo so that the buffers a call needs are kept from one call
// to the next: that library allocates the operation name and the payload
// afresh on every call, and with requests of tens of kilobytes TinyGo's
// collector then runs on almost every call and its heap fragments and
// grows (docs/PERFORMANCE.md). The imports and the export are the same
// functions with the same signatures, so any waPC host, policy-server
// included, runs the module unchanged.

//go:wasmimport wapc __guest_request
func guestRequest(operation, payload unsafe.Pointer)

//go:wasmimport wapc __guest_response
func guestResponse(ptr unsafe.Pointer, size uint32)

//go:wasmimport wapc __guest_error
func guestError(ptr unsafe.Pointer, size uint32)

//go:wasmimport wapc __host_call
func hostCall(binding unsafe.Pointer, bindingLen uint32, namespace unsafe.Pointer, namespaceLen uint32,
	operation unsafe.Pointer, operationLen uint32, payload unsafe.Pointer, payloadLen uint32) uint32

//go:wasmimport wapc __host_response_len
func hostResponseLen() uint32

//go:wasmimport wapc __host_response
func hostResponse(ptr unsafe.Pointer)

//go:wasmimport wapc __host_error_len
func hostErrorLen() uint32

//go:wasmimport wapc __host_error
func hostError(ptr unsafe.Pointer)

// keepBuffer is the largest buffer kept for the next call; a larger one,
// made for an unusually large request, is dropped so that it does not pin
// the instance's memory.
const keepBuffer = 1 << 20

// callBuf holds the operation name and the payload of the current call;
// respBuf the answer. Both are reused: nothing that outlives a call points
// into them (the settings cache copies what it keeps).
var callBuf, respBuf []byte

//go:export __guest_call
func guestCall(operationSize, payloadSize uint32) bool {
	need := uint64(operationSize) + uint64(payloadSize)
	if uint64(cap(callBuf)) < need {
		callBuf = make([]byte, need)
	}
	buf := callBuf[:need]
	op, payload := buf[:operationSize:operationSize], buf[operationSize:]
	guestRequest(unsafe.Pointer(unsafe.SliceData(buf)), unsafe.Pointer(unsafe.SliceData(payload)))

	out, err := dispatch(respBuf[:0], unsafe.String(unsafe.SliceData(op), len(op)), payload)
	ok := err == nil
	if ok {
		guestResponse(unsafe.Pointer(unsafe.SliceData(out)), uint32(len(out)))
	} else {
		msg := err.Error()
		guestError(unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	}
	respBuf = out
	if cap(callBuf) > keepBuffer {
		callBuf = nil
	}
	if cap(respBuf) > keepBuffer {
		respBuf = nil
	}
	return ok
}

// lineBuf is the log line buffer, reused from line to line.
var lineBuf []byte

// hostLog sends one log line to the host's kubewarden/tracing/log
// capability. Its answer is not read: a failed log call must not change
// the decision. The host has copied the line when the call returns, so
// its buffer serves the next line.
func hostLog(line []byte) {
	if cap(line) <= 4<<10 {
		lineBuf = line[:0]
	}
	const binding, namespace, operation = "kubewarden", "tracing", "log"
	hostCall(unsafe.Pointer(unsafe.StringData(binding)), uint32(len(binding)),
		unsafe.Pointer(unsafe.StringData(namespace)), uint32(len(namespace)),
		unsafe.Pointer(unsafe.StringData(operation)), uint32(len(operation)),
		unsafe.Pointer(unsafe.SliceData(line)), uint32(len(line)))
}

// wapcHostCall asks the host for a capability and returns its answer, or
// its error as an error.
func wapcHostCall(binding, namespace, operation string, payload []byte) ([]byte, error) {
	ok := hostCall(unsafe.Pointer(unsafe.StringData(binding)), uint32(len(binding)),
		unsafe.Pointer(unsafe.StringData(namespace)), uint32(len(namespace)),
		unsafe.Pointer(unsafe.StringData(operation)), uint32(len(operation)),
		unsafe.Pointer(unsafe.SliceData(payload)), uint32(len(payload)))
	if ok != 1 {
		msg := make([]byte, hostErrorLen())
		if len(msg) > 0 {
			hostError(unsafe.Pointer(unsafe.SliceData(msg)))
		}
		return nil, hostCallError(msg)
	}
	out := make([]byte, hostResponseLen())
	if len(out) > 0 {
		hostResponse(unsafe.Pointer(unsafe.SliceData(out)))
	}
	return out, nil
}

func main() {
	logSink = hostLog
	lineBuffer = func(n int) []byte {
		if cap(lineBuf) >= n {
			return lineBuf[:0]
		}
		return make([]byte, 0, n)
	}
	hostCaller = wapcHostCall
}
