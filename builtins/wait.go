package builtins

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
)

// Awaitable is a value wait_all can wait for: a Process or an agent's
// Pending turn.
type Awaitable interface {
	starlark.Value
	// Ready is closed once the outcome is known.
	Ready() <-chan struct{}
	// Outcome is the value wait_all returns for it (a Process gives its
	// Result), or why there is none. Called only after Ready is closed.
	Outcome() (starlark.Value, error)
}

// errTimeout is what wait returns when its timeout passes first.
var errTimeout = errors.New("timed out")

// errInterrupted is what waits return when the run is interrupted.
var errInterrupted = errors.New("interrupted")

// wait blocks the recipe thread through the loop until ready delivers, the
// timeout (nil: none) passes (errTimeout) or the run is interrupted.
func wait(e *runtime.Env, ready <-chan struct{}, timeout *time.Duration) error {
	ctx := e.Ctx
	if timeout != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	if err := e.Loop.Wait(ctx, ready); err != nil {
		if e.Ctx.Err() != nil {
			return errInterrupted
		}
		return errTimeout
	}
	return nil
}

// block runs fn on another goroutine, one of the run's workers
// (runtime.Workers), and waits for it through the event loop, so that a
// daemon call that takes a while (a worktree, an archive, a kill with a
// grace) does not keep callbacks posted to the recipe thread from running.
// When ctx ends first, fn is left to finish on its own (it gets the same
// ctx) and its result is dropped; its worker takes the next call only then,
// and calls meanwhile go to another.
func block(e *runtime.Env, ctx context.Context, fn func(ctx context.Context) error) error {
	return runBlocking(e, ctx, fn, false)
}

// blockSettled is block for a call that must finish even when ctx ends
// (fn returns soon after, as client.Spawn does once it stopped what it
// started): an interrupted recipe goes on only when fn is over, so the
// run's end does not close the connection under it.
func blockSettled(e *runtime.Env, ctx context.Context, fn func(ctx context.Context) error) error {
	return runBlocking(e, ctx, fn, true)
}

func runBlocking(e *runtime.Env, ctx context.Context, fn func(ctx context.Context) error, settle bool) error {
	done := make(chan struct{})
	var err error
	e.Workers.Go(func() {
		defer close(done)
		err = fn(ctx)
	})
	if werr := e.Loop.Wait(ctx, done); werr != nil {
		if settle {
			<-done
		}
		return werr
	}
	return err
}

func waitEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "wait_all", Journal: runtime.JournalPure, Sig: "wait_all(pendings, timeout=None) -> list",
			Doc: "Waits for every Process or Pending turn in pendings (a list) and returns their Results and Turns in the " +
				"same order. When timeout (seconds) passes first, it fails naming what is still running; nothing is " +
				"stopped. Permission requests of every session are answered meanwhile.",
			Fn: waitAll},
		{Name: "sleep", Journal: runtime.JournalAnswer, Sig: "sleep(seconds)",
			Doc: "Blocks for seconds (int or float). Processes keep streaming meanwhile.",
			Fn:  sleep},
	}
}

func waitAll(c *runtime.Call) (starlark.Value, error) {
	var items []Awaitable
	var timeout *time.Duration
	if err := bind(c, 2, req("pendings", awaitables(&items)), opt("timeout", optSeconds(&timeout))); err != nil {
		return nil, err
	}
	for _, it := range items {
		if p, ok := it.(*Process); ok {
			// A handle a resumed run rebuilt follows its process first
			// (process_durable.go).
			if err := p.ensureLive(c, false); err != nil {
				return nil, err
			}
		}
		if _, turn := it.(*Pending); turn {
			if err := agentsOf(c.Env).turnWaitRefused(); err != nil {
				return nil, c.Errorf("%v", err)
			}
		}
	}
	ctx := c.Env.Ctx
	if timeout != nil {
		// One deadline for all: each wait below gets what is left of it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	for _, it := range items {
		if err := c.Env.Loop.Wait(ctx, it.Ready()); err != nil {
			if c.Env.Ctx.Err() != nil {
				return nil, c.Errorf("%v", errInterrupted)
			}
			return nil, c.Errorf("still waiting after %s for %s", formatSeconds(*timeout), pendingNames(items))
		}
	}
	out := make([]starlark.Value, len(items))
	for i, it := range items {
		if p, ok := it.(*Pending); ok {
			// Each turn's Turn as its Pending.wait gives it: a durable
			// run keeps it as it keeps p.wait()'s, and a resumed run
			// takes a turn started before it from the CLI that went on
			// with it (sdk_durable.go).
			v, err := p.waitStep(c)
			if err != nil {
				return nil, c.Errorf("%v", err)
			}
			out[i] = v
			continue
		}
		v, err := it.Outcome()
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		out[i] = v
	}
	return starlark.NewList(out), nil
}

// pendingNames lists the items whose outcome is not known yet.
func pendingNames(items []Awaitable) string {
	var names []string
	for _, it := range items {
		select {
		case <-it.Ready():
		default:
			names = append(names, it.String())
		}
	}
	return fmt.Sprintf("%d of %d: %s", len(names), len(items), strings.Join(names, ", "))
}

// awaitables binds a list or tuple of Awaitable values.
func awaitables(dst *[]Awaitable) param {
	return paramFunc(func(v starlark.Value) error {
		seq, ok := v.(starlark.Indexable)
		if _, isStr := v.(starlark.String); !ok || isStr {
			return want("list of Process or Pending", v)
		}
		// Grow while checking (see strList): never allocate a range's Len().
		n := seq.Len()
		out := make([]Awaitable, 0, min(n, 64))
		for i := range n {
			a, ok := seq.Index(i).(Awaitable)
			if !ok {
				return &argError{path: fmt.Sprintf("[%d]", i), msg: want("Process or Pending", seq.Index(i)).Error()}
			}
			out = append(out, a)
		}
		*dst = out
		return nil
	})
}

func sleep(c *runtime.Call) (starlark.Value, error) {
	var d time.Duration
	if err := bind(c, 1, req("seconds", seconds(&d))); err != nil {
		return nil, err
	}
	if !c.Since.IsZero() {
		// A resumed run does again the sleep its runner died in: only
		// what was left of it.
		d = max(0, d-time.Since(c.Since))
	}
	if err := wait(c.Env, nil, &d); err != nil && !errors.Is(err, errTimeout) {
		return nil, c.Errorf("%v", err)
	}
	return starlark.None, nil
}
