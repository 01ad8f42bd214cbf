package runtime

import "sync"

// Workers runs a run's blocking calls (a daemon request a builtin waits
// for through the loop, a command's stdin) on goroutines that outlive
// each call. A goroutine started per call begins with a small stack and
// grows it anew, copying it each time, for the JSON and the client code
// every call goes through: a tenth of the runner's CPU in a recipe of
// run("true"). A worker keeps the stack it grew for the next call.
//
// A call is never queued behind another: Go hands f to a worker that is
// idle, else starts a new one (up to maxWorkers; past that, a goroutine of
// its own), so a call that blocks, or that its builtin stopped waiting for,
// holds up nothing. A nil *Workers starts a goroutine per call.
type Workers struct {
	jobs chan func()   // unbuffered: a send succeeds only when a worker is idle
	stop chan struct{} // closed by Close

	mu     sync.Mutex
	alive  int // workers started and not yet ended
	closed bool
}

// maxWorkers bounds the workers a run keeps: as many calls as it has at
// once, which is two per run() (the spawn, then the stdin beside the wait)
// and as many again per parallel() item running.
const maxWorkers = 16

// NewWorkers returns a pool with no worker yet: the first call starts one.
func NewWorkers() *Workers {
	return &Workers{jobs: make(chan func()), stop: make(chan struct{})}
}

// Go runs f on an idle worker, else on a new one. It never blocks. After
// Close, or on a nil *Workers, f runs on a goroutine of its own.
func (w *Workers) Go(f func()) {
	if w == nil {
		go f()
		return
	}
	select {
	case w.jobs <- f:
		return
	default: // none idle
	}
	w.mu.Lock()
	if w.closed || w.alive >= maxWorkers {
		w.mu.Unlock()
		go f()
		return
	}
	w.alive++
	w.mu.Unlock()
	go w.work(f)
}

// work runs f, then whatever Go hands it, until Close. A worker busy when
// Close comes ends once its call returns.
func (w *Workers) work(f func()) {
	defer func() {
		w.mu.Lock()
		w.alive--
		w.mu.Unlock()
	}()
	for {
		f()
		select {
		case f = <-w.jobs:
		case <-w.stop:
			return
		}
	}
}

// Close ends the idle workers at once and the busy ones as their calls
// return; it does not wait for them (a call the run stopped waiting for
// ends when its daemon answers or its connection closes). Calls given to
// Go afterwards run on goroutines of their own. Safe to call twice.
func (w *Workers) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.stop)
	}
}

// Alive is how many workers have not ended yet.
func (w *Workers) Alive() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.alive
}
