package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gapmirror/gapmirror/failure"
)

// LevelTrace is below debug: containers/image's request-level lines.
const LevelTrace = slog.LevelDebug - 4

// parseLevel accepts oc-mirror's --log-level names.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "trace":
		return LevelTrace, nil
	case "warning":
		return slog.LevelWarn, nil
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: use error, warn, info, debug or trace", s)
	}
	return lvl, nil
}

// timeFormat is RFC 3339 with milliseconds, in UTC, on every line.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// lineHandler prints "TIME LEVEL message key=value …" lines, readable on a
// terminal, in CI logs and in the run's log file.
type lineHandler struct {
	w     *lockedWriter
	level slog.Level
	attrs []slog.Attr
}

// lockedWriter serialises lines from concurrent handlers onto one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newLineHandler(w io.Writer, level slog.Level) *lineHandler {
	return &lineHandler{w: &lockedWriter{w: w}, level: level}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	b.WriteString(t.UTC().Format(timeFormat))
	b.WriteString(" ")
	b.WriteString(levelName(r.Level))
	b.WriteString(" ")
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		v := a.Value.String()
		if strings.ContainsAny(v, " \t\"=") || v == "" {
			v = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(&b, " %s=%s", a.Key, v)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	b.WriteString("\n")
	_, err := io.WriteString(h.w, failure.Redact(b.String()))
	return err
}

func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "TRACE"
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO "
	case l < slog.LevelError:
		return "WARN "
	}
	return "ERROR"
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &lineHandler{w: h.w, level: h.level, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }

// teeHandler hands each record to every handler that wants its level: the
// terminal at --log-level, the run's log file at debug (or trace).
type teeHandler []slog.Handler

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range t {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var first error
	for _, h := range t {
		if h.Enabled(ctx, r.Level) {
			if err := h.Handle(ctx, r.Clone()); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make(teeHandler, len(t))
	for i, h := range t {
		out[i] = h.WithAttrs(as)
	}
	return out
}

func (t teeHandler) WithGroup(name string) slog.Handler {
	out := make(teeHandler, len(t))
	for i, h := range t {
		out[i] = h.WithGroup(name)
	}
	return out
}

// runLog is the full log of one run, kept in working-dir/logs.
type runLog struct {
	Path string
	f    *os.File
}

// openRunLog creates working-dir/logs/<id>.log in ws.
func openRunLog(ws, id string) (*runLog, error) {
	dir := filepath.Join(ws, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the log directory: %w", err)
	}
	p := filepath.Join(dir, id+".log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating the run's log file: %w", err)
	}
	return &runLog{Path: p, f: f}, nil
}

// Finish ends a run's log: the error that ended the run (at debug: the
// terminal says it once, at the end), where the log is, then the file
// closed. Commands defer it with their named error.
func (l *runLog) Finish(log *slog.Logger, err error) {
	if l == nil {
		return
	}
	if err != nil {
		log.Debug("run failed", "error", failure.Message(err))
	}
	log.Info("the full log of this run", "path", l.Path)
	l.Close()
}

func (l *runLog) Close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// runID names a run's log: its start time and mode.
func runID(mode string) string {
	return time.Now().UTC().Format("20060102T150405.000Z") + "-" + mode
}

// logrus (containers/image, distribution) is routed into the current run's
// slog logger, so its lines have the same format, timestamps and
// destinations as gapmirror's own.
var (
	logrusOnce   sync.Once
	logrusTarget atomic.Pointer[slog.Logger]
)

// routeLogrus sends the standard logrus logger's entries to log.
func routeLogrus(log *slog.Logger) {
	logrusTarget.Store(log)
	logrusOnce.Do(func() {
		std := logrus.StandardLogger()
		std.SetFormatter(&slogFormatter{next: std.Formatter})
	})
	// containers/image's debug lines are one per request: trace here.
	lvl := logrus.InfoLevel
	if log.Enabled(context.Background(), LevelTrace) {
		lvl = logrus.TraceLevel
	}
	logrus.SetLevel(lvl)
}

// slogFormatter forwards entries to slog and writes nothing itself. A
// formatter wrapped around it (or wrapped by it) that drops an entry by
// returning no bytes keeps it out of slog too.
type slogFormatter struct {
	next logrus.Formatter
}

func (f *slogFormatter) Format(e *logrus.Entry) ([]byte, error) {
	switch f.next.(type) {
	case nil, *logrus.TextFormatter, *logrus.JSONFormatter:
	default:
		if b, err := f.next.Format(e); err != nil || len(b) == 0 {
			return nil, err
		}
	}
	log := logrusTarget.Load()
	if log == nil {
		return nil, nil
	}
	lvl := slog.LevelInfo
	switch e.Level {
	case logrus.TraceLevel, logrus.DebugLevel:
		lvl = LevelTrace
	case logrus.WarnLevel:
		lvl = slog.LevelWarn
	case logrus.ErrorLevel, logrus.FatalLevel, logrus.PanicLevel:
		lvl = slog.LevelError
	}
	if !log.Enabled(context.Background(), lvl) {
		return nil, nil
	}
	args := make([]any, 0, 2*len(e.Data)+2)
	args = append(args, "lib", "logrus")
	for k, v := range e.Data {
		args = append(args, k, v)
	}
	r := slog.NewRecord(e.Time, lvl, strings.TrimSpace(e.Message), 0)
	r.Add(args...)
	_ = log.Handler().Handle(context.Background(), r)
	return nil, nil
}
