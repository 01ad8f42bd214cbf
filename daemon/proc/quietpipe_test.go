package proc

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// TestQuietPipesJoinPollerOnUse: a plain child's output pipes stay out of
// the runtime's poller while nothing reads them (the child poller watches
// them), and go into it when a reader starts; its stdin's goes in with the
// first data. What goes through them arrives whole: a large stdin (past
// the pipe's 64 KiB, which grows it) echoed back.
func TestQuietPipesJoinPollerOnUse(t *testing.T) {
	r := newTestRegistry(t)
	if r.poller == nil {
		t.Skip("no child poller on this kernel")
	}
	p, err := r.Spawn(Spec{ID: "q", Command: "sh", Args: []string{"-c", "read x; echo got $x; exec cat"}})
	if err != nil {
		t.Fatal(err)
	}
	p.outMu.Lock()
	for i, o := range p.outputs {
		if !o.quiet || inPoller(o.f) {
			t.Errorf("output %d of a quiet child: quiet %v, in the runtime's poller %v", i, o.quiet, inPoller(o.f))
		}
	}
	p.outMu.Unlock()
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	if _, _, err := p.WriteStdin(ctx, append([]byte("hi\n"), big...), nil); err != nil {
		t.Fatal(err)
	}
	p.CloseStdin()
	var out []byte
	for _, f := range frames(t, p) {
		if f.Stream == wire.Stdout {
			out = append(out, f.Data...)
		}
	}
	if want := append([]byte("got hi\n"), big...); !bytes.Equal(out, want) {
		t.Fatalf("stdout: %d bytes, want %d (starts %q)", len(out), len(want), out[:min(len(out), 20)])
	}
	if o := p.outputs[0]; o.quiet {
		t.Errorf("stdout read, still quiet")
	}
}

// TestQuietPipeReaderAfterRelease: a process discarded (replaced under its
// id) while a descendant outside its group still holds its quiet stdout
// gets a reader after its exit (the pipe has not ended), which ends within
// the drain deadline, and the replacement runs as usual.
func TestQuietPipeReaderAfterRelease(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	r := newTestRegistry(t)
	old, err := r.Spawn(Spec{ID: "x", Command: "sh", Args: []string{"-c", "setsid sleep 3 & sleep 5"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Spawn(Spec{ID: "x", Command: "sh", Args: []string{"-c", "echo new"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the replaced process did not finish: its reader or reaper hangs")
	}
	var out strings.Builder
	for _, f := range frames(t, p) {
		if f.Stream == wire.Stdout {
			out.Write(f.Data)
		}
	}
	if out.String() != "new\n" {
		t.Fatalf("new process said %q", out.String())
	}
}
