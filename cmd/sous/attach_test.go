package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// TestAttachInterruptDetaches: Ctrl-C (SIGINT), SIGTERM and SIGHUP to
// `sous attach` stop the watching, not the job: attach exits 128+n with a
// line saying the job runs on and how to pick it up again, and the job,
// on a real standalone daemon, still runs. (Each signal was forwarded to
// the job and killed it.) --kill-on-interrupt keeps that way.
func TestAttachInterruptDetaches(t *testing.T) {
	t.Parallel()
	d := startServe(t, "tok")
	env := d.clientEnv()
	sous := func(args ...string) string {
		t.Helper()
		out, err := d.sousCmd(t, env, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("sous %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	running := func(id string) bool {
		t.Helper()
		var list []struct {
			ID      string `json:"id"`
			Running bool   `json:"running"`
		}
		if err := json.Unmarshal([]byte(sous("ps", "--socket", d.socket, "--json")), &list); err != nil {
			t.Fatal(err)
		}
		for _, p := range list {
			if p.ID == id {
				return p.Running
			}
		}
		return false
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		id := "job-" + strings.ToLower(unix.SignalName(sig))
		sous("exec", "--socket", d.socket, "--detach", "--id", id, "--", "sh", "-c", "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done")
		t.Cleanup(func() { d.sousCmd(t, env, "kill", "--socket", d.socket, "--signal", "KILL", id).Run() })

		attach := d.sousCmd(t, env, "attach", "--socket", d.socket, id)
		stdout, err := attach.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr testutil.SyncBuffer
		attach.Stderr = &stderr
		if err := attach.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(stdout)
		if line, _ := r.ReadString('\n'); line != "tick 1\n" {
			t.Fatalf("attach read %q", line)
		}
		attach.Process.Signal(sig)
		// Read what it wrote, to its end, while it leaves.
		rest := make(chan string, 1)
		go func() {
			var b strings.Builder
			for {
				line, err := r.ReadString('\n')
				b.WriteString(line)
				if err != nil {
					rest <- b.String()
					return
				}
			}
		}()
		done := make(chan error, 1)
		go func() { done <- attach.Wait() }()
		select {
		case err := <-done:
			if code := exitCode(err); code != 128+int(sig) {
				t.Errorf("%v: attach exit %d, want %d", sig, code, 128+int(sig))
			}
		case <-time.After(10 * time.Second):
			attach.Process.Kill()
			t.Fatalf("%v: attach did not leave", sig)
		}
		seen := strings.Count("tick 1\n"+<-rest, "\n")
		// The seq of the last frame it wrote: lines and frames need not
		// match one to one.
		// (A signal that beats the end of the reattach's replay, on a
		// busy machine, gets the second line.)
		line := regexp.MustCompile(`^sous: (?:detached from (\S+), which is still running; follow it again|interrupted while attaching to (\S+), which was left as it was; follow it) with: sous attach --socket (\S+) (\S+) --from-seq (\d+)\n$`)
		m := line.FindStringSubmatch(stderr.String())
		if m == nil || m[1]+m[2] != id || m[3] != d.socket || m[4] != id {
			t.Fatalf("%v: stderr %q", sig, stderr.String())
		}
		fromSeq := m[5]
		time.Sleep(200 * time.Millisecond)
		if !running(id) {
			t.Fatalf("%v to attach stopped the job it watched", sig)
		}
		// The line's command picks up where attach left off: no line again.
		again := d.sousCmd(t, env, "attach", "--socket", d.socket, id, "--from-seq", fromSeq)
		out, err := again.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := again.Start(); err != nil {
			t.Fatal(err)
		}
		if line, _ := bufio.NewReader(out).ReadString('\n'); line != fmt.Sprintf("tick %d\n", seen+1) {
			t.Errorf("%v: reattached at %q, want tick %d", sig, line, seen+1)
		}
		again.Process.Kill()
		again.Wait()
	}

	// --kill-on-interrupt: Ctrl-C goes to the job, as with exec.
	sous("exec", "--socket", d.socket, "--detach", "--id", "doomed", "--", "sh", "-c", "while :; do echo tick; sleep 0.05; done")
	attach := d.sousCmd(t, env, "attach", "--socket", d.socket, "--kill-on-interrupt", "doomed")
	stdout, err := attach.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	if line, _ := r.ReadString('\n'); line != "tick\n" {
		t.Fatalf("attach read %q", line)
	}
	attach.Process.Signal(syscall.SIGINT)
	go r.WriteTo(new(strings.Builder))
	done := make(chan error, 1)
	go func() { done <- attach.Wait() }()
	select {
	case err := <-done:
		if code := exitCode(err); code != 130 {
			t.Errorf("--kill-on-interrupt: attach exit %d, want 130", code)
		}
	case <-time.After(10 * time.Second):
		attach.Process.Kill()
		t.Fatal("--kill-on-interrupt: attach did not leave")
	}
	if running("doomed") {
		t.Error("--kill-on-interrupt: the job runs on")
	}
}
