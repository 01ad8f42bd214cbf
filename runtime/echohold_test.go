package runtime

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// The echo of a spawned process (Output.EchoBeside) is held until the
// recipe settles (Output.Settle), so that processes spawned together are
// prefixed or not together, whichever printed first. These tests drive
// the output as builtins/process.go does; cmd/sous's echo_hold_test.go
// runs real recipes.

// screenOf reads what a sink wrote, under the bus's lock (the hold's
// time limit writes from a timer goroutine).
func screenOf(o *output, b *bytes.Buffer) string {
	o.bus.Lock()
	defer o.bus.Unlock()
	return b.String()
}

// TestEchoBesideHoldsUntilSettle: a's first line, written while a was the
// only process, waits; b is spawned and ends before the recipe settles;
// at the settle both had echoed, so every held line carries its id, in
// the order the lines came across stdout and stderr (one writer for both
// here, as on a terminal).
func TestEchoBesideHoldsUntilSettle(t *testing.T) {
	t.Parallel()
	var screen bytes.Buffer
	o := testOutput(&screen, &screen, false)
	a := o.EchoBeside("a")
	a.Write(wire.Stdout, []byte("a1\n"))
	a.Write(wire.Stderr, []byte("a-err\n"))
	b := o.EchoBeside("b")
	b.Write(wire.Stdout, []byte("b1\npartial"))
	b.Close()
	if got := screen.String(); got != "" {
		t.Fatalf("written before the recipe settled: %q", got)
	}
	o.Settle()
	if want := "[a] a1\n[a] a-err\n[b] b1\n[b] partial\n"; screen.String() != want {
		t.Errorf("at the settle: %q, want %q", screen.String(), want)
	}
	a.Write(wire.Stdout, []byte("a2\n"))
	a.Close()
	if want := "[a] a1\n[a] a-err\n[b] b1\n[b] partial\n[a] a2\n"; screen.String() != want {
		t.Errorf("after: %q, want %q", screen.String(), want)
	}
}

// TestEchoBesideEndedBeforeTheNextSpawn: a process that printed and ended
// before its sibling was spawned is still decided with it: its echo
// counts until the settle.
func TestEchoBesideEndedBeforeTheNextSpawn(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	o := testOutput(&stdout, &bytes.Buffer{}, false)
	a := o.EchoBeside("a")
	a.Write(wire.Stdout, []byte("a1\n"))
	a.Close()
	b := o.EchoBeside("b")
	b.Write(wire.Stdout, []byte("b1\n"))
	o.Settle()
	b.Close()
	if want := "[a] a1\n[b] b1\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	o.bus.Lock()
	echoing := o.bus.State().Echoing
	o.bus.Unlock()
	if echoing != 0 {
		t.Errorf("Echoing = %d once both ended, want 0", echoing)
	}
}

// TestEchoBesideAloneStaysBare: one spawned process, settled, writes its
// lines as they are; a later lone one too. A settle with nothing held
// changes nothing.
func TestEchoBesideAloneStaysBare(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	o := testOutput(&stdout, &bytes.Buffer{}, false)
	o.Settle()
	for _, id := range []string{"a", "b"} {
		e := o.EchoBeside(id)
		e.Write(wire.Stdout, []byte(id+"1\nno newline"))
		o.Settle()
		e.Write(wire.Stdout, []byte(" yet\n"+id+"2"))
		e.Close()
		o.Settle()
	}
	if want := "a1\nno newline yet\na2\nb1\nno newline yet\nb2\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
}

// TestEchoBesideThenEchoPrefixesFromTheSecond: a spawned process settled
// alone stays bare; a process echoing while it still does (run) turns
// the prefixes on from its start, for both.
func TestEchoBesideThenEchoPrefixesFromTheSecond(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	o := testOutput(&stdout, &bytes.Buffer{}, false)
	a := o.EchoBeside("a")
	a.Write(wire.Stdout, []byte("a1\n"))
	o.Settle() // run's call
	r := o.Echo("r")
	r.Write(wire.Stdout, []byte("r1\n"))
	a.Write(wire.Stdout, []byte("a2\n"))
	r.Close()
	a.Close()
	if want := "a1\n[r] r1\n[a] a2\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
}

// TestEchoBesideJSONIsNotHeld: the --json stream carries ids, so its
// output events go out as they come, in the order they always did.
func TestEchoBesideJSONIsNotHeld(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	o := testOutput(&stdout, &bytes.Buffer{}, true)
	a := o.EchoBeside("a")
	a.Write(wire.Stdout, []byte("a1\n"))
	if !strings.Contains(stdout.String(), `"data":"a1\n"`) {
		t.Errorf("the output event waited for the settle: %q", stdout.String())
	}
	o.Settle()
	a.Close()
	if n := strings.Count(stdout.String(), "\n"); n != 1 {
		t.Errorf("%d events, want the one output event:\n%s", n, stdout.String())
	}
}

// TestEchoBesideHeldLinesAreRedacted: a secret in a held line, and one the
// child wrote in two pieces across the hold, are replaced before the
// line is kept, and stay replaced when it goes out.
func TestEchoBesideHeldLinesAreRedacted(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	o := testOutput(&stdout, &bytes.Buffer{}, false)
	o.Redact("sekrit-token")
	a := o.EchoBeside("a")
	a.Write(wire.Stdout, []byte("token=sekrit-token\nx sekr"))
	b := o.EchoBeside("b")
	a.Write(wire.Stdout, []byte("it-token\n"))
	b.Write(wire.Stdout, []byte("sekrit-token"))
	b.Close()
	o.Settle()
	a.Close()
	if want := "[a] token=***\n[a] x ***\n[b] ***\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
}

// TestEchoBesideHoldLimit: a recipe that computes without calling a
// builtin does not keep its process's lines back longer than HoldLimit.
func TestEchoBesideHoldLimit(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	o := newOutput(Options{Stdout: &stdout, Stderr: &bytes.Buffer{}}, nil)
	began := time.Now()
	a := o.EchoBeside("a")
	a.Write(wire.Stdout, []byte("a1\n"))
	for screenOf(o, &stdout) == "" {
		if time.Since(began) > 5*time.Second {
			t.Fatal("the held line never went out")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if waited := time.Since(began); waited < HoldLimit {
		t.Errorf("out after %s, before the hold's limit %s", waited, HoldLimit)
	}
	if got := screenOf(o, &stdout); got != "a1\n" {
		t.Errorf("stdout %q, want the lone process's line bare", got)
	}
	// The hold is over: a second spawn follows the rule for processes
	// echoing at once.
	b := o.EchoBeside("b")
	b.Write(wire.Stdout, []byte("b1\n"))
	o.Settle()
	a.Write(wire.Stdout, []byte("a2\n"))
	if got := screenOf(o, &stdout); got != "a1\n[b] b1\n[a] a2\n" {
		t.Errorf("stdout %q", got)
	}
}

// TestEchoBesideFloodIsNotHeld: past event.MaxHeld bytes the hold settles
// on its own, so a process that floods before the recipe moves on does
// not grow sous.
func TestEchoBesideFloodIsNotHeld(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	o := testOutput(&stdout, &bytes.Buffer{}, false)
	a := o.EchoBeside("a")
	line := []byte(strings.Repeat("x", 1023) + "\n")
	written := 0
	// The hold's timer may write stdout meanwhile: read it under the
	// bus's lock (screenOf), as the writers write it.
	for screenOf(o, &stdout) == "" {
		if written > event.MaxHeld {
			t.Fatalf("nothing out after %d bytes, more than event.MaxHeld", written)
		}
		a.Write(wire.Stdout, line)
		written += len(line)
	}
	if out := screenOf(o, &stdout); len(out) != written || !strings.HasPrefix(out, "xxx") {
		t.Errorf("%d of %d bytes out, starting %q", len(out), written, out[:min(len(out), 10)])
	}
	if o.bus.State().Holding {
		t.Error("still holding after the flood went out")
	}
}

// TestEchoBesideLimitWaitsForTheSpawn: the time a spawn call takes (a
// loaded machine, a remote daemon) does not count toward HoldLimit, so
// that the process spawned before it is still decided with it.
func TestEchoBesideLimitWaitsForTheSpawn(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	o := newOutput(Options{Stdout: &stdout, Stderr: &bytes.Buffer{}}, nil)
	o.SpawnStarts()
	a := o.EchoBeside("a")
	o.SpawnEnds()
	a.Write(wire.Stdout, []byte("a1\n"))
	o.SpawnStarts()
	time.Sleep(3 * HoldLimit) // b's spawn is slow
	b := o.EchoBeside("b")
	o.SpawnEnds()
	b.Write(wire.Stdout, []byte("b1\n"))
	o.Settle()
	if got := screenOf(o, &stdout); got != "[a] a1\n[b] b1\n" {
		t.Errorf("stdout %q, want both decided together", got)
	}
}

// TestEchoBesideMaxHold: a recipe that does nothing but spawn, for long,
// still shows its processes' lines within MaxHold.
func TestEchoBesideMaxHold(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	o := newOutput(Options{Stdout: &stdout, Stderr: &bytes.Buffer{}}, nil)
	began := time.Now()
	for i := 0; screenOf(o, &stdout) == ""; i++ {
		if time.Since(began) > MaxHold+2*time.Second {
			t.Fatal("the held lines never went out")
		}
		o.SpawnStarts()
		time.Sleep(HoldLimit / 2)
		e := o.EchoBeside(fmt.Sprintf("p%d", i))
		o.SpawnEnds()
		e.Write(wire.Stdout, []byte("started\n"))
	}
	if waited := time.Since(began); waited < MaxHold {
		t.Errorf("out after %s, before MaxHold", waited)
	}
	if got := screenOf(o, &stdout); !strings.HasPrefix(got, "[p0] started\n[p1] started\n") {
		t.Errorf("stdout %q", got)
	}
}

// TestEchoBesideEndSettles: the run's end writes what is still held,
// before anything the end brings; --verbose's exit line of a held process
// follows its lines, as it does for a process that is not held.
func TestEchoBesideEndSettles(t *testing.T) {
	t.Parallel()
	var screen bytes.Buffer
	o := newOutput(Options{Stdout: &screen, Stderr: &screen, View: View{Verbose: true}},
		func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })
	o.start(Options{Recipe: "r.star"})
	o.Spawned(SpawnInfo{ID: "a", Command: []string{"sh"}, Host: "embedded"})
	a := o.EchoBeside("a")
	a.Write(wire.Stdout, []byte("a1\nlast"))
	a.Close()
	o.Exited("a", 3)
	o.end(&event.End{Status: "ok"})
	want := "sous: [a] started: sh\na1\nlast\nsous: [a] exited with code 3 after 0ms\n"
	if got := screen.String(); !strings.HasPrefix(got, want) {
		t.Errorf("screen %q, want it to start %q", got, want)
	}
}
