package main

import (
	"strconv"
)

// logSink sends one JSON log line to the host. In the Wasm build it is the
// kubewarden/tracing/log host capability (main.go); natively it is nil, and
// tests may set it to capture the trace. This is the policy's only global
// besides the settings cache: the waPC entry points have no other way in.
var logSink func(line []byte)

// logDecision emits the decision trace: one line per evaluation, at debug
// level when the request is accepted and info when it is rejected, in the
// {"level","message",...} shape Kubewarden hosts read.
func logDecision(d decision) {
	if logSink == nil {
		return
	}
	level := "debug"
	if !d.accepted {
		level = "info"
	}
	b := make([]byte, 0, 160)
	b = append(b, `{"level":"`...)
	b = append(b, level...)
	b = append(b, `","message":"decision","rule":`...)
	b = appendJSONString(b, d.rule)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, d.kind)
	b = append(b, `,"operation":`...)
	b = appendJSONString(b, d.op)
	b = append(b, `,"user":`...)
	b = appendJSONString(b, d.user)
	b = append(b, `,"accepted":`...)
	b = strconv.AppendBool(b, d.accepted)
	b = append(b, `,"mutated":`...)
	b = strconv.AppendBool(b, d.mutation != nil)
	if d.message != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, d.message)
	}
	b = append(b, '}', '\n')
	logSink(b)
}
