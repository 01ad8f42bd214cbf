package agent

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// stdioTransport speaks to the CLI through its stdin and stdout on the
// daemon: stdin writes carry offsets, so a write retried after a reconnect
// is applied exactly once; stdout frames are replayed from the last seq.
type stdioTransport struct {
	*cliProc
	mu    sync.Mutex
	lines lineSplitter
	// applied is the daemon's stdin high-water mark after the last write
	// (StdinApplied).
	applied atomic.Int64
}

func startStdio(ctx context.Context, l launch) (*stdioTransport, error) {
	t := &stdioTransport{}
	cp, err := spawnCLI(ctx, l, l.args, nil, func(cp *cliProc, data []byte, exited bool) {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.lines.feed(data, l.to.deliver)
		if exited {
			if last := t.lines.flush(); last != nil {
				l.to.deliver(last)
			}
			if t.lines.dropped > 0 {
				cp.note(fmt.Sprintf("sous dropped %d stdout lines longer than %d bytes", t.lines.dropped, maxLine))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	t.cliProc = cp
	return t, nil
}

func (t *stdioTransport) send(ctx context.Context, o outbound) error {
	n, err := t.p.Write(ctx, o.line)
	if err == nil {
		t.applied.Store(n)
	}
	return err
}

func (t *stdioTransport) stdinApplied() int64 { return t.applied.Load() }

// explainStartFailure has nothing to add: the CLI's exit or its output
// already says why.
func (t *stdioTransport) explainStartFailure(err error) error { return err }
