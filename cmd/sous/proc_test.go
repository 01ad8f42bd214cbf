package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestArgumentErrors pins the exact messages of wrong arguments: the
// builtin, the argument, what was wanted and what was given.
func TestArgumentErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{`spawn("ls", cwd=1)`, "spawn: cwd: want string, got int"},
		{`spawn(1)`, "spawn: cmd: want string or list of strings, got int"},
		{`spawn(["ls", "-l"], ["x"])`, "spawn: args: must be empty when cmd is a list"},
		{`run(["echo"], ["x"])`, "run: args: must be empty when cmd is a list"},
		{`spawn([])`, "spawn: cmd: empty command"},
		{`spawn("ls", env={"A": 1})`, `spawn: env["A"]: want string or None, got int`},
		{`spawn("ls", [], "id")`, "spawn: got 3 positional arguments, want at most 2"},
		{`spawn("ls", echo="yes")`, "spawn: echo: want bool, got string"},
		{`spawn("ls", size=(24, 80))`, "spawn: size: only valid with tty=True"},
		{`spawn("ls", tty=True, size=(24,))`, "spawn: size: want (rows, cols), got tuple"},
		{`spawn("ls", tty=True, size=(0, 80))`, "spawn: size: rows: want an int from 1 to 65535, got 0"},
		{`spawn("ls", tty=True, size="24x80")`, "spawn: size: want (rows, cols), got string"},
		{`spawn("ls", sandbox=3)`, `spawn: sandbox: want None, "read-only" or a dict with write and network, got int`}, // more in sandbox_test.go
		{`run("ls", args=[1])`, "run: args[0]: want string, got int"},
		{`run("true", timeout="1s")`, "run: timeout: want seconds (int or float), got string"},
		{`run("true", timeout=-1)`, "run: timeout: want a number of seconds between 0 and 3153600000, got -1"},
		{`run("true", output_cap=-1)`, "run: output_cap: want at least 0, got -1"},
		{`run("true", stdin=1)`, "run: stdin: want string or bytes, got int"},
		{`run("true", privileged=True, reason="x")`, "run: `true`: denied (status \"denied\")"}, // no approver: see the privileged tests
		{`sh(["ls"])`, "sh: script: want string, got list"},
		{`pipeline([])`, "pipeline: stages: want at least one stage, got none"},
		{`pipeline([["ls"], "wc"])`, "pipeline: stages[1]: want list of strings, got string"},
		{`pipeline([["ls"], [1]])`, "pipeline: stages[1][0]: want string, got int"},
		{`pipeline([["ls"], []])`, "pipeline: stages[1]: empty command"},
		{`sleep("x")`, "sleep: seconds: want seconds (int or float), got string"},
		{`wait_all([1])`, "wait_all: pendings[0]: want Process or Pending, got int"},
		{`wait_all("p")`, "wait_all: pendings: want list of Process or Pending, got string"},
		{`getenv(1)`, "getenv: name: want string, got int"},
		{`host(1)`, "host: target: want string, got int"},
		{`host("tcp://example.com")`, `host: target "tcp://example.com": want "embedded", unix:///path/to.sock`},
		{`git.worktree_create("b")`, "git.worktree_create: missing argument for path"},
		{`extract_tar("a.tar.gz")`, "extract_tar: missing argument for dest"},
		{`extract_tar("", "/tmp/x")`, `extract_tar: archive: want the path of a .tar.gz on the host, got ""`},
		{`extract_tar("/a.tar.gz", "")`, `extract_tar: dest: want a directory on the host, got ""`},
		{`reattach(7)`, "reattach: id: want string, got int"},
		{`reattach("no-such-process")`, `reattach: no process "no-such-process" on embedded`},
		{`spawn("true").write(1)`, "Process.write: data: want string or bytes, got int"},
		{`spawn("true").write("x", offset=-1)`, "Process.write: offset: want at least 0, got -1"},
		{`spawn("true").kill(1.5)`, "Process.kill: signal: want signal name or number, got float"},
		{`spawn("true").kill("BOGUS")`, `Process.kill: signal: the daemon knows no signal "BOGUS"`},
		{`spawn("true", echo=False).kill("SIGRTMIN")`, `Process.kill: signal: the daemon knows no signal "SIGRTMIN"`},
		{`spawn("true").lines("stdin")`, `Process.lines: stream: want "stdout" or "stderr", got "stdin"`},
		{`spawn("true").wait(timeout=None, bogus=1)`, `Process.wait: unexpected keyword argument "bogus"`},
		{`spawn("true").resize(24, 80)`, "Process.resize: process"},
		{`spawn(["sleep", "1"], echo=False).resize(24, 80)`, "no terminal: only a process spawned with tty=True can be resized"},
		{`spawn("true", tty=True).resize(0, 80)`, "Process.resize: rows: want at least 1, got 0"},
		{`spawn("nonexistent-program-xyz")`, "spawn: cannot start `nonexistent-program-xyz`: executable file not found in $PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			o, _ := runStar(t, tt.src+"\n")
			o.expect(t, 1, "main.star:1:", tt.want)
		})
	}
}

func TestSpawnAttributes(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
p = spawn(["sh", "-c", "echo out; echo err >&2; exit 3"], id="attrs", echo=False)
print(p.id, type(p.pid), type(p))
r = p.wait()
print(p.running, p.exit_code, r.status, r.exit_code, r.ok, repr(r.stdout), repr(r.stderr))
print(repr(p.output()), repr(p.output("stderr")), r.stages[0].exit_code, r.duration > 0)
q = spawn("true", want_pid=False, echo=False)
print(q.pid)
print(dir(p))
`)
	o.expect(t, 0)
	want := `attrs int Process
False 3 failed 3 False "out\n" "err\n"
"out\n" "err\n" 3 True
None
["close_stdin", "exit_code", "id", "kill", "lines", "output", "pause", "pid", "read_line", "resize", "resume", "running", "stop", "wait", "write"]
`
	if o.stderr != want {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}
}

func TestStdinOffsets(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
p = spawn("cat", echo=False)
print(p.write("abc", offset=0))   # applied 3
print(p.write("abc", offset=0))   # a duplicate: dropped, still 3
print(p.write("cdef", offset=2))  # overlaps: only "def" is new
print(p.write("!"))               # no offset: appended
p.close_stdin()
print(repr(p.wait().stdout))
`)
	o.expect(t, 0)
	if want := "3\n3\n6\n7\n\"abcdef!\"\n"; o.stderr != want {
		t.Errorf("log %q, want %q", o.stderr, want)
	}
	o, _ = runStar(t, `
p = spawn("cat", id="gappy", echo=False)
p.write("ab", offset=0)
p.write("x", offset=5)
`)
	o.expect(t, 1, "main.star:4:8", "Process.write: process gappy: stdin offset gap: offset ahead of applied bytes")
}

// close_stdin of a process that has exited is a no-op: whether `head -1`
// exits before the call is a race the recipe cannot win. write() still
// fails: its bytes reach nobody.
func TestCloseStdinAfterExit(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
p = spawn("head", ["-1"], id="head", echo=False)
p.write("one\n")
p.wait()
p.close_stdin()
print(repr(p.output()))
p.write("two\n")
`)
	o.expect(t, 1, "main.star:7:8", "Process.write: process head: Process not running")
	if !strings.HasPrefix(o.stderr, "\"one\\n\"\n") {
		t.Errorf("log %q", o.stderr)
	}
}

// reattach() of a process this run follows, while it writes: both handles
// get all of its output, once and in order, and both see its end. The
// spawner's handle used to fail ("replaced by a new process with the same
// id") and the reattached one to miss the start of its replay.
func TestReattachInTheSameRun(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
p = spawn("sh", ["-c", "seq 1 100000; sleep 0.2; seq 100001 200000"], echo=False)
n = 0
for line in p.lines():
    n += 1
    if n == 50000:
        q = reattach(p.id, echo=False)
want = "".join(["%d\n" % i for i in range(1, 200001)])
print(p.wait().status, q.wait().status, n, p.output() == want, q.output() == want)
`)
	o.expect(t, 0)
	if o.stderr != "ok ok 200000 True True\n" {
		t.Errorf("stderr %q", o.stderr)
	}
}

// A replay the daemon no longer holds whole (sous run's own daemon keeps the
// newest 4 MiB of each process) says so, rather than handing the recipe an
// output that starts in the middle as if it were all of it.
func TestReattachSaysTheReplayIsTruncated(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
p = spawn("head", ["-c", "8000000", "/dev/zero"], echo=False)
p.wait()
q = reattach(p.id, echo=False)
q.wait()
print(len(q.output()) < 8000000)
`)
	o.expect(t, 0, "sous: reattach ", "the daemon no longer had ", "frames of the output asked for")
	if !strings.HasSuffix(o.stderr, "True\n") {
		t.Errorf("stderr %q", o.stderr)
	}
}

func TestWaitTimeoutLeavesTheProcessRunning(t *testing.T) {
	t.Parallel()
	const token = "wait-token"
	sock, srv := socketDaemon(t, token, daemonConfig(t))
	o, _ := runStar(t, `
h = host("unix://`+sock+`", token="`+token+`")
p = h.spawn("sleep", ["30"], id="sleeper")
p.wait(timeout=0.2)
`)
	o.expect(t, 1, "main.star:4:7", "Process.wait: process sleeper still running after 0.2s")
	pr := srv.Registry().Get("sleeper")
	if pr == nil || !pr.Running() {
		t.Fatal("the process stopped when wait timed out")
	}
	pr.Signal(9)
}

func TestKillPauseResumeStop(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads process states from /proc")
	}
	o, _ := runStar(t, `
def state(p):
    stat = files.read("/proc/%d/stat" % p.pid)
    return stat[stat.rindex(")") + 2]

p = spawn("sleep", ["30"], echo=False)
p.pause()
sleep(0.05)
print("paused", state(p))
p.resume()
sleep(0.05)
print("resumed", state(p))
p.kill()
r = p.wait()
print("killed", r.exit_code, r.status)

q = spawn("sleep", ["30"], echo=False)
q.kill("KILL")
print("killed", q.wait().exit_code)

stubborn = spawn(["sh", "-c", "trap '' TERM; sleep 30"], echo=False)
sleep(0.1)
print(stubborn.stop(grace=0.2))
print(stubborn.exit_code, stubborn.running)
print(stubborn.stop())

polite = spawn("sleep", ["30"], echo=False)
print(polite.stop(grace=5, escalate=False))
`)
	o.expect(t, 0)
	want := `paused T
resumed S
killed -1 failed
killed -1
struct(already_exited = False, died = True, escalated = True, found = True)
-1 False
struct(already_exited = True, died = True, escalated = False, found = True)
struct(already_exited = False, died = True, escalated = False, found = True)
`
	if o.stderr != want {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}
}

func TestLines(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
p = spawn(["sh", "-c", "printf 'one\n'; sleep 0.1; printf 'two\r\nthree'; echo e1 >&2"], echo=False)
seen = []
for line in p.lines():
    seen.append(line)
    if line == "one":
        print("got one while the process runs:", p.running)
print(seen, list(p.lines("stderr")))
q = spawn(["sh", "-c", "echo a; echo b; echo c"], echo=False)
for line in q.lines():
    break
print("after break", q.wait().stdout.count("\n"))
`)
	o.expect(t, 0)
	want := `got one while the process runs: True
["one", "two", "three"] ["e1"]
after break 3
`
	if o.stderr != want {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	o, dir := runStar(t, `
r = run("cat", stdin="fed to stdin", echo=False)
print(repr(r.stdout))
print(repr(run("cat", echo=False).stdout))  # stdin=None: closed at once, so cat ends
r = run(["sh", "-c", "echo $FOO-${HOME:-unset}; pwd"], env={"FOO": "x", "HOME": None}, cwd=args["dir"], echo=False)
print(r.stdout.strip().replace(args["dir"], "DIR"))
r = run("sh", ["-c", "printf 1\\\\n2\\\\n3\\\\n >&2; exit 4"], check=False, echo=False)
print(r.status, r.exit_code, r.ok, r.stderr.count("\n"))
r = sh("echo $0 && exit 0", echo=False)
print(r.stdout.strip(), r.status)
# check=False returns a Result even when the command cannot start.
r = run("/no/such/program", check=False)
print(r.status, r.exit_code, r.ok, repr(r.stderr), [s.exit_code for s in r.stages])
r = run("true", cwd=args["dir"] + "/missing", check=False)
print(r.status, r.exit_code, repr(r.stderr))
r = pipeline([["/no/such/program"], ["cat"]], check=False)
print(r.status, r.exit_code, [s.exit_code for s in r.stages])
r = pipeline([["true"], ["cat"]], cwd=args["dir"] + "/missing", check=False)
print(r.status, r.exit_code, repr(r.stderr))
`)
	o.expect(t, 0)
	want := `"fed to stdin"
""
x-unset
DIR
failed 4 False 3
sh ok
failed 127 False "cannot start ` + "`/no/such/program`" + `: stat /no/such/program: no such file or directory\n" [127]
failed 127 "cannot start ` + "`true`" + `: cwd: stat DIR/missing: no such file or directory\n"
failed 127 [127, 127]
failed 127 "cannot start ` + "`true | cat`" + `: pipeline stage 1: spawn true: cwd: stat DIR/missing: no such file or directory\n"
`
	if got := strings.ReplaceAll(o.stderr, dir, "DIR"); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}

func TestRunCheckReportsCommandStatusAndStderr(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
run("sh", ["-c", "for i in $(seq 1 15); do echo line$i >&2; done; exit 2"], echo=False)
`)
	o.expect(t, 1, "main.star:2:4", "run: `sh -c 'for i in $(seq 1 15); do echo line$i >&2; done; exit 2'`: exit code 2 (status \"failed\")",
		"last lines of stderr:\n    line6\n", "    line15")
	if strings.Contains(o.stderr, "line5\n") {
		t.Errorf("more than the last lines of stderr:\n%s", o.stderr)
	}
}

// A command a signal ended fails with exit code -1, as the contract has it,
// and the message names the signal (a crash reads as one).
func TestRunCheckNamesTheSignal(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
r = sh("kill -SEGV $$", check=False)
print(r.exit_code, r.status)
sh("kill -SEGV $$")
`)
	o.expect(t, 1, "main.star:4:3", "sh: `kill -SEGV $$`: exit code -1, killed by SIGSEGV (status \"failed\")")
	if !strings.HasPrefix(o.stderr, "-1 failed\n") {
		t.Errorf("log:\n%s", o.stderr)
	}
}

func TestRunTimeoutKillsTheGroup(t *testing.T) {
	t.Parallel()
	o, dir := runStar(t, `
r = sh("sleep 30 & echo $! > " + args["dir"] + "/bg.pid; wait", timeout=0.3, check=False)
print(r.status, r.exit_code, r.duration < 3)
sh("sleep 30", timeout=0.2)
`)
	o.expect(t, 1, "main.star:4:3", "sh: `sleep 30`: timed out after 0.2s (status \"timeout\")")
	if !strings.HasPrefix(o.stderr, "timeout -1 True\n") {
		t.Errorf("log:\n%s", o.stderr)
	}
	// The background child was in the group: the timeout killed it too.
	waitGone(t, readPid(t, filepath.Join(dir, "bg.pid")), 2*time.Second)
}

func TestOutputCap(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
r = sh("printf 0123456789; printf abcdef >&2", output_cap=4)
print(repr(r.stdout), r.stdout_truncated, repr(r.stderr), r.stderr_truncated)
r = sh("head -c 100000 /dev/zero | tr '\\\\0' x", output_cap=65536, echo=False)
print(len(r.stdout), r.stdout_truncated)
r = sh("printf abc", output_cap=3, echo=False)
print(repr(r.stdout), r.stdout_truncated)
`)
	o.expect(t, 0)
	want := `"0123" True "abcd" True
65536 True
"abc" False
`
	// The live echo is never cut: all of it reached the runner.
	if !strings.HasPrefix(o.stdout, "0123456789") || !strings.Contains(o.stderr, "abcdef") {
		t.Errorf("echo was cut: stdout %q stderr %q", o.stdout, o.stderr)
	}
	if got := strings.ReplaceAll(o.stderr, "abcdef\n", ""); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}

func TestPipeline(t *testing.T) {
	t.Parallel()
	o, dir := runStar(t, `
r = pipeline([["printf", "a\nb\nc\n"], ["grep", "-v", "b"], ["wc", "-l"]], echo=False)
print(r.status, r.stdout.strip(), [s.exit_code for s in r.stages])
r = pipeline([["cat"], ["tr", "a-z", "A-Z"]], stdin="the first stage reads stdin", echo=False)
print(r.stdout)
r = pipeline([
    ["sh", "-c", "echo one; echo e1 >&2; exit 3"],
    ["sh", "-c", "cat; echo e2 >&2; exit 5"],
    ["cat"],
], check=False, echo=False)
print(r.status, r.exit_code, [s.exit_code for s in r.stages], [s.stderr for s in r.stages], repr(r.stdout), repr(r.stderr))

# Arguments are never shell syntax.
r = pipeline([["echo", "$(touch " + args["dir"] + "/pwned)", "a;b", "it's"], ["cat"]], echo=False)
print(r.stdout.strip())

# A producer ended by SIGPIPE because the next stage stopped reading is fine.
r = pipeline([["yes"], ["head", "-n", "2"]], echo=False)
print(r.status, repr(r.stdout), r.stages[0].exit_code)

r = pipeline([["sh", "-c", "printf 0123456789 >&2"]], output_cap=4, echo=False)
print(repr(r.stderr), r.stderr_truncated, repr(r.stages[0].stderr))

r = pipeline([["sleep", "30"], ["cat"]], timeout=0.3, check=False, echo=False)
print(r.status, r.exit_code)

pipeline([["true"], ["sh", "-c", "echo why >&2; exit 9"], ["cat"]], echo=False)
`)
	o.expect(t, 1, "main.star:27:9", "pipeline: `true | sh -c 'echo why >&2; exit 9' | cat`: exit code 0 (status \"failed\"); stage 2 exit code 9",
		"last lines of stderr:\n    why")
	want := `ok 2 [0, 0, 0]
THE FIRST STAGE READS STDIN
failed 0 [3, 5, 0] ["e1\n", "e2\n", ""] "one\n" ""
$(touch DIR/pwned) a;b it's
ok "y\ny\n" 141
"0123" True "0123"
timeout 143
`
	if got := strings.ReplaceAll(o.stderr, dir, "DIR"); !strings.HasPrefix(got, want) {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("a stage argument ran as a command")
	}
}

func TestPipelineRemovesItsTempDir(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cfg := daemonConfig(t)
	cfg.Env = append(os.Environ(), "TMPDIR="+tmp)
	sock, _ := socketDaemon(t, "tok", cfg)
	o, _ := runStar(t, `
r = pipeline([["sh", "-c", "echo x >&2"], ["cat"]], echo=False)
print(r.stages[0].stderr.strip())
`, "--socket", sock, "--token-file", tokenFile(t, "tok"))
	o.expect(t, 0)
	if o.stderr != "x\n" {
		t.Errorf("log %q", o.stderr)
	}
	left, _ := os.ReadDir(tmp)
	if len(left) != 0 {
		t.Errorf("the pipeline left %d entries in TMPDIR", len(left))
	}
}

func TestEchoPrefixesWhileSeveralProcessesEcho(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
run("echo", ["alone"])
# Both print while both are alive, so both are echoing at the time.
a = spawn(["sh", "-c", "sleep 0.1; echo from-a; echo err-a >&2; sleep 0.3"], id="a")
b = spawn(["sh", "-c", "sleep 0.1; echo from-b; sleep 0.3"], id="b")
wait_all([a, b])
c = spawn(["sh", "-c", "echo quiet"], id="c", echo=False)
print(repr(c.wait().stdout))
`)
	o.expect(t, 0)
	lines := o.stdoutLines()
	if lines[0] != "alone" {
		t.Errorf("a lone process got a prefix: %q", lines[0])
	}
	rest := strings.Join(lines[1:], "\n")
	if !strings.Contains(rest, "[a] from-a") || !strings.Contains(rest, "[b] from-b") || len(lines) != 3 {
		t.Errorf("stdout:\n%s", o.stdout)
	}
	if !strings.Contains(o.stderr, "[a] err-a\n") || !strings.Contains(o.stderr, "\"quiet\\n\"") {
		t.Errorf("stderr:\n%s", o.stderr)
	}
}

func TestWaitAll(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
ps = [spawn(["sh", "-c", "sleep 0.%d; exit %d" % (i, i)], echo=False) for i in range(1, 4)]
print([r.exit_code for r in wait_all(ps, timeout=5)])
slow = spawn("sleep", ["30"], id="slow", echo=False)
wait_all(pendings=[ps[0], slow], timeout=0.2)
`)
	o.expect(t, 1, "main.star:5:9", "wait_all: still waiting after 0.2s for 1 of 2: <Process slow running>")
	if o.stderr[:len("[1, 2, 3]\n")] != "[1, 2, 3]\n" {
		t.Errorf("log:\n%s", o.stderr)
	}
}

// TestEchoPrefixesStayOnOnceTwoProcessesEchoed: a line a process prints
// while it is the only one echoing has no prefix; from the moment a second
// echoing process is spawned, every line of every process carries its id,
// also after the other one ended. Before, a2 came out bare because b had
// ended by then, so the same process's lines were prefixed or not by
// timing. stdin paces the children, so the order is exact.
func TestEchoPrefixesStayOnOnceTwoProcessesEchoed(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
a = spawn(["sh", "-c", "echo a1; read go; echo a2; echo a-err >&2"], id="a")
for line in a.lines():
    break  # a1 is out, echoed while a was alone
b = spawn(["sh", "-c", "echo b1"], id="b")
b.wait()
a.write("go\n")
a.wait()
`)
	o.expect(t, 0)
	if want := "a1\n[b] b1\n[a] a2\n"; o.stdout != want {
		t.Errorf("stdout %q, want %q", o.stdout, want)
	}
	if want := "[a] a-err\n"; o.stderr != want {
		t.Errorf("stderr %q, want %q", o.stderr, want)
	}
}

// TestEchoPrefixesProcessesSpawnedTogether: processes spawned in one
// statement, before any prints, all get their prefix on every line, the
// last one's too although it prints after the others ended.
func TestEchoPrefixesProcessesSpawnedTogether(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
ps = [spawn(["sh", "-c", "read go; echo out-%d; echo err-%d >&2" % (i, i)], id="p%d" % i) for i in range(3)]
for p in ps:
    p.write("go\n")
    p.wait()
`)
	o.expect(t, 0)
	if want := "[p0] out-0\n[p1] out-1\n[p2] out-2\n"; o.stdout != want {
		t.Errorf("stdout %q, want %q", o.stdout, want)
	}
	if want := "[p0] err-0\n[p1] err-1\n[p2] err-2\n"; o.stderr != want {
		t.Errorf("stderr %q, want %q", o.stderr, want)
	}
}
