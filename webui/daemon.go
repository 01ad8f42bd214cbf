package webui

import (
	"context"
	"sort"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// Queue is the daemon's queue of requests waiting for a person
// (*approvals.Queue): the daemon page lists it and answers through it.
type Queue interface {
	Pending() []wire.Ask
	Changed() <-chan struct{}
	Answer(a wire.AskAnswer) error
}

// QueueAnswer answers through q, as "remote".
func QueueAnswer(q Queue) AnswerFunc {
	return func(_ context.Context, a wire.AskAnswer) error {
		a.By = "remote"
		return q.Answer(a)
	}
}

// WatchQueue keeps hub's approvals those of q until ctx ends.
func WatchQueue(ctx context.Context, hub *Hub, q Queue) {
	for {
		changed := q.Changed()
		hub.SetApprovals(q.Pending())
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// DaemonFeed shows a daemon's processes on a hub: it lists them
// (process.list) every Interval and follows the output of each new one
// from a little before its end, as spawn, output and exit events.
type DaemonFeed struct {
	Hub    *Hub
	Client *client.Client
	// Interval is how often the list is read (default 1 s): the daemon
	// does not announce new processes.
	Interval time.Duration

	seen map[string]processKey // id → the process it names now
}

// processKey tells a process from a later one that reuses its id.
type processKey struct {
	pid   int
	start float64
}

// tailFrames is how many frames before a process's last one a follow
// starts from: its recent output, not all of it.
const tailFrames = 64

// Run follows the daemon until ctx ends. An error listing (the daemon
// closing) ends it.
func (f *DaemonFeed) Run(ctx context.Context) error {
	every := f.Interval
	if every <= 0 {
		every = time.Second
	}
	f.seen = make(map[string]processKey)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := f.poll(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil
		}
	}
}

// poll reads the list and follows each process not seen before, the
// newest MaxProcesses of them.
func (f *DaemonFeed) poll(ctx context.Context) error {
	var res wire.ProcessListResult
	if err := f.Client.Call(ctx, "process.list", map[string]any{}, &res); err != nil {
		return err
	}
	list := res.Processes
	sort.SliceStable(list, func(i, j int) bool { return list[i].StartTime < list[j].StartTime })
	if len(list) > MaxProcesses {
		list = list[len(list)-MaxProcesses:]
	}
	for _, p := range list {
		key := processKey{p.Pid, p.StartTime}
		if f.seen[p.ID] == key {
			continue
		}
		f.seen[p.ID] = key
		f.follow(ctx, p)
	}
	return nil
}

// follow shows one process and follows its output from tailFrames before
// its end; the frames arrive on the client's goroutine.
func (f *DaemonFeed) follow(ctx context.Context, p wire.ProcessInfo) {
	at := time.Now()
	if p.StartTime > 0 {
		at = time.Unix(0, int64(p.StartTime*float64(time.Second)))
	}
	cmd := append([]string{p.Command}, p.Args...)
	f.Hub.Handle(at, &event.Spawn{ID: p.ID, Pid: p.Pid, Command: cmd, Host: "daemon"})
	from := max(0, p.LastSeq-tailFrames)
	var out event.Output
	_, res, err := f.Client.Reattach(ctx, p.ID, from, func(fr *wire.Frame) {
		switch {
		case fr.Stream == wire.Exit:
			f.Hub.Handle(time.Now(), &event.Exit{ID: p.ID, ExitCode: fr.ExitCode})
		case len(fr.Data) > 0:
			out = event.Output{ID: p.ID, Stream: fr.Stream, Data: fr.Data}
			f.Hub.Handle(time.Now(), &out)
		}
	})
	if err == nil && !res.Found && p.ExitCode != nil {
		// Forgotten between the list and the follow: the list said how
		// it ended.
		f.Hub.Handle(time.Now(), &event.Exit{ID: p.ID, ExitCode: *p.ExitCode})
	}
}
