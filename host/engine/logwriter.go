package engine

import (
	"bytes"
	"context"
	"io"
	"log/slog"
)

// maxLogLine bounds how much guest output is buffered while waiting for a
// newline, so a guest cannot grow host memory by never ending a line.
const maxLogLine = 64 << 10

// logWriter turns a guest's stdout or stderr into Debug records, one per
// line. It is used by one instance, which runs on one goroutine at a time.
type logWriter struct {
	logger *slog.Logger
	stream string
	buf    []byte
}

var _ io.Writer = (*logWriter)(nil)

func newLogWriter(logger *slog.Logger, stream string) *logWriter {
	return &logWriter{logger: logger, stream: stream}
}

// Write implements io.Writer. It never fails, so guest output can never
// make a guest call fail.
func (w *logWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !w.logger.Enabled(context.Background(), slog.LevelDebug) {
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			if len(w.buf) >= maxLogLine {
				w.Flush()
			}
			break
		}
		w.buf = append(w.buf, p[:i]...)
		w.Flush()
		p = p[i+1:]
	}
	return n, nil
}

// Flush logs any buffered partial line.
func (w *logWriter) Flush() {
	if len(w.buf) == 0 {
		return
	}
	w.logger.LogAttrs(context.Background(), slog.LevelDebug, "guest output",
		slog.String("source", "policy"), slog.String("stream", w.stream),
		slog.String("text", string(bytes.TrimSuffix(w.buf, []byte("\r")))))
	w.buf = w.buf[:0]
}
