package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// oldDaemonFlags serves a daemon that hides the spawn extensions, as one
// from before them would, and returns the flags that make a run use it.
func oldDaemonFlags(t *testing.T) []string {
	t.Helper()
	cfg := daemonConfig(t)
	cfg.DisableFeatures = []string{wire.FeatureSpawnPipeline, wire.FeatureSpawnTimeout, wire.FeatureSpawnEnvUnset, wire.FeatureSpawnTTY}
	sock, _ := socketDaemon(t, "old", cfg)
	return []string{"--socket", sock, "--token-file", tokenFile(t, "old")}
}

// The stages' exit codes and stderr are real whether the daemon joins the
// stages (process.spawn.pipeline) or sh does (the fallback), and the
// output caps hold for each stage.
func TestPipelineNativeAndFallback(t *testing.T) {
	t.Parallel()
	src := `
r = pipeline([
    ["sh", "-c", "echo one; echo e1 >&2; exit 3"],
    ["sh", "-c", "cat; printf 'e2 is long' >&2; exit 5"],
    ["tr", "a-z", "A-Z"],
], check=False, echo=False, output_cap=4)
print(r.status, r.exit_code, [s.exit_code for s in r.stages], [s.stderr for s in r.stages], repr(r.stdout), r.stdout_truncated)
r = pipeline([["sh", "-c", "printf 0123456789 >&2"]], output_cap=4, echo=False)
print(repr(r.stderr), r.stderr_truncated, repr(r.stages[0].stderr))
r = pipeline([["yes"], ["head", "-n", "2"]], echo=False)
print(r.status, repr(r.stdout), r.stages[0].exit_code)
r = pipeline([["cat"], ["sh", "-c", "cat; echo $FOO-${HOME-unset} >&2"]], stdin="in", env={"FOO": "x", "HOME": None}, echo=False)
print(repr(r.stdout), repr(r.stderr))
r = pipeline([["sleep", "30"], ["cat"]], timeout=0.2, check=False, echo=False)
print(r.status, r.exit_code == r.stages[-1].exit_code, r.exit_code, len(r.stages))
r = pipeline([["cat"], ["sh", "-c", "kill -9 $$"]], check=False, echo=False)
print(r.status, r.exit_code, [s.exit_code for s in r.stages])
`
	want := `failed 0 [3, 5, 0] ["e1\n", "e2 i", ""] "ONE\n" False
"0123" True "0123"
ok "y\ny\n" 141
"in" "x-unset\n"
timeout True %s 2
failed 137 [0, 137]
`
	// The stages a timeout killed: SIGTERM's 143 from the daemon; the
	// fallback's shell is killed with them and leaves no status (-1).
	timedOut := map[string]string{"native": "143", "fallback": "-1"}
	for name, flags := range map[string][]string{"native": nil, "fallback": oldDaemonFlags(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o, _ := runStar(t, src, flags...)
			o.expect(t, 0)
			if want := fmt.Sprintf(want, timedOut[name]); o.stderr != want {
				t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
			}
		})
	}
}

// run's timeout kills the whole group: the daemon's timeout, or the
// client's where the daemon has none.
func TestRunTimeoutNativeAndFallback(t *testing.T) {
	t.Parallel()
	for name, flags := range map[string][]string{"native": nil, "fallback": oldDaemonFlags(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o, dir := runStar(t, `
r = sh("sleep 30 & echo $! > " + args["dir"] + "/bg.pid; wait", timeout=0.3, check=False)
print(r.status, r.exit_code, r.duration < 3)
`, flags...)
			o.expect(t, 0)
			if o.stderr != "timeout -1 True\n" {
				t.Errorf("log:\n%s", o.stderr)
			}
			waitGone(t, readPid(t, filepath.Join(dir, "bg.pid")), 2*time.Second)
		})
	}
}

// env values of None unset inherited variables, on either daemon.
func TestSpawnEnvUnset(t *testing.T) {
	t.Parallel()
	for name, flags := range map[string][]string{"native": nil, "fallback": oldDaemonFlags(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o, _ := runStar(t, `
p = spawn(["sh", "-c", "echo ${HOME-unset}/${PATH:+path}/$X"], env={"HOME": None, "X": "set"}, echo=False)
print(p.wait().stdout.strip())
`, flags...)
			o.expect(t, 0)
			if o.stderr != "unset/path/set\n" {
				t.Errorf("log:\n%s", o.stderr)
			}
		})
	}
}

func TestSpawnTTYRecipe(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
p = spawn(["sh", "-c", "stty size; [ -t 1 ] && echo tty; read x; stty size"], tty=True, size=(31, 97), echo=False)
for line in p.lines():
    print(repr(line))
    if line == "tty":
        p.resize(40, 120)
        p.write("\n")
print(p.wait().exit_code, p.output().count("\r\n"))
q = spawn(["sh", "-c", "stty size"], tty=True, echo=False)
print(q.wait().stdout.strip())
`)
	o.expect(t, 0)
	// Lines come without "\n" and the "\r" before it; the terminal echoes
	// the typed newline as an empty line.
	want := `"31 97"
"tty"
""
"40 120"
0 4
24 80
`
	if o.stderr != want {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}

	old, _ := runStar(t, `spawn("true", tty=True)`+"\n", oldDaemonFlags(t)...)
	old.expect(t, 1, `spawn: cannot start `+"`true`"+`: a process with a terminal (tty) needs the daemon extension "process.spawn.tty"`)
}

// pause() and resume() stop and continue the whole group: a counter in a
// grandchild stops advancing while paused.
func TestPauseStopsTheGroup(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
n = args["dir"] + "/n"
p = spawn(["sh", "-c", "(i=0; while :; do i=$((i+1)); echo $i > %s.tmp; mv %s.tmp %s; sleep 0.01; done) & wait" % (n, n, n)], echo=False)
def count():
    s = files.read(n)
    return int(s.strip()) if s else 0
while count() < 3:
    sleep(0.01)
p.pause()
sleep(0.05)
a = count()
sleep(0.2)
print("paused", count() == a)
p.resume()
# Resumed, it counts on: wait for that (up to 10 s on a loaded machine)
# rather than expect a rate in a fixed time.
for _ in range(1000):
    if count() > a + 2:
        break
    sleep(0.01)
print("resumed", count() > a + 2)
p.stop()
`)
	o.expect(t, 0)
	if o.stderr != "paused True\nresumed True\n" {
		t.Errorf("log:\n%s", o.stderr)
	}
}

// A daemon started with --allow-command refuses other programs, naming the
// command and the flag.
func TestAllowCommandRefusal(t *testing.T) {
	t.Parallel()
	cfg := daemonConfig(t)
	cfg.AllowCommands = []string{"echo"}
	sock, srv := socketDaemon(t, "tok", cfg)
	o, _ := runStar(t, `
print(run(["echo", "allowed"], echo=False).stdout.strip())
run(["sh", "-c", "true"])
`, "--socket", sock, "--token-file", tokenFile(t, "tok"))
	o.expect(t, 1, "allowed\n", "main.star:3:4",
		`run: cannot start `+"`sh -c true`"+`: Command not allowed: "sh" (this daemon allows only echo; start it with --allow-command sh to allow it)`)
	if n := srv.Stats().RefusedSpawns.Load(); n != 1 {
		t.Errorf("RefusedSpawns = %d", n)
	}
	o, _ = runStar(t, `pipeline([["echo", "x"], ["cat"]])`+"\n", "--socket", sock, "--token-file", tokenFile(t, "tok"))
	o.expect(t, 1, `Command not allowed: "cat" in pipeline stage 1`)
}

// sous daemon serve --allow-command: the flag reaches the daemon.
func TestServeAllowCommandFlag(t *testing.T) {
	t.Parallel()
	s := startServe(t, "tok", "--allow-command", "echo")
	o := sous(t, "exec", "--socket", s.socket, "--token-file", tokenFile(t, "tok"), "--", "echo", "fine")
	if o.code != 0 || o.stdout != "fine\n" {
		t.Fatalf("allowed: %+v", o)
	}
	o = sous(t, "exec", "--socket", s.socket, "--token-file", tokenFile(t, "tok"), "--", "true")
	// 126, as a shell gives a command it may not run: 1 would pass for the
	// command's own failure.
	if o.code != 126 || o.stderr != "sous: exec: cannot start true: "+`Command not allowed: "true" (this daemon allows only echo; start it with --allow-command true to allow it)`+"\n" {
		t.Fatalf("refused: %+v", o)
	}
	// The daemon's log arrives through a pipe: allow it a moment.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.log.String(), "spawn refused: command not allowed"); {
		if time.Now().After(deadline) {
			t.Fatalf("log:\n%s", s.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sous exec with a terminal as stdin closes the command's stdin at once; a
// command that has already exited by then is no error to report.
func TestExecTerminalStdinQuickCommand(t *testing.T) {
	_, pts := openPTY(t)
	for range 20 {
		var stdout, stderr testutil.SyncBuffer
		if code := Main([]string{"exec", "--", "true"}, pts, &stdout, &stderr); code != 0 || stderr.String() != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
	}
}

// sous exec with a terminal as stdin: the spawn closes the command's stdin
// (process.spawn.stdin.closed), so a command that reads it ends, and no
// process.stdin is sent; a daemon without the extension gets the close as
// a request.
func TestExecTerminalStdinClosedBySpawn(t *testing.T) {
	_, pts := openPTY(t)
	var stdout, stderr testutil.SyncBuffer
	if code := Main([]string{"exec", "--", "sh", "-c", "cat; echo eof"}, pts, &stdout, &stderr); code != 0 || stdout.String() != "eof\n" {
		t.Fatalf("embedded: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	for _, tc := range []struct {
		disable  []string
		requests int
	}{{nil, 0}, {[]string{wire.FeatureSpawnStdinClosed}, 1}} {
		cfg := daemonConfig(t)
		cfg.DisableFeatures = tc.disable
		sock, _ := socketDaemon(t, "tok", cfg)
		relay := faultproxy.Start(t, sock, faultproxy.Options{CountMethods: true})
		var stdout, stderr testutil.SyncBuffer
		code := Main([]string{"exec", "--socket", relay.Path(), "--token-file", tokenFile(t, "tok"), "--", "sh", "-c", "cat; echo eof"}, pts, &stdout, &stderr)
		if code != 0 || stdout.String() != "eof\n" {
			t.Errorf("socket %v: exit %d, stdout %q, stderr %q", tc.disable, code, stdout.String(), stderr.String())
		}
		if n := relay.Requests("process.stdin"); n != tc.requests {
			t.Errorf("socket %v: %d process.stdin requests, want %d", tc.disable, n, tc.requests)
		}
	}
	// A daemon that can close no stdin (claustrum's has neither
	// extension): the command runs all the same, with a warning, as before
	// either; one that does not read its stdin ends as it would.
	cfg := daemonConfig(t)
	cfg.DisableFeatures = []string{wire.FeatureSpawnStdinClosed, wire.FeatureStdinClose}
	sock, _ := socketDaemon(t, "tok", cfg)
	stdout, stderr = testutil.SyncBuffer{}, testutil.SyncBuffer{}
	code := Main([]string{"exec", "--socket", sock, "--token-file", tokenFile(t, "tok"), "--", "sh", "-c", "echo ran"}, pts, &stdout, &stderr)
	if code != 0 || stdout.String() != "ran\n" || !strings.Contains(stderr.String(), "cannot close the command's stdin") {
		t.Errorf("a daemon without a stdin close: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// sous exec --tty: raw mode on the local terminal while the command runs,
// its size passed on and its changes forwarded, the terminal restored after.
func TestExecTTY(t *testing.T) {
	ptm, pts := openPTY(t)
	if err := pty.Setsize(pts, &pty.Winsize{Rows: 33, Cols: 101}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"exec", "--tty", "--", "sh", "-c", `stty size; while read l; do [ "$l" = q ] && exit 5; stty size; done`},
			pts, &stdout, &stderr)
	}()
	waitOut := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(stdout.String(), want) {
			select {
			case code := <-done:
				t.Fatalf("exited %d before %q: stdout %q stderr %q", code, want, stdout.String(), stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q: stdout %q stderr %q", want, stdout.String(), stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitOut("33 101\r\n")
	raw, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
	if err != nil || raw.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) != 0 {
		t.Errorf("the local terminal is not in raw mode: %+v %v", raw, err)
	}
	// A resize of the local terminal reaches the command.
	pty.Setsize(pts, &pty.Winsize{Rows: 44, Cols: 120})
	syscall.Kill(os.Getpid(), syscall.SIGWINCH)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stdout.String(), "44 120\r\n") && time.Now().Before(deadline) {
		ptm.Write([]byte("\n")) // raw: the newline goes through as typed
		time.Sleep(50 * time.Millisecond)
	}
	waitOut("44 120\r\n")
	ptm.Write([]byte("q\n"))
	select {
	case code := <-done:
		if code != 5 {
			t.Errorf("exit code %d, stderr %q", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sous exec --tty did not return")
	}
	after, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
	if err != nil || *after != *before {
		t.Errorf("the terminal was not restored:\n%+v\nwant\n%+v", after, before)
	}
}

// Without a local terminal, --tty still gives the command one (24x80), and
// forwards stdin; a daemon without the extension is named.
func TestExecTTYWithoutLocalTerminal(t *testing.T) {
	t.Parallel()
	var stdout, stderr testutil.SyncBuffer
	code := Main([]string{"exec", "--tty", "--", "sh", "-c", "stty size; cat"}, strings.NewReader("typed\n"), &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "24 80\r\n") || !strings.Contains(stdout.String(), "typed\r\n") { // the terminal echoes input whenever it comes
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	flags := oldDaemonFlags(t)
	o := sous(t, append(append([]string{"exec", "--tty"}, flags...), "--", "true")...)
	if o.code != 1 || !strings.Contains(o.stderr, `needs the daemon extension "process.spawn.tty"`) {
		t.Fatalf("old daemon: %+v", o)
	}
}

// openPTY opens a pseudo-terminal pair, closed when the test ends; the test
// is skipped where there is none.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, pts, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptm.Close(); pts.Close() })
	return ptm, pts
}
