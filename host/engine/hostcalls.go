package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// HostCallHandler answers a guest's __host_call. binding, namespace and
// operation identify the capability as in waPC; Kubewarden uses binding
// "kubewarden" (e.g. "kubewarden"/"tracing"/"log"). A returned error is
// handed to the guest as the host error (__host_call returns 0), so it is
// part of the policy's view, not a failure of the invocation.
//
// ctx carries the invocation's deadline; a handler that blocks should honor
// it. A handler that panics fails the invocation with ErrTrap.
type HostCallHandler func(ctx context.Context, binding, namespace, operation string, payload []byte) ([]byte, error)

// Kubewarden host capability names.
//
// See https://docs.kubewarden.io/reference/spec/host-capabilities/intro-host-capabilities
const (
	// BindingKubewarden is the waPC binding of all Kubewarden capabilities.
	BindingKubewarden = "kubewarden"
	// NamespaceTracing is the namespace of the policy logging capability.
	NamespaceTracing = "tracing"
	// OperationLog is kubewarden/tracing/log: the payload is one JSON log
	// line, such as {"level":"info","message":"...","key":"value"}, and the
	// response is empty.
	OperationLog = "log"
)

// KubewardenHostCalls returns the default HostCallHandler. It emits
// kubewarden/tracing/log lines on logger with source=policy and refuses
// every other capability with a clear error. A nil logger discards.
func KubewardenHostCalls(logger *slog.Logger) HostCallHandler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, binding, namespace, operation string, payload []byte) ([]byte, error) {
		if binding == BindingKubewarden && namespace == NamespaceTracing && operation == OperationLog {
			logPolicyLine(ctx, logger, payload)
			return nil, nil
		}
		return nil, fmt.Errorf("host capability %q is not available in this host", binding+"/"+namespace+"/"+operation)
	}
}

// logPolicyLine re-emits one policy log line: its "level" picks the slog
// level, its "message" becomes the record message and every other key an
// attribute, sorted so output is stable. A line that is not a JSON object
// is logged raw at Info.
func logPolicyLine(ctx context.Context, logger *slog.Logger, payload []byte) {
	// Most lines are debug traces that the logger drops: find that out
	// before decoding the whole line.
	if lv := gjson.GetBytes(payload, "level"); lv.Type == gjson.String && !logger.Enabled(ctx, policyLevel(lv.Str)) && gjson.ValidBytes(payload) {
		return
	}
	source := slog.String("source", "policy")
	var fields map[string]any
	if err := json.Unmarshal(payload, &fields); err != nil || fields == nil {
		logger.LogAttrs(ctx, slog.LevelInfo, strings.TrimSpace(string(payload)), source)
		return
	}
	level := policyLevel(fields["level"])
	msg, _ := fields["message"].(string)
	delete(fields, "level")
	delete(fields, "message")
	if !logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(fields)+1)
	attrs = append(attrs, source)
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		attrs = append(attrs, slog.Any(k, fields[k]))
	}
	logger.LogAttrs(ctx, level, msg, attrs...)
}

// policyLevel maps a policy log level (onelog, tracing) to slog. Unknown or
// missing levels log at Info so nothing is lost.
func policyLevel(v any) slog.Level {
	s, _ := v.(string)
	switch strings.ToLower(s) {
	case "trace", "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error", "fatal", "critical":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}
