package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
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

// TestRunUnderNohupGoesOnAfterHangup: `nohup sous run` asks the run to
// outlive a closed terminal: a SIGHUP to sous leaves the run going (it
// used to stop it, as Ctrl-C does, since sous takes the signal), while
// the recipe's processes still start with SIGHUP at its default. Without
// nohup, SIGHUP stops the run with 129.
func TestRunUnderNohupGoesOnAfterHangup(t *testing.T) {
	t.Parallel()
	const recipe = `r = sh("kill -HUP $$; echo survived", check = False)
print("child:", r.exit_code, r.stdout.strip())
sleep(2)
print("done")
`
	for _, nohup := range []bool{true, false} {
		t.Run(fmt.Sprintf("nohup %t", nohup), func(t *testing.T) {
			t.Parallel()
			dir := testutil.WriteTree(t, map[string]string{"main.star": recipe})
			argv := []string{sousBinary(t), "run", filepath.Join(dir, "main.star")}
			if nohup {
				argv = append([]string{"nohup"}, argv...)
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir, cmd.Env = dir, cleanEnv()
			stdout := &testutil.SyncBuffer{}
			cmd.Stdout, cmd.Stderr = stdout, stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(stdout.String(), "child:") {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("the recipe never got past its sh:\n%s", stdout.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			out := stdout.String()
			if !strings.Contains(out, "child: -1 \n") {
				t.Errorf("the recipe's process did not die of its SIGHUP:\n%s", out)
			}
			if nohup && (err != nil || !strings.Contains(out, "done")) {
				t.Errorf("under nohup a SIGHUP stopped the run: %v\n%s", err, out)
			}
			if !nohup && (exitCode(err) != 129 || strings.Contains(out, "done")) {
				t.Errorf("without nohup SIGHUP did not stop the run: exit %d\n%s", exitCode(err), out)
			}
		})
	}
}
