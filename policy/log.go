package main

import (
	"strconv"
)

// logSink sends one JSON log line to the host. In the Wasm build it is the
// kubewarden/tracing/log host capability (main.go); natively it is nil, and
// tests may set it to capture the trace. This is the policy's only global
// besides the settings cache: the waPC entry points have no other way in.
var logSink func(line []byte)

// lineBuffer returns an empty buffer for a log line of about n bytes. The
// Wasm build hands out one buffer again and again (the host copies each
// line as it is sent); natively each line is new, since a test's sink may
// keep it.
var lineBuffer = func(n int) []byte { return make([]byte, 0, n) }

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
	b := lineBuffer(160)
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
	b = strconv.AppendBool(b, d.mutation != nil || d.sched != nil)
	if d.message != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, d.message)
	}
	b = append(b, '}', '\n')
	logSink(b)
}

// logWarning emits a warn-level line that is not a decision: something
// the operator should fix, which did not change the decision (hosts count
// such lines: serve's yunikorn_userinfo_policy_log_lines_total).
func logWarning(message, reason string) {
	if logSink == nil {
		return
	}
	b := lineBuffer(64 + len(message) + len(reason))
	b = append(b, `{"level":"warn","message":`...)
	b = appendJSONString(b, message)
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, reason)
	b = append(b, '}', '\n')
	logSink(b)
}

// logInfo emits an info-level line that is not a decision: what changed,
// for the operator to see (followYuniKornConfig's mapping of a new
// version of YuniKorn's ConfigMaps).
func logInfo(message, reason string) {
	if logSink == nil {
		return
	}
	b := lineBuffer(64 + len(message) + len(reason))
	b = append(b, `{"level":"info","message":`...)
	b = appendJSONString(b, message)
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, reason)
	b = append(b, '}', '\n')
	logSink(b)
}
