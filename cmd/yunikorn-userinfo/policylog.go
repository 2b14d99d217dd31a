package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// policyLogCounter counts the policy's own log lines (records with
// source=policy) that the logger emits, by level: a fixed set of four
// series. The policy logs a warning for what an operator should fix
// without it changing a decision, such as a queue check it had to skip.
type policyLogCounter struct {
	next  slog.Handler
	lines *prometheus.CounterVec
}

func newPolicyLogLines() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "yunikorn_userinfo_policy_log_lines_total",
		Help: "Log lines of the policy module at or above the log level, by level (debug, info, warn, error); " +
			"warn lines are problems to fix that did not change a decision (a skipped queue check).",
	}, []string{"level"})
}

func (h policyLogCounter) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h policyLogCounter) Handle(ctx context.Context, r slog.Record) error {
	fromPolicy := false
	r.Attrs(func(a slog.Attr) bool {
		fromPolicy = a.Key == "source" && a.Value.Kind() == slog.KindString && a.Value.String() == "policy"
		return !fromPolicy
	})
	if fromPolicy {
		level := "error"
		switch {
		case r.Level < slog.LevelInfo:
			level = "debug"
		case r.Level < slog.LevelWarn:
			level = "info"
		case r.Level < slog.LevelError:
			level = "warn"
		}
		h.lines.WithLabelValues(level).Inc()
	}
	return h.next.Handle(ctx, r)
}

func (h policyLogCounter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return policyLogCounter{next: h.next.WithAttrs(attrs), lines: h.lines}
}

func (h policyLogCounter) WithGroup(name string) slog.Handler {
	return policyLogCounter{next: h.next.WithGroup(name), lines: h.lines}
}
