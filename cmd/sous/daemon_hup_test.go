package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDaemonUnderNohupChildrenTakeHangup: a daemon started with SIGHUP
// ignored (nohup) goes on when it gets one, but its children do not
// inherit the ignored signal: one that hangs itself up dies of it, as
// under a daemon started without nohup, and process.kill with HUP ends
// it. Without nohup, SIGHUP stops the daemon as SIGTERM does.
func TestDaemonUnderNohupChildrenTakeHangup(t *testing.T) {
	t.Parallel()
	hangUp := func(s *serveProc) []string {
		return []string{"exec", "--socket", s.socket, "--", "sh", "-c", "kill -HUP $$; sleep 2; echo survived"}
	}
	t.Run("nohup", func(t *testing.T) {
		t.Parallel()
		s := startServeUnder(t, "tok", func(string) []string { return cleanEnv() }, []string{"nohup"})
		out, err := s.sousCmd(t, s.clientEnv(), hangUp(s)...).CombinedOutput()
		if code := exitCode(err); code != 129 || strings.Contains(string(out), "survived") {
			t.Errorf("a child that hung itself up: exit %d, %q; want 129 (killed by SIGHUP)", code, out)
		}
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(s.log.String(), "signal ignored") {
			if time.Now().After(deadline) {
				t.Fatalf("no word of the SIGHUP in the daemon's log:\n%s", s.log.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if out, err := s.sousCmd(t, s.clientEnv(), "exec", "--socket", s.socket, "--", "echo", "still serving").CombinedOutput(); err != nil ||
			!strings.Contains(string(out), "still serving") {
			t.Errorf("after SIGHUP: %v, %q", err, out)
		}
	})
	t.Run("without nohup", func(t *testing.T) {
		t.Parallel()
		s := startServe(t, "tok")
		out, err := s.sousCmd(t, s.clientEnv(), hangUp(s)...).CombinedOutput()
		if code := exitCode(err); code != 129 {
			t.Errorf("a child that hung itself up: exit %d, %q; want 129", code, out)
		}
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("SIGHUP did not stop the daemon:\n%s", s.log.String())
		}
		if !s.cmd.ProcessState.Success() || !strings.Contains(s.log.String(), "shutting down") {
			t.Errorf("the daemon did not stop cleanly on SIGHUP: %v\n%s", s.cmd.ProcessState, s.log.String())
		}
		if _, err := os.Stat(s.socket); !os.IsNotExist(err) {
			t.Errorf("its socket is still there: %v", err)
		}
	})
}
