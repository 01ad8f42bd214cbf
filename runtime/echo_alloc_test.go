package runtime

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/view"
)

// echoModes are the outputs a process's echo can feed: the plain lines,
// prefixed lines, the --json stream, the terminal with its status area.
func echoModes() []struct {
	name     string
	opt      Options
	prefixed bool
} {
	discard := Options{Stdout: io.Discard, Stderr: io.Discard}
	jsonOpt, termOpt := discard, discard
	jsonOpt.JSON = true
	termOpt.View.Terminal = &view.TerminalOptions{Stderr: io.Discard, Stdout: io.Discard, StdoutOnScreen: true,
		Interval: time.Hour}
	return []struct {
		name     string
		opt      Options
		prefixed bool
	}{
		{"plain", discard, false},
		{"prefixed", discard, true},
		{"json", jsonOpt, false},
		{"terminal", termOpt, true},
	}
}

// echoChunk is what a daemon hands the echo in one frame: lines of a
// build log, the last one cut.
var echoChunk = append(bytes.Repeat([]byte("ok  	github.com/seed5ad92d46/sous/runtime/view	0.035s\n"), 600), "half a li"...)

// startEcho returns the echo of process "a" on an output made with opt,
// with a second process echoing too when prefixed, warmed up so its
// buffers have grown.
func startEcho(opt Options, prefixed bool) (*output, Echo) {
	o := newOutput(opt, func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })
	opt.Recipe = "r.star"
	o.start(opt)
	o.Spawned(SpawnInfo{ID: "a", Command: []string{"make"}, Host: "embedded"})
	e := o.Echo("a")
	if prefixed {
		o.Spawned(SpawnInfo{ID: "b", Command: []string{"make"}, Host: "embedded"})
		o.Echo("b")
	}
	for range 3 {
		e.Write(wire.Stdout, echoChunk)
	}
	return o, e
}

// TestEchoWriteAllocatesNothing: a chunk of output costs no allocation on
// its way through the bus to any output, the terminal's status area
// included: the echo is the hot path of a run that writes a lot.
func TestEchoWriteAllocatesNothing(t *testing.T) {
	for _, m := range echoModes() {
		o, e := startEcho(m.opt, m.prefixed)
		if n := testing.AllocsPerRun(200, func() { e.Write(wire.Stdout, echoChunk) }); n != 0 {
			t.Errorf("%s: %.1f allocations per chunk, want none", m.name, n)
		}
		o.end(&event.End{Status: "ok"})
	}
}

// BenchmarkEchoWrite measures a chunk of output lines through the echo,
// the bus and each output, to io.Discard: what sous itself adds per byte.
func BenchmarkEchoWrite(b *testing.B) {
	for _, m := range echoModes() {
		b.Run(m.name, func(b *testing.B) {
			o, e := startEcho(m.opt, m.prefixed)
			b.SetBytes(int64(len(echoChunk)))
			b.ReportAllocs()
			for b.Loop() {
				e.Write(wire.Stdout, echoChunk)
			}
			b.StopTimer()
			o.end(&event.End{Status: "ok"})
		})
	}
}

// TestEchoWriteWithSecretsAllocatesNothing: with secrets to redact, a
// chunk still costs no allocation once the redaction's buffers have grown
// (and with none, TestEchoWriteAllocatesNothing: the redaction is not
// even looked at).
func TestEchoWriteWithSecretsAllocatesNothing(t *testing.T) {
	for _, m := range echoModes() {
		o, e := startEcho(m.opt, m.prefixed)
		o.Redact("sous/runtime/vie") // a match on every line
		o.Redact("ghp_notInTheOutput0123")
		for range 3 {
			e.Write(wire.Stdout, echoChunk)
		}
		if n := testing.AllocsPerRun(200, func() { e.Write(wire.Stdout, echoChunk) }); n != 0 {
			t.Errorf("%s: %.1f allocations per chunk, want none", m.name, n)
		}
		o.end(&event.End{Status: "ok"})
	}
}

// BenchmarkEchoWriteRedacted is BenchmarkEchoWrite with two secrets to
// redact, one on every line.
func BenchmarkEchoWriteRedacted(b *testing.B) {
	for _, m := range echoModes() {
		b.Run(m.name, func(b *testing.B) {
			o, e := startEcho(m.opt, m.prefixed)
			o.Redact("sous/runtime/vie")
			o.Redact("ghp_notInTheOutput0123")
			b.SetBytes(int64(len(echoChunk)))
			b.ReportAllocs()
			for b.Loop() {
				e.Write(wire.Stdout, echoChunk)
			}
			b.StopTimer()
			o.end(&event.End{Status: "ok"})
		})
	}
}
