package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// catchSignals catches the signals exec and attach act on (follow) until
// stop.
func catchSignals() (sigs chan os.Signal, stop func()) {
	sigs = make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return sigs, func() { signal.Stop(sigs) }
}

// cancelOnSignal returns a context that the first signal on sigs (from
// catchSignals) cancels, and started, which stops watching and says which
// signal that was (0: none). A signal that comes after started stays on
// sigs. (run's interruptible is the same for a run, which then lets the
// signals' default action back instead of forwarding them.)
func cancelOnSignal(ctx context.Context, sigs <-chan os.Signal) (context.Context, func() syscall.Signal) {
	ctx, cancel := context.WithCancel(ctx)
	stop := make(chan struct{})
	caught := make(chan syscall.Signal, 1)
	go func() {
		var sig syscall.Signal
		select {
		case s := <-sigs:
			sig = s.(syscall.Signal)
			cancel()
		case <-stop:
		}
		caught <- sig
	}()
	var once sync.Once
	var sig syscall.Signal
	return ctx, func() syscall.Signal {
		once.Do(func() {
			close(stop)
			sig = <-caught
			cancel()
		})
		return sig
	}
}

// killStuck is how long a forwarded signal may go unanswered (the
// connection is down, and the client reconnecting) before the next signal
// makes sous leave instead of forwarding it too.
const killStuck = time.Second

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGKILL:
		return "KILL"
	}
	return fmt.Sprint(int(s))
}
