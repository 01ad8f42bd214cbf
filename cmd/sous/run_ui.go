package main

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/webui"
)

// runUI is the page of one run (sous run --ui): it listens before the run
// starts, so that an address it cannot bind is refused like a bad flag,
// and learns the run's bus and answer function when the run calls Steer.
type runUI struct {
	page *webui.Server
	hub  *webui.Hub

	mu     sync.Mutex
	answer func(ctx context.Context, a wire.AskAnswer) error
}

// startRunUI listens at the --ui address with a fresh token and sets the
// run's options so that requests no rule decided wait for the page
// (Options.UI) and the page sees the run's events (Options.Steer). The
// URL goes to stderr once the run starts.
func startRunUI(value, recipe string, ropt *runtime.Options, stderr io.Writer) (*runUI, error) {
	addr, err := webui.ListenAddr(value)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	u := &runUI{hub: webui.NewHub("run", recipe, runtime.JSONEvents, nil)}
	if u.page, err = webui.Listen(addr, webui.NewToken(), u.hub, u.decide); err != nil {
		return nil, usageErrorf("%v", err)
	}
	ropt.UI = true
	ropt.Steer = func(bus *event.Bus, answer func(ctx context.Context, a wire.AskAnswer) error) error {
		u.mu.Lock()
		u.answer = answer
		u.mu.Unlock()
		u.hub.AttachRun(bus)
		fmt.Fprintf(stderr, "sous: ui at %s\n", u.page.URL())
		return nil
	}
	return u, nil
}

// decide answers a request through the run, once it has started.
func (u *runUI) decide(ctx context.Context, a wire.AskAnswer) error {
	u.mu.Lock()
	answer := u.answer
	u.mu.Unlock()
	if answer == nil {
		return wire.Errorf(wire.CodeApprovalUnknown, "no pending request %q (the run has not started)", a.ID)
	}
	return answer(ctx, a)
}

// stop ends the page's event streams, after the run's last events, and
// the server: sous is exiting.
func (u *runUI) stop() { u.page.Close() }
