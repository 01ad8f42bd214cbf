package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/runtime"
)

// signalHelperEnv makes this test binary run one of the helpers below
// instead of the tests: each sends itself a real SIGINT, which must not
// reach the test process or the tests running in it.
const signalHelperEnv = "SOUS_TEST_SIGNAL_HELPER"

// runSignalHelper runs the test binary as the named helper (with the
// recipe path, when one is given) and returns how it ended.
func runSignalHelper(t *testing.T, test, helper string, args ...string) (*os.ProcessState, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^" + test + "$"}, args...)...)
	cmd.Env = append(os.Environ(), signalHelperEnv+"="+helper)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("helper %s: %v\n%s", helper, err, out.String())
	}
	return cmd.ProcessState, out.String()
}

// diedOf reports whether the process ended by the signal.
func diedOf(ps *os.ProcessState, sig syscall.Signal) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// TestInterruptibleIsArmedOnceArmedReturns: `sous run` asks for its
// signals on a goroutine of its own while it builds the table, and waits
// with armed() before the recipe's first line. A SIGINT right after
// armed() returns must cancel the run's context (exit 130), not kill the
// process as an unhandled SIGINT does.
func TestInterruptibleIsArmedOnceArmedReturns(t *testing.T) {
	if os.Getenv(signalHelperEnv) == "armed" {
		ctx, _, armed, stop, _ := interruptible(context.Background(), true)
		armed()
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			fmt.Println("the SIGINT did not cancel the context")
			os.Exit(3)
		}
		var in *runtime.Interrupt
		if !errors.As(context.Cause(ctx), &in) || in.Code != 130 {
			fmt.Printf("cause %v, want an interrupt with code 130\n", context.Cause(ctx))
			os.Exit(3)
		}
		stop()
		os.Exit(0)
	}
	t.Parallel()
	for i := range 20 { // the goroutine that asks for the signals races armed()
		ps, out := runSignalHelper(t, "TestInterruptibleIsArmedOnceArmedReturns", "armed")
		if !ps.Success() {
			t.Fatalf("round %d: %v\n%s", i, ps, out)
		}
	}
}

// TestSignalsGivenBackUnlessSousExits: Main, which runs sous inside a
// process that goes on, gives the signals back when the run ends, so a
// later SIGINT kills that process as it would have before; the sous
// process itself (its Factory's Exits), which exits next, leaves them
// asked for, and a SIGINT after the run's end no longer kills it.
func TestSignalsGivenBackUnlessSousExits(t *testing.T) {
	if h := os.Getenv(signalHelperEnv); h == "main" || h == "exits" {
		recipe := os.Args[len(os.Args)-1]
		var stderr bytes.Buffer
		f := newFactory(bytes.NewReader(nil), &stderr, &stderr)
		f.Exits = h == "exits"
		if code := execute(f, []string{"run", "-q", recipe}); code != 0 {
			fmt.Printf("sous run: exit %d\n%s", code, stderr.String())
			os.Exit(3)
		}
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(2 * time.Second) // a default SIGINT ends the process here
		fmt.Println("alive after the SIGINT")
		os.Exit(4)
	}
	t.Parallel()
	recipe := filepath.Join(t.TempDir(), "one.star")
	if err := os.WriteFile(recipe, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, out := runSignalHelper(t, "TestSignalsGivenBackUnlessSousExits", "main", recipe)
	if !diedOf(ps, syscall.SIGINT) {
		t.Errorf("Main: after the run, SIGINT left the process %v, want it killed by the signal\n%s", ps, out)
	}
	ps, out = runSignalHelper(t, "TestSignalsGivenBackUnlessSousExits", "exits", recipe)
	if ps.ExitCode() != 4 {
		t.Errorf("sous's own factory: after the run, SIGINT left the process %v, want it alive (exit 4)\n%s", ps, out)
	}
}
