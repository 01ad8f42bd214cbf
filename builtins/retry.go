package builtins

import (
	"errors"
	"math/rand/v2"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
)

func retryEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "retry", Journal: runtime.JournalPure, Sig: "retry(fn, *, attempts=3, backoff=1.0, max_backoff=60.0, until=None)",
			Doc: "Calls fn() until it returns without an error (a failed builtin or fail() in fn) and, with until, " +
				"until until(value) is True; returns that value. Between attempts it waits backoff * 2**k seconds " +
				"(k = 0, 1, ...) capped at max_backoff, jittered by ±20% (never past max_backoff), answering " +
				"permission requests meanwhile. After the last attempt fails it fails with the attempt count and the " +
				"last error. An interrupt (Ctrl-C) stops it at once.",
			Fn: retry},
	}
}

// retryJitter is the share of each wait that is random, either way: waits
// of several retries that started together drift apart, and a wait is
// never much shorter than its backoff says.
const retryJitter = 0.2

func retry(c *runtime.Call) (starlark.Value, error) {
	var fn, until starlark.Callable
	attempts := int64(3)
	backoff, maxBackoff := time.Second, time.Minute
	if err := bind(c, 1, req("fn", callable(&fn)), opt("attempts", integer(&attempts, 1)),
		opt("backoff", seconds(&backoff)), opt("max_backoff", seconds(&maxBackoff)), opt("until", optCallable(&until))); err != nil {
		return nil, err
	}
	var last error
	for k := range int(attempts) {
		if k > 0 {
			d := retryWait(backoff, maxBackoff, k-1, rand.Float64())
			if err := wait(c.Env, nil, &d); err != nil && !errors.Is(err, errTimeout) {
				return nil, c.Errorf("%v", err)
			}
		}
		v, err := attempt(c, fn, until)
		if err == nil {
			return v, nil
		}
		if c.Env.Ctx.Err() != nil {
			return nil, c.Errorf("%v", errInterrupted)
		}
		last = err
	}
	return nil, c.Errorf("%d attempts failed; last: %v", attempts, last)
}

// attempt calls fn once and, when it returned, asks until about its value.
func attempt(c *runtime.Call, fn, until starlark.Callable) (starlark.Value, error) {
	v, err := starlark.Call(c.Thread, fn, nil, nil)
	if err != nil || until == nil {
		return v, err
	}
	ok, err := starlark.Call(c.Thread, until, starlark.Tuple{v}, nil)
	if err != nil {
		return nil, err
	}
	if ok != starlark.True {
		return nil, errors.New("until(" + truncated(v.String(), 60) + ") returned " + ok.String())
	}
	return v, nil
}

// retryWait is the wait after the k-th failed attempt (k from 0):
// backoff * 2**k, at most limit, moved by up to ±retryJitter by r (in
// [0, 1)), and never past limit.
func retryWait(backoff, limit time.Duration, k int, r float64) time.Duration {
	d := float64(backoff)
	for range k {
		d *= 2
		if d >= float64(limit) {
			break
		}
	}
	d = min(d, float64(limit))
	d *= 1 + retryJitter*(2*r-1)
	return time.Duration(min(d, float64(limit)))
}
