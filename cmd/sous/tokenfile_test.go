package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// TestDaemonRefusesAnOpenTokenFile: a token file other users may read or
// write (`echo "$TOKEN" > /tmp/tok` under the usual umask makes it 0644)
// gives the daemon away, so the daemon refuses it, as ssh refuses such a
// key, says how to fix it, starts nothing and leaves the file.
func TestDaemonRefusesAnOpenTokenFile(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := testutil.ShortTempDir(t)
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602} {
		for _, sub := range []string{"serve", "start"} {
			tok := filepath.Join(dir, "tok")
			if err := os.WriteFile(tok, []byte("open-token\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(tok, mode)
			sock := filepath.Join(dir, sub+".sock")
			// A daemon that accepted the file would serve (or, started,
			// outlive the command): the timeout ends it.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cmd := exec.CommandContext(ctx, bin, "daemon", sub, "--socket", sock, "--token-file", tok)
			cmd.Env = cleanEnv()
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			out, err := cmd.CombinedOutput()
			cancel()
			var ee *exec.ExitError
			want := fmt.Sprintf("--token-file %s: its mode %04o lets other users read or change the token; chmod 600 %s", tok, mode, tok)
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), want) {
				t.Errorf("%s, mode %o: %v\n%s\nwant %q", sub, mode, err, out, want)
			}
			if b, err := os.ReadFile(tok); err != nil || string(b) != "open-token\n" {
				t.Errorf("%s, mode %o: the token file is now %q, %v", sub, mode, b, err)
			}
			if c, err := net.Dial("unix", sock); err == nil {
				c.Close()
				t.Errorf("%s, mode %o: a daemon serves", sub, mode)
				stop := exec.Command(bin, "daemon", "stop", "--socket", sock) // a started one outlives the command
				stop.Env = append(cleanEnv(), "SOUS_TOKEN=open-token")
				stop.Run()
			}
		}
	}
}

// A named pipe (or /dev/stdin, <(...)) carries the token without storing
// it: its mode says nothing, so it is read whatever the mode, and it is
// not deleted (only a regular file is: unlinking /dev/stdin as root would
// break the system's).
func TestDaemonTokenFromAPipe(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := testutil.ShortTempDir(t)
	fifo, sock := filepath.Join(dir, "tok.fifo"), filepath.Join(dir, "d.sock")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	os.Chmod(fifo, 0o666)
	cmd := exec.Command(bin, "daemon", "serve", "--socket", sock, "--token-file", fifo)
	cmd.Env = cleanEnv()
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("pipe-token\n")
	w.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon: %s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop := exec.Command(bin, "daemon", "stop", "--socket", sock)
	stop.Env = append(cleanEnv(), "SOUS_TOKEN=pipe-token")
	if out, err := stop.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("stop with the piped token: %v %q", err, out)
	}
	cmd.Wait()
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the named pipe is gone: %v", err)
	}
}
