package builtins

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/seed5ad92d46/sous/runtime"
)

func fanoutEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "parallel", Journal: runtime.JournalPure, Sig: "parallel(items, fn, *, limit=None, fail_fast=False, hosts=None) -> list",
			Doc: "Calls fn(item) to start a task for each item of items (a list or tuple); fn returns a Process, a " +
				"Pending turn or a finished value. At most limit tasks run at once (None: all), a task running from " +
				"fn's call until its process exits or its turn ends. Returns, in item order, each task's outcome: a " +
				"Result for a process, a Turn for a turn, the value itself otherwise. With fail_fast=True the first " +
				"failure (a Result or Turn that is not ok, or an error in fn) stops launching, stops the running " +
				"tasks (their process groups are killed, their turns interrupted) and fails naming the item; without " +
				"it every item runs, and errors in fn fail the call once all ran, naming the items. An interrupt " +
				"stops the running tasks too. With hosts=pool (from hosts()) fn is called as fn(item, host) and each " +
				"task runs on a host of the pool with a free slot; a task whose host is lost for good starts again " +
				"on another (see hosts). Under " +
				"`sous run --shard I/N` only the items whose index % N == I run; the others' places hold None. " +
				"Permission requests, tools and hooks are answered meanwhile; a parallel event in --json reports " +
				"done, running, failed, remaining and total as tasks start and end.",
			Fn: parallel},
		{Name: "shard", Sig: "shard -> struct(index, count)",
			Doc: "This run's part of a CI matrix, from `sous run --shard I/N`: struct(index=I, count=N); " +
				"struct(index=0, count=1) without the flag. parallel() runs only its shard's items.",
			Value: shardValue},
	}
}

func shardValue(env *runtime.Env) starlark.Value {
	return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
		"index": starlark.MakeInt(env.Shard.Index),
		"count": starlark.MakeInt(env.Shard.Count),
	})
}

// task is one item's run in a parallel call.
type task struct {
	index int
	wait  Awaitable // its process or turn while it runs
	on    *poolHost // the pool's host it runs on; nil without a pool
}

// fanout is the state of one parallel call.
type fanout struct {
	c        *runtime.Call
	fn       starlark.Callable
	items    []starlark.Value
	results  []starlark.Value
	failFast bool
	pool     *Pool // nil: fn(item) on whatever host fn picks

	todo    []int   // this shard's item indexes not started yet
	running []*task // started, not ended
	total   int
	done    int
	failed  int
	// errs are the failures that fail the call: errors of fn, lost
	// processes and, with fail_fast, the first task that was not ok.
	errs []string
	// ended receives one signal per task that ends.
	ended chan struct{}
	stop  chan struct{}
	// reported is the last progress the output was told.
	reported runtime.ProgressInfo
	// lostNow are the pool's hosts lost since the last report.
	lostNow []*runtime.LostHost
	// journalTurns says the tasks' turns are journaled when every task
	// ended, in item order (a durable run, without fail_fast or a pool);
	// turns are the items whose task was a turn.
	journalTurns bool
	turns        []*task
}

func parallel(c *runtime.Call) (starlark.Value, error) {
	var items []starlark.Value
	var fn starlark.Callable
	var limit *int64
	failFast := false
	var pool *Pool
	if err := bind(c, 2, req("items", valueList(&items)), req("fn", callable(&fn)),
		opt("limit", optInteger(&limit, 1)), opt("fail_fast", boolean(&failFast)), opt("hosts", optPool(&pool))); err != nil {
		return nil, err
	}
	f := &fanout{c: c, fn: fn, items: items, results: make([]starlark.Value, len(items)), failFast: failFast,
		pool: pool, stop: make(chan struct{}), journalTurns: c.Env.Journal != nil && !failFast && pool == nil}
	defer close(f.stop)
	for i := range items {
		f.results[i] = starlark.None
		if c.Env.Shard.Mine(i) {
			f.todo = append(f.todo, i)
		}
	}
	f.total = len(f.todo)
	// A task moved off a lost host ends twice: at most slots tasks move
	// off each host, lost once.
	moves := 0
	if pool != nil {
		moves = len(pool.members) * pool.slots
	}
	f.ended = make(chan struct{}, f.total+moves)
	running := f.total
	if limit != nil && int(*limit) < running {
		running = int(*limit)
	}
	if err := f.run(running); err != nil {
		return nil, err
	}
	if err := f.takeTurns(); err != nil {
		return nil, err
	}
	if len(f.errs) > 0 {
		return nil, c.Errorf("%d of %d items failed: %s", len(f.errs), f.total, strings.Join(f.errs, "; "))
	}
	return starlark.NewList(f.results), nil
}

// run starts tasks while fewer than limit run, and collects the ends,
// until every task ended or, with fail_fast, one failed.
func (f *fanout) run(limit int) error {
	for {
		for len(f.todo) > 0 && len(f.running) < limit && !f.stopping() {
			on, err := f.place()
			if err != nil {
				f.report() // the hosts just lost
				f.stopRunning()
				return err
			}
			if on == nil && f.pool != nil {
				break // every host's slots are taken
			}
			i := f.todo[0]
			f.todo = f.todo[1:]
			if err := f.start(i, on); err != nil {
				return err
			}
		}
		f.report()
		if f.stopping() {
			f.stopRunning()
			return f.c.Errorf("%s", f.errs[0])
		}
		if len(f.running) == 0 {
			if len(f.todo) > 0 {
				// Only a parallel call inside fn, on the same pool, holds
				// every slot while this one runs nothing.
				return f.c.Errorf("no free slot in the pool for %d items: another parallel call holds them all", len(f.todo))
			}
			return nil
		}
		if err := f.c.Env.Loop.Wait(f.c.Env.Ctx, f.ended); err != nil {
			f.stopRunning()
			return f.c.Errorf("%v", errInterrupted)
		}
		f.collect()
	}
}

// stopping reports whether fail_fast saw a failure.
func (f *fanout) stopping() bool { return f.failFast && len(f.errs) > 0 }

// start calls fn for item i (on the pool's host on, with a pool) and
// follows what it returned.
func (f *fanout) start(i int, on *poolHost) error {
	args := starlark.Tuple{f.items[i]}
	if on != nil {
		args = append(args, on.host)
		on.running++
	}
	v, err := starlark.Call(f.c.Thread, f.fn, args, nil)
	if err != nil {
		if on != nil {
			on.running--
		}
		if f.c.Env.Ctx.Err() != nil {
			f.stopRunning()
			return f.c.Errorf("%v", errInterrupted)
		}
		if f.moved(i, on) {
			return nil
		}
		f.fail(i, err.Error())
		return nil
	}
	a, ok := v.(Awaitable)
	if !ok {
		if on != nil {
			on.running--
		}
		f.done++
		f.finished(i, v)
		return nil
	}
	if p, ok := a.(*Process); ok {
		// A handle a resumed run rebuilt follows its process first, as
		// in wait_all (process_durable.go): else it never ends.
		if err := p.ensureLive(f.c, false); err != nil {
			if on != nil {
				on.running--
			}
			return err
		}
	}
	if p, turn := a.(*Pending); turn {
		if err := agentsOf(f.c.Env).turnWaitRefused(); err != nil {
			return f.c.Errorf("%v", err)
		}
		if err := f.liveTurn(p); err != nil {
			return err
		}
	}
	f.running = append(f.running, &task{index: i, wait: a, on: on})
	go func() {
		select {
		case <-a.Ready():
			f.ended <- struct{}{}
		case <-f.stop:
		}
	}()
	return nil
}

// collect records the outcome of every running task that ended.
func (f *fanout) collect() {
	// A new list, not f.running filtered in place: lose counts a lost
	// host's tasks in f.running while this loop runs.
	still := make([]*task, 0, len(f.running))
	for _, t := range f.running {
		select {
		case <-t.wait.Ready():
		default:
			still = append(still, t)
			continue
		}
		if t.on != nil {
			t.on.running--
		}
		if _, turn := t.wait.(*Pending); turn && f.journalTurns {
			f.done++
			f.turns = append(f.turns, t)
			continue
		}
		v, err := t.wait.Outcome()
		if err != nil && f.moved(t.index, t.on) {
			continue
		}
		f.done++
		if err != nil {
			f.fail(t.index, err.Error())
			continue
		}
		f.finished(t.index, v)
	}
	f.running = still
}

// liveTurn journals a task's turn as a live call in a durable run with
// fail_fast or a pool: there, which task starts next depends on which
// ended first, which a resumed run could not replay, and a journal holding
// a live call is not resumed. Elsewhere the turn is taken when every task
// ended (takeTurns), or there is no journal.
func (f *fanout) liveTurn(p *Pending) error {
	if f.journalTurns || f.c.Env.Journal == nil {
		return nil
	}
	_, err := runtime.JournalCall(&runtime.Call{Env: f.c.Env, Thread: f.c.Thread, Recv: p, Host: p.session.host},
		&runtime.Entry{Name: "parallel (a task's turn)", Journal: runtime.JournalLive, Fn: func(*runtime.Call) (starlark.Value, error) {
			return starlark.None, nil
		}})
	return err
}

// takeTurns takes the Turn of each task that was a turn, in item order,
// as the turn's own Pending.wait (wait_all does the same): a durable run
// journals them so, whichever task ended first, and a resumed run
// replays them, or takes a turn the journal lacks from the CLI that went
// on with it (sdk_durable.go). Without journalTurns there are none.
func (f *fanout) takeTurns() error {
	slices.SortFunc(f.turns, func(a, b *task) int { return a.index - b.index })
	for _, t := range f.turns {
		v, err := t.wait.(*Pending).waitStep(f.c)
		var stopped *runtime.ResumeStopped
		switch {
		case f.c.Env.Ctx.Err() != nil:
			return f.c.Errorf("%v", errInterrupted)
		case errors.As(err, &stopped):
			return err // the resume stops: nothing more runs
		case err != nil:
			f.fail(t.index, err.Error())
		default:
			f.finished(t.index, v)
		}
	}
	f.report()
	return nil
}

// fail records a failure that fails the call: an error of fn or a lost
// task.
func (f *fanout) fail(i int, msg string) {
	f.failed++
	f.errs = append(f.errs, f.describe(i)+": "+msg)
}

// finished records item i's outcome. A Result or Turn that is not ok
// counts as failed; it fails the call only with fail_fast, otherwise it is
// in the list for the recipe to look at.
func (f *fanout) finished(i int, v starlark.Value) {
	f.results[i] = v
	var why string
	switch o := v.(type) {
	case *Result:
		if o.status == StatusOK {
			return
		}
		why = fmt.Sprintf("status %q, exit code %d", o.status, o.exitCode)
	case *Turn:
		if o.t.OK() {
			return
		}
		why = "turn failed (subtype " + o.t.Subtype + ")"
	default:
		return
	}
	f.failed++
	if f.failFast {
		f.errs = append(f.errs, f.describe(i)+": "+why)
	}
}

// describe names item i for an error: its index and value.
func (f *fanout) describe(i int) string {
	return fmt.Sprintf("item %d (%s)", i, truncated(f.items[i].String(), 60))
}

// place picks the pool's host for the next task: the host still in the
// pool with a free slot and the fewest tasks, nil when every slot is
// taken (or without a pool). It fails once no host is left.
func (f *fanout) place() (*poolHost, error) {
	if f.pool == nil {
		return nil, nil
	}
	for _, m := range f.pool.live() {
		if err := m.gone(); err != nil {
			f.lose(m, err, 0)
		}
	}
	if len(f.pool.live()) == 0 {
		return nil, f.c.Errorf("every host of the pool was lost, %d of %d items not done: %s",
			len(f.todo)+len(f.running), f.total, f.pool.lostTargets())
	}
	return f.pool.free(), nil
}

// moved reports whether item i's task, on the pool's host on, ended
// without an outcome because on was lost for good; the item then waits to
// start again on another host, before the items not started yet.
func (f *fanout) moved(i int, on *poolHost) bool {
	if on == nil {
		return false
	}
	err := on.gone()
	if err == nil {
		return false
	}
	if on.lost == nil {
		// From start, item i is not among the running tasks counted.
		extra := 1
		if slices.ContainsFunc(f.running, func(t *task) bool { return t.index == i }) {
			extra = 0
		}
		f.lose(on, err, extra)
	}
	f.todo = slices.Insert(f.todo, sortedPlace(f.todo, i), i)
	return true
}

// lose takes m out of the pool. Its tasks of this call that are running
// (and extra more) will start again elsewhere; the next report says so.
func (f *fanout) lose(m *poolHost, err error, extra int) {
	m.lost = err
	moving := extra
	for _, t := range f.running {
		if t.on == m {
			moving++
		}
	}
	f.lostNow = append(f.lostNow, &runtime.LostHost{Target: m.host.Target(), Error: err.Error(), Moved: moving})
}

// sortedPlace is where i goes in the ascending list xs.
func sortedPlace(xs []int, i int) int {
	at, _ := slices.BinarySearch(xs, i)
	return at
}

// report tells the output where the fan-out stands when that changed
// (a wake-up can find nothing new: two tasks that end together signal
// twice and are collected at the first).
func (f *fanout) report() {
	p := runtime.ProgressInfo{Done: f.done, Running: len(f.running), Failed: f.failed, Remaining: len(f.todo), Total: f.total}
	for _, l := range f.lostNow {
		lp := p
		lp.LostHost = l
		f.c.Env.Output.Progress(lp)
	}
	f.lostNow = nil
	if p == f.reported && p.Done > 0 {
		return
	}
	f.reported = p
	f.c.Env.Output.Progress(p)
}

// optPool binds a Pool or None.
func optPool(dst **Pool) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			*dst = nil
			return nil
		}
		p, ok := v.(*Pool)
		if !ok {
			return want("Pool from hosts() or None", v)
		}
		*dst = p
		return nil
	})
}

// stopGrace is how long a stopped task's process group has after TERM
// before KILL.
const stopGrace = 2 * time.Second

// stopRunning stops every running task (its process group is killed, its
// turn interrupted) and waits, through the loop, until they ended or
// stopSettle passed, so that nothing of the fan-out is left running, on
// a daemon that outlives the run too. It runs after an interrupt as well:
// its context is not the run's.
func (f *fanout) stopRunning() {
	if len(f.running) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(f.c.Env.Ctx), stopSettle)
	defer cancel()
	tasks := f.running
	_ = block(f.c.Env, ctx, func(ctx context.Context) error {
		var wg sync.WaitGroup
		for _, t := range tasks {
			wg.Go(func() {
				switch w := t.wait.(type) {
				case *Process:
					if w.proc != nil {
						w.proc.KillAndWait(ctx, "TERM", stopGrace, true)
					}
				case *Pending:
					if w.p != nil {
						w.session.s.Interrupt(ctx)
					}
				}
				select {
				case <-t.wait.Ready():
				case <-ctx.Done():
				}
			})
		}
		wg.Wait()
		return nil
	})
	for _, t := range tasks {
		if t.on != nil {
			t.on.running-- // its slot is free for a later call (retry(), say)
		}
	}
	f.running = nil
}

// truncated is s cut to n runes, with an ellipsis when cut.
func truncated(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// valueList binds a list or tuple.
func valueList(dst *[]starlark.Value) param {
	return paramFunc(func(v starlark.Value) error {
		seq, ok := v.(starlark.Indexable)
		if _, isStr := v.(starlark.String); !ok || isStr {
			return want("list or tuple", v)
		}
		// Grow while reading (see strList): never allocate a range's Len().
		n := seq.Len()
		out := make([]starlark.Value, 0, min(n, 64))
		for i := range n {
			out = append(out, seq.Index(i))
		}
		*dst = out
		return nil
	})
}

// callable binds a function.
func callable(dst *starlark.Callable) param {
	return paramFunc(func(v starlark.Value) error {
		fn, ok := v.(starlark.Callable)
		if !ok {
			return want("function", v)
		}
		*dst = fn
		return nil
	})
}
