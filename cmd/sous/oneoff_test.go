package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// TestOneOffCommands runs every one-off command against the embedded daemon
// and against a socket daemon, checking output and exit codes.
func TestOneOffCommands(t *testing.T) {
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	targets := []struct {
		name  string
		flags []string
	}{
		{"embedded", nil},
		{"socket", []string{"--socket", sock, "--token-file", tokenFile(t, "tok")}},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			// cmd runs `sous WORDS... TARGET-FLAGS... REST...`: flags go
			// right after the command words (exec stops parsing at --).
			cmd := func(words []string, rest ...string) outcome {
				t.Helper()
				args := append(append(append([]string(nil), words...), tg.flags...), rest...)
				return sous(t, args...)
			}
			want := func(o outcome, code int, stdoutHas, stderrHas string) {
				t.Helper()
				if o.code != code || !strings.Contains(o.stdout, stdoutHas) || !strings.Contains(o.stderr, stderrHas) {
					t.Errorf("exit %d (want %d)\nstdout: %q (want %q)\nstderr: %q (want %q)", o.code, code, o.stdout, stdoutHas, o.stderr, stderrHas)
				}
			}

			want(cmd([]string{"exec"}, "--", "sh", "-c", "echo out; echo err >&2; exit 3"), 3, "out\n", "err\n")
			want(cmd([]string{"exec"}, "-e", "GREETING=hi", "--cwd", "/", "--", "sh", "-c", `echo "$GREETING from $PWD"`), 0, "hi from /\n", "")
			want(cmd([]string{"exec"}, "--timeout", "200ms", "--", "sleep", "5"), 124, "", "timed out after 200ms")
			// Killed by a signal sous did not send: 128+n, and a line naming it.
			want(cmd([]string{"exec"}, "--", "sh", "-c", "kill -SEGV $$"), 139, "", "sous: the command was killed by SIGSEGV (segmentation fault)\n")
			// A command that never started exits as in a shell (or env).
			want(cmd([]string{"exec"}, "--", "no-such-program-here"), 127, "", "sous: exec: cannot start no-such-program-here: executable file not found in $PATH\n")
			want(cmd([]string{"exec"}, "--", "/no/such/program"), 127, "", "sous: exec: cannot start /no/such/program: stat /no/such/program: no such file or directory\n")
			want(cmd([]string{"exec"}, "--", t.TempDir()), 126, "", "permission denied")
			want(cmd([]string{"exec"}, "--cwd", "/no/such/dir", "--", "pwd"), 125, "", "sous: exec: cannot start pwd: cwd: stat /no/such/dir: no such file or directory\n")

			want(cmd([]string{"rpc"}, "server.ping"), 0, `"pong": true`, "")
			// The daemon's error as it came, and which member it means.
			o := cmd([]string{"rpc"}, "files.stat", `{"path":1}`)
			if o.code != 1 || o.stdout != "" || o.stderr != "sous rpc: files.stat: Invalid params (-32602): path: want string, got number\n" {
				t.Errorf("rpc error: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
			}
			o = cmd([]string{"rpc"}, "process.kill", `{"id":"x","timeoutMs":"5"}`)
			if o.code != 1 || o.stderr != "sous rpc: process.kill: Invalid params (-32602): timeoutMs: want integer, got string\n" {
				t.Errorf("rpc error: exit %d, stderr %q", o.code, o.stderr)
			}
			o = cmd([]string{"rpc"}, "files.stat")
			if o.code != 1 || o.stderr != "sous rpc: files.stat: Invalid params (-32602): params: want an object, got none\n" {
				t.Errorf("rpc error: exit %d, stderr %q", o.code, o.stderr)
			}
			o = cmd([]string{"rpc"}, "process.kill", `{}`)
			if o.code != 1 || o.stderr != "sous rpc: process.kill: Process ID is required (-32602)\n" {
				t.Errorf("rpc error: exit %d, stderr %q", o.code, o.stderr)
			}
			want(cmd([]string{"rpc"}, "nope.x"), 1, "", "sous rpc: nope.x: Unknown namespace: nope (-32601)\n")

			repo := makeRepo(t)
			want(cmd([]string{"git", "info"}, repo), 0, "branch          main", "")
			o = cmd([]string{"git", "info"}, repo, "--json")
			var info struct {
				IsRepo bool   `json:"isRepo"`
				Root   string `json:"root"`
			}
			if err := json.Unmarshal([]byte(o.stdout), &info); err != nil || !info.IsRepo || info.Root != repo {
				t.Errorf("git info --json: %v %+v %q", err, info, o.stdout)
			}
			want(cmd([]string{"git", "status"}, repo), 0, "clean", "")
			want(cmd([]string{"git", "branches"}, repo), 0, "feature\nmain\n", "")
			notRepo := t.TempDir()
			// --json prints the daemon's result as it came.
			if o := cmd([]string{"git", "info"}, notRepo, "--json"); o.code != 1 ||
				o.stdout != "{\n  \"isRepo\": false,\n  \"repoSlug\": \"\",\n  \"defaultBranch\": \"\"\n}\n" {
				t.Errorf("git info --json outside a repository: exit %d, stdout %q", o.code, o.stdout)
			}
			for _, q := range []string{"info", "status", "branches"} {
				// A script must be able to tell: exit 1, as files stat of a missing path.
				if o := cmd([]string{"git", q}, notRepo); o.code != 1 || o.stdout != "" || o.stderr != "sous: "+notRepo+": not a git repository (nor inside one)\n" {
					t.Errorf("git %s outside a repository: exit %d, stdout %q, stderr %q", q, o.code, o.stdout, o.stderr)
				}
			}
			wt := filepath.Join(t.TempDir(), "wt")
			want(cmd([]string{"git", "worktree", "create"}, "topic", wt, "--repo", repo, "--source", "feature"), 0, "created "+wt+" on new branch topic from feature\n", "")
			want(cmd([]string{"git", "worktree", "create"}, "topic2", wt, "--repo", repo), 1, "", "worktree_add_failed")
			want(cmd([]string{"git", "worktree", "remove"}, wt, "--repo", repo), 0, "removed", "")
			// topic exists now: it is checked out, and --source does not apply.
			want(cmd([]string{"git", "worktree", "create"}, "topic", wt, "--repo", repo, "--source", "main"), 0, "created "+wt+" on existing branch topic (--source main not used)\n", "")
			// Work the removal would lose needs --force; so does a path that is no worktree.
			os.WriteFile(filepath.Join(wt, "notes.txt"), []byte("unsaved"), 0o644)
			want(cmd([]string{"git", "worktree", "remove"}, wt, "--repo", repo), 1, "", wt+": uncommitted changes that removing it would lose:\n  ?? notes.txt\n(--force removes it anyway)\n")
			if _, err := os.Stat(filepath.Join(wt, "notes.txt")); err != nil {
				t.Fatalf("the refused removal lost the file: %v", err)
			}
			want(cmd([]string{"git", "worktree", "remove"}, t.TempDir(), "--repo", repo), 1, "", "' is not a worktree of "+repo+" (--force asks the daemon to remove it anyway)\n")
			want(cmd([]string{"git", "worktree", "remove"}, wt, "--repo", repo, "--force"), 0, "removed", "")
			want(cmd([]string{"git", "worktree", "create"}, "x", wt, "--repo", t.TempDir()), 1, "", "not a git repository (not_a_repo)")

			dir := t.TempDir()
			file := filepath.Join(dir, "a.txt")
			os.WriteFile(file, []byte("content\n"), 0o644)
			os.WriteFile(filepath.Join(dir, ".hidden"), nil, 0o644)
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			want(cmd([]string{"files", "stat"}, file), 0, "-rw-r--r-- 8", "")
			// The answer is on stdout; stderr does not say it again.
			if o := cmd([]string{"files", "stat"}, filepath.Join(dir, "missing")); o.code != 1 || o.stdout != "does not exist\n" || o.stderr != "" {
				t.Errorf("files stat of a missing path: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
			}
			want(cmd([]string{"files", "read"}, filepath.Join(dir, "missing")), 1, "", filepath.Join(dir, "missing")+": no such file")
			want(cmd([]string{"files", "list"}, filepath.Join(dir, "missing")), 1, "", "sous: files.list: open "+filepath.Join(dir, "missing")+": no such file or directory\n")
			o = cmd([]string{"files", "list"}, dir)
			if o.code != 0 || o.stdout != "a.txt\nsub/\n" {
				t.Errorf("files list: exit %d, %q", o.code, o.stdout)
			}
			want(cmd([]string{"files", "read"}, file), 0, "content\n", "")
			// Bytes that are not UTF-8 cannot cross the protocol's JSON
			// string: files read refuses rather than print a corrupted copy.
			// A real U+FFFD is text like any other.
			binary := filepath.Join(dir, "b.bin")
			os.WriteFile(binary, []byte("a\xff\xfeb\n"), 0o644)
			want(cmd([]string{"files", "read"}, binary), 1, "", "not UTF-8 text (5 bytes on disk")
			if o := cmd([]string{"files", "read"}, binary); o.stdout != "" {
				t.Errorf("files read of a binary file printed %q", o.stdout)
			}
			replacement := filepath.Join(dir, "fffd.txt")
			os.WriteFile(replacement, []byte("a\uFFFDb\n"), 0o644)
			want(cmd([]string{"files", "read"}, replacement), 0, "a\uFFFDb\n", "")
			want(cmd([]string{"files", "read"}, file, "--max-bytes", "3"), 1, "", "files.read: file exceeds maxBytes")
			want(cmd([]string{"files", "validate"}, dir), 0, "valid directory", "")

			archive := filepath.Join(t.TempDir(), "r.tar.gz")
			if out, err := exec.Command("tar", "czf", archive, "-C", dir, "a.txt", "sub").CombinedOutput(); err != nil {
				t.Fatalf("tar: %v %s", err, out)
			}
			dest := filepath.Join(t.TempDir(), "dest")
			want(cmd([]string{"files", "extract-tar"}, archive, dest), 0, "extracted 1 file\n", "")
			if _, err := os.Stat(filepath.Join(dest, ".synced")); err != nil {
				t.Errorf("no .synced marker: %v", err)
			}
			want(cmd([]string{"files", "extract-tar"}, archive, "/"), 1, "", "destDir must be an absolute, non-root path: /")

			want(cmd([]string{"attach"}, "no-such-id"), 1, "", `no process with id "no-such-id"`)
			want(cmd([]string{"kill"}, "no-such-id"), 1, "", `sous: kill: no process with id "no-such-id" on `)
			want(cmd([]string{"kill"}, "no-such-id", "--signal", "BOGUS"), 2, "", `kill: --signal: unknown signal "BOGUS"`)
			want(cmd([]string{"kill"}, "no-such-id", "--wait"), 1, "", `no process with id "no-such-id"`)
			want(cmd([]string{"ps"}), 0, "ID", "")

			if tg.name == "embedded" {
				want(cmd([]string{"exec"}, "--detach", "--", "true"), 2, "", "--detach needs a daemon that outlives sous")
				return
			}
			// A socket daemon keeps processes across commands: detach, list,
			// kill, attach.
			want(cmd([]string{"exec"}, "--detach", "--id", "napper", "--", "sh", "-c", "echo napping; exec sleep 30"), 0, "napper\n", "")
			want(cmd([]string{"ps"}), 0, "napper", "")
			// Shell completion offers the daemon's ids.
			want(cmd([]string{"__complete", "attach"}, "nap"), 0, "napper\n:4\n", "")
			want(cmd([]string{"__complete", "kill"}, "nap"), 0, "napper\n:4\n", "")
			// Its id is taken while it runs: a second spawn would replace it.
			want(cmd([]string{"exec"}, "--detach", "--id", "napper", "--", "true"), 1, "", `exec: a process with id "napper" is running on unix://`)
			want(cmd([]string{"ps"}), 0, "napper", "")
			// An id with a newline stays in its cell, quoted.
			want(cmd([]string{"exec"}, "--id", "two\nlines", "--", "true"), 0, "", "")
			want(cmd([]string{"ps"}), 0, `"two\nlines"`, "")
			// Its output is in (frame 1) before it is killed.
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(cmd([]string{"ps"}, "--json").stdout, `"lastSeq": 1`); {
				if time.Now().After(deadline) {
					t.Fatal("napper's output never reached the daemon")
				}
				time.Sleep(10 * time.Millisecond)
			}
			want(cmd([]string{"kill"}, "napper", "--wait", "--grace", "2s"), 0, "napper exited", "")
			// Killed by a signal attach did not send: 128+n, and a line naming it
			// (exec asked the daemon to say which, process.spawn.exitsignal).
			o = cmd([]string{"attach"}, "napper")
			if o.code != 143 || o.stdout != "napping\n" || o.stderr != "sous: the command was killed by SIGTERM (terminated)\n" {
				t.Errorf("attach of a killed process: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
			}
			// Frame 1 is the only output: replay after it has none. From the
			// exit frame (2) on, or past it, attach still learns how it ended.
			for _, from := range []string{"1", "2", "50"} {
				if o = cmd([]string{"attach"}, "napper", "--from-seq", from); o.code != 143 || o.stdout != "" {
					t.Errorf("attach --from-seq %s: exit %d, stdout %q, stderr %q", from, o.code, o.stdout, o.stderr)
				}
			}
		})
	}
}

// TestOneOffBadInput: missing arguments are usage errors (exit 2); a wrong
// token and an unreachable daemon are one line naming what to fix.
func TestOneOffBadInput(t *testing.T) {
	sock, _ := socketDaemon(t, "right", daemonConfig(t))
	emptyToken := filepath.Join(t.TempDir(), "token")
	os.WriteFile(emptyToken, nil, 0o600)
	for _, tt := range []struct {
		args      []string
		code      int
		stderrHas string
	}{
		{[]string{"exec"}, 2, "missing the command to run"},
		{[]string{"attach"}, 2, "want 1 argument(s), got 0"},
		{[]string{"kill"}, 2, "want 1 argument(s), got 0"},
		{[]string{"rpc"}, 2, "want METHOD"},
		{[]string{"rpc", "files.stat", "{oops"}, 2, "params are not valid JSON"},
		{[]string{"rpc", "files.stat", " "}, 2, "rpc: params are empty: give a JSON value"},
		{[]string{"git", "worktree", "create", "only-branch"}, 2, "wrong number of arguments"},
		{[]string{"files", "stat"}, 2, "wrong number of arguments"},
		{[]string{"files", "extract-tar", "a.tar.gz"}, 2, "wrong number of arguments"},
		{[]string{"exec", "-e", "NOEQUALS", "--", "true"}, 2, `-e "NOEQUALS": want KEY=VALUE`},
		{[]string{"attach", "x", "--from-seq", "-1"}, 2, "--from-seq must be 0 or more"},
		{[]string{"ps", "--socket", sock, "--remote", "ssh://h"}, 2, "either --socket or --remote"},
		{[]string{"exce"}, 2, "Did you mean this?"},
		{[]string{"git", "stauts"}, 2, "unknown command \"stauts\" for \"sous git\"\n\nDid you mean this?\n\tstatus"},
		{[]string{"files", "bogus"}, 2, `unknown command "bogus" for "sous files"`},
		{[]string{"daemon", "bogus"}, 2, `unknown command "bogus" for "sous daemon"`},
		{[]string{"git", "worktree", "bogus"}, 2, `unknown command "bogus" for "sous git worktree"`},
		{[]string{"completion", "tcsh"}, 2, `unknown command "tcsh" for "sous completion"`},
		{[]string{"git", "worktree", "create", "b"}, 2, "usage: sous git worktree create BRANCH PATH"},
		{[]string{"rpc", "server.ping", "--socket", sock, "--token-file", "/no/such/token"}, 1, "read token file"},
		{[]string{"rpc", "server.ping", "--socket", sock, "--token-file", emptyToken}, 1, "--token-file " + emptyToken + " is empty"},
		{[]string{"rpc", "server.ping", "--socket", sock}, 1, "the daemon requires a token and none was given: set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN"},
		{[]string{"ps", "--socket", filepath.Join(t.TempDir(), "none.sock")}, 1, "connect to daemon at"},
	} {
		o := sous(t, tt.args...)
		if o.code != tt.code || !strings.Contains(o.stderr, tt.stderrHas) {
			t.Errorf("sous %s: exit %d (want %d), stderr %q (want %q)", strings.Join(tt.args, " "), o.code, tt.code, o.stderr, tt.stderrHas)
		}
		if tt.code == 1 && strings.Count(strings.TrimSpace(o.stderr), "\n") > 0 {
			t.Errorf("sous %s: the error is not one line: %q", strings.Join(tt.args, " "), o.stderr)
		}
	}
	if o := sous(t, "--version"); o.code != 0 || !strings.HasPrefix(o.stdout, "sous ") || strings.Count(o.stdout, "\n") != 1 {
		t.Errorf("sous --version: exit %d, stdout %q", o.code, o.stdout)
	}
}

// When the reader of sous exec's stdout (or stderr) goes away (| head -1),
// the command gets SIGPIPE as it would in a plain pipeline and sous exits
// 141, on a socket daemon too, where the command would otherwise run on
// unread.
func TestExecReaderGoneStopsTheCommand(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	sock, srv := socketDaemon(t, "tok", daemonConfig(t))
	for _, stream := range []string{"stdout", "stderr"} {
		for _, target := range [][]string{nil, {"--socket", sock}} {
			id := "producer-" + stream
			cmd := exec.Command(bin, append(append([]string{"exec", "--id", id}, target...), "--", "sh", "-c", "exec yes y >&"+map[string]string{"stdout": "1", "stderr": "2"}[stream])...)
			cmd.Env = append(cleanEnv(), "SOUS_TOKEN=tok")
			pipe := cmd.StdoutPipe
			if stream == "stderr" {
				pipe = cmd.StderrPipe
			}
			out, err := pipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			out.Close() // as head -1 does
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if exitCode(err) != 141 || line != "y\n" {
					t.Errorf("%s %v: exit %v after reading %q, want 141", stream, target, err, line)
				}
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("%s %v: sous did not stop after its reader went away", stream, target)
			}
			if target != nil {
				if p := srv.Registry().Get(id); p == nil || p.Running() {
					t.Errorf("the socket daemon's %s is still running (or unknown): %v", id, p)
				}
			}
		}
	}
}

// A command that ignores SIGPIPE (and the EPIPE errors that follow) is
// SIGKILLed once the grace has passed after sous exec's reader went away:
// nothing will ever read it. On the embedded daemon the command writes
// sous's stdout itself (Mirror.Direct), and sous watches the pipe's reader
// to know.
func TestExecReaderGoneKillsAnIgnorer(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	for _, target := range [][]string{nil, {"--socket", sock}} {
		pidFile := filepath.Join(t.TempDir(), "pid")
		args := append(append([]string{"exec"}, target...), "--", "sh", "-c", `echo $$ > "$0"; trap "" PIPE; while :; do echo y 2>/dev/null; sleep 0.01; done`, pidFile)
		cmd := exec.Command(bin, args...)
		cmd.Env = append(cleanEnv(), "SOUS_TOKEN=tok")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		bufio.NewReader(out).ReadString('\n')
		out.Close()
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if exitCode(err) != 141 {
				t.Errorf("%v: exit %v, want 141", target, err)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: sous did not stop a command that ignores SIGPIPE", target)
		}
		if took := time.Since(start); took < client.TimeoutGrace-time.Second {
			t.Errorf("%v: stopped after %s: the command was not given the grace", target, took)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		// Reaped by the daemon before sous exits, so no zombie answers.
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid <= 0 || syscall.Kill(pid, 0) == nil {
			t.Errorf("%v: the command (pid %d) still runs", target, pid)
		}
	}
}

// sous attach only watches: when its reader goes away it exits 141 and
// leaves the process running, as it found it.
func TestAttachReaderGoneLeavesTheProcess(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	sock, srv := socketDaemon(t, "tok", daemonConfig(t))
	env := append(cleanEnv(), "SOUS_TOKEN=tok")
	detach := exec.Command(bin, "exec", "--detach", "--id", "watched", "--socket", sock, "--", "sh", "-c", "while :; do echo tick; sleep 0.05; done")
	detach.Env = env
	if out, err := detach.CombinedOutput(); err != nil {
		t.Fatalf("exec --detach: %v %s", err, out)
	}
	t.Cleanup(func() { srv.Registry().Get("watched").Signal(syscall.SIGKILL) })
	attach := exec.Command(bin, "attach", "--socket", sock, "watched")
	attach.Env = env
	out, err := attach.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "tick\n" {
		t.Fatalf("attach read %q", line)
	}
	out.Close()
	done := make(chan error, 1)
	go func() { done <- attach.Wait() }()
	select {
	case err := <-done:
		if exitCode(err) != 141 {
			t.Errorf("attach: exit %v, want 141", err)
		}
	case <-time.After(15 * time.Second):
		attach.Process.Kill()
		t.Fatal("attach did not stop after its reader went away")
	}
	time.Sleep(200 * time.Millisecond)
	if p := srv.Registry().Get("watched"); p == nil || !p.Running() {
		t.Errorf("attach stopped the process it watched: %v", p)
	}
}

// sous exec's output is byte-exact whether its stdout and stderr are pipes
// or files, on either kind of daemon: the embedded daemon's command writes
// both itself (mirror.Spec.Direct); a socket daemon tees into the pipes
// and writes to the files itself (process.spawn.mirror.files), which its
// count of mirrored bytes shows: every byte, none of them through frames.
func TestExecStreamsExact(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	sock, srv := socketDaemon(t, "tok", daemonConfig(t))
	dir := t.TempDir()
	src, data := randomDataFile(t, dir, 5<<20+3)
	for _, target := range [][]string{nil, {"--socket", sock}} {
		for _, toFiles := range []bool{false, true} {
			args := append(append([]string{"exec"}, target...), "--", "sh", "-c", `cat "$0"; cat "$0" >&2; exit 5`, src)
			cmd := exec.Command(bin, args...)
			cmd.Env = append(cleanEnv(), "SOUS_TOKEN=tok")
			var stdout, stderr bytes.Buffer // through pipes
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			var files [2]*os.File
			if toFiles {
				for i := range files {
					f, err := os.Create(filepath.Join(dir, fmt.Sprint("out", i)))
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					files[i] = f
				}
				cmd.Stdout, cmd.Stderr = files[0], files[1]
			}
			mirroredBefore := srv.Stats().MirroredBytes.Load()
			err := cmd.Run()
			if mirrored := srv.Stats().MirroredBytes.Load() - mirroredBefore; target != nil && mirrored != 2*int64(len(data)) {
				t.Errorf("socket daemon, files %v: the daemon mirrored %d bytes, want all %d of both streams", toFiles, mirrored, 2*len(data))
			}
			if toFiles {
				for i, b := range []*bytes.Buffer{&stdout, &stderr} {
					got, rerr := os.ReadFile(files[i].Name())
					if rerr != nil {
						t.Fatal(rerr)
					}
					b.Write(got)
				}
			}
			if exitCode(err) != 5 || !bytes.Equal(stdout.Bytes(), data) || !bytes.Equal(stderr.Bytes(), data) {
				t.Errorf("target %v, files %v: exit %v, stdout %d bytes (exact %v), stderr %d bytes (exact %v), want %d each",
					target, toFiles, err, stdout.Len(), bytes.Equal(stdout.Bytes(), data), stderr.Len(), bytes.Equal(stderr.Bytes(), data), len(data))
			}
		}
	}
}

// sous exec hands its stdin to the command when it is a pipe or a regular
// file (process.spawn.mirror.stdin), as a shell's redirection would, and
// forwards anything else (here a socket) through process.stdin; either way
// the command reads it exactly, on either kind of daemon.
func TestExecStdinExact(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	dir := t.TempDir()
	src, data := randomDataFile(t, dir, 3<<20+5)
	for _, target := range [][]string{nil, {"--socket", sock}} {
		for _, kind := range []string{"pipe", "file", "socket"} {
			args := append(append([]string{"exec"}, target...), "--", "sh", "-c", `readlink /proc/self/fd/0 >&2; exec cat`)
			cmd := exec.Command(bin, args...)
			cmd.Env = append(cleanEnv(), "SOUS_TOKEN=tok")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			wantFd0 := "pipe:"
			switch kind {
			case "pipe":
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				fi, err := r.Stat()
				if err != nil {
					t.Fatal(err)
				}
				go func() { w.Write(data); w.Close() }()
				cmd.Stdin, wantFd0 = r, fmt.Sprintf("pipe:[%d]", fi.Sys().(*syscall.Stat_t).Ino)
			case "file":
				f, err := os.Open(src)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cmd.Stdin, wantFd0 = f, src
			case "socket":
				fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
				defer theirs.Close()
				go func() { ours.Write(data); ours.Close() }()
				cmd.Stdin = theirs // the daemon's pipe, fed with process.stdin
			}
			err := cmd.Run()
			fd0, _, _ := strings.Cut(stderr.String(), "\n")
			if err != nil || !bytes.Equal(stdout.Bytes(), data) || !strings.HasPrefix(fd0, wantFd0) {
				t.Errorf("target %v, stdin a %s: %v, stdout %d bytes (exact %v) of %d; the command's stdin %q, want %s...",
					target, kind, err, stdout.Len(), bytes.Equal(stdout.Bytes(), data), len(data), fd0, wantFd0)
			}
		}
	}
}

// A command that ignores SIGPIPE goes on after its stderr's reader went
// away, as in a shell: its stdout still has a reader, so sous neither kills
// it nor cuts its output, and its own exit status stands.
func TestExecStderrReaderGoneLetsAnIgnorerFinish(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	script := `trap "" PIPE; echo diag >&2; sleep 0.3; echo more >&2; for i in 1 2 3 4 5; do echo out $i; sleep 0.1; done; exit 3`
	for _, target := range [][]string{nil, {"--socket", sock}} {
		cmd := exec.Command(bin, append(append([]string{"exec"}, target...), "--", "sh", "-c", script)...)
		cmd.Env = append(cleanEnv(), "SOUS_TOKEN=tok")
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		errPipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(errPipe).ReadString('\n')
		errPipe.Close()
		err = cmd.Wait()
		if line != "diag\n" || exitCode(err) != 3 || stdout.String() != "out 1\nout 2\nout 3\nout 4\nout 5\n" {
			t.Errorf("%v: read %q from stderr; exit %v, stdout %q; want exit 3 and all five lines", target, line, err, stdout.String())
		}
	}
}

// A table cell shows a value as it is unless the value could break the
// table or the terminal: C0 and C1 controls and bytes that are not UTF-8
// are shown quoted.
func TestCellQuotesWhatCouldBreakATable(t *testing.T) {
	for in, want := range map[string]string{
		"build-1":  "build-1",
		"naïve":    "naïve",
		"a\tb":     `"a\tb"`,
		"a\u0085b": `"a\u0085b"`,
		"a\xffb":   `"a\xffb"`,
		"esc\x1b[": `"esc\x1b["`,
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %s, want %s", in, got, want)
		}
	}
}

// randomDataFile writes n random bytes to a file in dir.
func randomDataFile(t *testing.T, dir string, n int) (path string, data []byte) {
	t.Helper()
	data = make([]byte, n)
	rand.Read(data)
	path = filepath.Join(dir, "data")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}
