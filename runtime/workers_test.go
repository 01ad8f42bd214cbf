package runtime

import (
	"bytes"
	gort "runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// goroutineID is the id the runtime prints for the calling goroutine: the
// one way to tell, from the calls themselves, which goroutine ran them.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:gort.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// runOn runs f through w and waits for it.
func runOn(w *Workers, f func()) {
	done := make(chan struct{})
	w.Go(func() { defer close(done); f() })
	<-done
}

// workerGoroutines counts the goroutines in Workers.work, all of them
// and those idle in it (waiting for a call), from a dump of every
// goroutine: the pool does not count its idle workers, which only its
// tests would want.
func workerGoroutines() (all, idle int) {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:gort.Stack(buf, true)]), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		if !strings.Contains(frames, ".(*Workers).work(") {
			continue
		}
		all++
		top, _, _ := strings.Cut(frames, "\n")
		if strings.Contains(header, "[select") && strings.Contains(top, ".(*Workers).work(") {
			idle++
		}
	}
	return all, idle
}

func TestWorkersKeepTheirGoroutinesForCallsOneAfterAnother(t *testing.T) {
	w := NewWorkers()
	defer w.Close()
	ids := map[string]int{}
	for range 50 {
		runOn(w, func() { ids[goroutineID()]++ })
		// A worker waits for the next call a moment after its call
		// ended: a call sooner would start a second one (kept too).
		waitFor(t, "the worker idle", func() bool { _, idle := workerGoroutines(); return idle == 1 })
	}
	if len(ids) != 1 || w.Alive() != 1 {
		t.Errorf("50 calls one after another ran on %d goroutines (%v), %d workers alive; want 1", len(ids), ids, w.Alive())
	}
}

func TestWorkersNeverQueueACallBehindABlockedOne(t *testing.T) {
	w := NewWorkers()
	defer w.Close()
	release := make(chan struct{})
	blocked := make(chan struct{})
	w.Go(func() { close(blocked); <-release })
	<-blocked
	ran := make(chan struct{})
	w.Go(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a call waited for a blocked one")
	}
	// The blocked call's worker takes calls again once it returns.
	close(release)
	waitFor(t, "both workers idle", func() bool { _, idle := workerGoroutines(); return idle == 2 })
	stop := make(chan struct{})
	defer close(stop)
	for range 2 {
		w.Go(func() { <-stop })
	}
	if w.Alive() != 2 {
		t.Errorf("%d workers alive for 2 calls at once with 2 idle, want 2", w.Alive())
	}
}

func TestWorkersPastTheBoundStillRunEveryCall(t *testing.T) {
	w := NewWorkers()
	release := make(chan struct{})
	var started, ended sync.WaitGroup
	n := maxWorkers + 4
	started.Add(n)
	ended.Add(n)
	for range n {
		w.Go(func() { defer ended.Done(); started.Done(); <-release })
	}
	started.Wait() // every call runs at once, the ones past the bound too
	if got := w.Alive(); got != maxWorkers {
		t.Errorf("%d workers alive, want the bound %d", got, maxWorkers)
	}
	close(release)
	ended.Wait()
	w.Close()
	waitFor(t, "every worker ended", func() bool { all, _ := workerGoroutines(); return w.Alive() == 0 && all == 0 })
}

func TestWorkersCloseEndsIdleOnesAtOnceAndBusyOnesAfterTheirCall(t *testing.T) {
	w := NewWorkers()
	release := make(chan struct{})
	busy := make(chan struct{})
	w.Go(func() { close(busy); <-release })
	<-busy
	runOn(w, func() {}) // on a second worker, idle after
	waitFor(t, "one worker busy, one idle", func() bool { all, idle := workerGoroutines(); return all == 2 && idle == 1 })
	w.Close()
	w.Close() // twice is once
	waitFor(t, "the idle worker ended", func() bool { all, _ := workerGoroutines(); return w.Alive() == 1 && all == 1 })
	// A call after Close still runs, on a goroutine of its own.
	runOn(w, func() {})
	close(release)
	waitFor(t, "the busy worker ended after its call", func() bool { all, _ := workerGoroutines(); return w.Alive() == 0 && all == 0 })
}

func TestNilWorkersRunEachCallOnAGoroutine(t *testing.T) {
	var w *Workers
	caller := goroutineID()
	var ran string
	runOn(w, func() { ran = goroutineID() })
	if ran == "" || ran == caller {
		t.Errorf("a nil pool ran the call on goroutine %q, the caller being %q", ran, caller)
	}
}
