package engine

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// lines is a slog.Handler that keeps the "text" attribute of each record.
type lines struct {
	mu       sync.Mutex
	texts    []string
	disabled bool
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return !l.disabled }
func (l *lines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *lines) WithGroup(string) slog.Handler            { return l }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "text" {
			l.mu.Lock()
			l.texts = append(l.texts, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func TestLogWriter(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("y", maxLogLine)
	tests := []struct {
		name     string
		writes   []string
		disabled bool
		want     []string
	}{
		{name: "one line per record", writes: []string{"a\nb\n"}, want: []string{"a", "b"}},
		{name: "line split across writes", writes: []string{"hel", "lo\r\n"}, want: []string{"hello"}},
		{name: "empty lines dropped", writes: []string{"\n\nx\n"}, want: []string{"x"}},
		{name: "partial line kept until flush", writes: []string{"tail"}, want: []string{"tail"}},
		{name: "overlong line flushed early", writes: []string{long, "z\n"}, want: []string{long, "z"}},
		{name: "debug disabled", writes: []string{"a\n"}, disabled: true, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &lines{disabled: tc.disabled}
			w := newLogWriter(slog.New(h), "stdout")
			for _, s := range tc.writes {
				n, err := w.Write([]byte(s))
				assert.NoError(t, err)
				assert.Equal(t, len(s), n)
			}
			w.Flush()
			assert.Equal(t, tc.want, h.texts)
		})
	}
}
