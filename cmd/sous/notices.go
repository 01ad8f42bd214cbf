package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// noticeHandler prints a client's notices (a dropped connection, the
// reconnect) to a command's stderr as one plain line each, "sous: MESSAGE
// (KEY: VALUE, ...)": a user watching `sous exec` or `sous attach` learns at
// once why output stopped, instead of seeing nothing until the client gives
// up. Errors are left to the command, which reports them itself.
type noticeHandler struct {
	mu *sync.Mutex
	w  io.Writer
}

func newNoticeLogger(w io.Writer) *slog.Logger {
	return slog.New(noticeHandler{mu: new(sync.Mutex), w: w})
}

func (h noticeHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo && l < slog.LevelError
}

func (h noticeHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("sous: ")
	b.WriteString(r.Message)
	sep := " ("
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, "%s%s: %v", sep, a.Key, a.Value)
		sep = ", "
		return true
	})
	if sep == ", " {
		b.WriteByte(')')
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

// The client's notices carry their attributes on the record; none are
// added to the logger itself.
func (h noticeHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h noticeHandler) WithGroup(string) slog.Handler      { return h }
