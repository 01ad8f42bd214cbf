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
// stop. SIGHUP is not among them for a sous started with it ignored
// (nohup): see notifyStops.
func catchSignals() (sigs chan os.Signal, stop func()) {
	sigs = make(chan os.Signal, 4)
	_, stopHangups := notifyStops(sigs)
	return sigs, func() {
		signal.Stop(sigs)
		stopHangups()
	}
}

// notifyStops asks for the signals that stop a command on sigs: SIGINT,
// SIGTERM and SIGHUP (a closed terminal or ssh session), unless sous was
// started with SIGHUP ignored (nohup), which asks it to go on. SIGHUP is
// taken then all the same, on a channel nobody reads (a signal that finds
// it full is dropped): while nobody takes it, the runtime keeps the
// inherited SIG_IGN, and every process the embedded daemon starts would
// inherit it across exec, so that a kill with HUP would not reach them.
// ignored receives those SIGHUPs for a caller that says so (nil when
// SIGHUP stops); stop gives SIGHUP back.
func notifyStops(sigs chan<- os.Signal) (ignored <-chan os.Signal, stop func()) {
	if !signal.Ignored(syscall.SIGHUP) {
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		return nil, func() {}
	}
	dropped := make(chan os.Signal, 1)
	signal.Notify(dropped, syscall.SIGHUP)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	return dropped, func() { signal.Stop(dropped) }
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
