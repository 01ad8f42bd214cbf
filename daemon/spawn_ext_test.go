package daemon

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// stageOutput concatenates the stderr frames of one pipeline stage.
func stageOutput(frames []wire.Frame, stage int) string {
	var b []byte
	for _, f := range frames {
		if f.Stream == wire.Stderr && f.StageIndex() == stage {
			b = append(b, f.Data...)
		}
	}
	return string(b)
}

// waitStdout waits until the stdout of process id contains want.
func (c *rawClient) waitStdout(id, want string) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("stdout %q of %s", want, id), 10*time.Second, func() bool {
		var b []byte
		var f wire.Frame
		for _, l := range c.frames[id] {
			if _, err := wire.ParseFrame(l, &f); err == nil && f.Stream == wire.Stdout {
				b = append(b, f.Data...)
			}
		}
		return strings.Contains(string(b), want)
	})
}

func TestSpawnPipeline(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	// Three stages: stdin reaches the first, stdout is the last's, each
	// stage's stderr is tagged with its index, each stage's code is kept.
	params := mustJSON(map[string]any{"id": "pl", "wantPid": true, "pipeline": [][]string{
		{"sh", "-c", "cat; echo e0 >&2; exit 3"},
		{"sh", "-c", "tr a-z A-Z; echo e1 >&2"},
		{"sh", "-c", "cat; echo e2 >&2; exit 5"},
	}})
	res := c.result("process.spawn", params)
	m := regexp.MustCompile(`^\{"success":true,"pid":(\d+),`).FindStringSubmatch(res)
	if m == nil {
		t.Fatalf("spawn: %s", res)
	}
	// Every stage runs in the group the first stage leads.
	leader, _ := strconv.Atoi(m[1])
	pr := d.srv.Registry().Get("pl")
	if pr.Pid != leader {
		t.Fatalf("pid %d, want the first stage's %d", leader, pr.Pid)
	}
	pids := pr.StagePids()
	if len(pids) != 3 || pids[0] != leader {
		t.Fatalf("stage pids %v", pids)
	}
	for _, pid := range pids {
		if pgid, _ := syscall.Getpgid(pid); pgid != leader {
			t.Errorf("stage pid %d is in group %d, want %d", pid, pgid, leader)
		}
	}
	c.result("process.stdin", `{"id":"pl","data":"`+base64.StdEncoding.EncodeToString([]byte("hello\n"))+`","close":true}`)
	frames := c.waitExit("pl")
	checkSeqs(t, frames, 1)
	if got := string(output(frames, wire.Stdout)); got != "HELLO\n" {
		t.Errorf("stdout %q", got)
	}
	for i, want := range []string{"e0\n", "e1\n", "e2\n"} {
		if got := stageOutput(frames, i); got != want {
			t.Errorf("stage %d stderr %q, want %q", i, got, want)
		}
	}
	last := frames[len(frames)-1]
	if last.ExitCode != 5 || !slices.Equal(last.StageCodes, []int{3, 0, 5}) || last.TimedOut {
		t.Errorf("exit frame %+v", last)
	}
	raw := c.rawFrames("pl")
	if want := fmt.Sprintf(`{"type":"stream","processId":"pl","stream":"exit","seq":%d,"exitCode":5,"stageExitCodes":[3,0,5]}`+"\n", len(frames)); string(raw[len(raw)-1]) != want {
		t.Errorf("exit frame\n got %s\nwant %s", raw[len(raw)-1], want)
	}
	for _, line := range raw {
		if bytes.Contains(line, []byte(`"stream":"stderr"`)) && !regexp.MustCompile(`,"data":"[^"]*","stage":[0-2]\}\n$`).Match(line) {
			t.Errorf("stderr frame without its stage: %s", line)
		}
		if bytes.Contains(line, []byte(`"stream":"stdout"`)) && bytes.Contains(line, []byte(`"stage"`)) {
			t.Errorf("stdout frame with a stage: %s", line)
		}
	}
	// The replay keeps the stages.
	c2 := d.dial()
	c2.result("process.reattach", `{"id":"pl","fromSeq":0}`)
	again := c2.waitExit("pl")
	if stageOutput(again, 1) != "e1\n" || !slices.Equal(again[len(again)-1].StageCodes, []int{3, 0, 5}) {
		t.Errorf("replayed frames %+v", again)
	}

	// A producer ended by SIGPIPE reports 141, as a shell would; the last
	// stage's code is the process's.
	c.result("process.spawn", `{"id":"sigpipe","pipeline":[["yes"],["head","-n","2"]]}`)
	frames = c.waitExit("sigpipe")
	if got := string(output(frames, wire.Stdout)); got != "y\ny\n" {
		t.Errorf("stdout %q", got)
	}
	if last := frames[len(frames)-1]; last.ExitCode != 0 || !slices.Equal(last.StageCodes, []int{141, 0}) {
		t.Errorf("exit frame %+v", last)
	}

	// One stage is a pipeline too; a killed pipeline reports -1 and 128+n.
	c.result("process.spawn", `{"id":"one","pipeline":[["sleep","30"]]}`)
	c.result("process.kill", `{"id":"one","signal":"KILL"}`)
	if last := c.waitExit("one"); last[len(last)-1].ExitCode != -1 || !slices.Equal(last[len(last)-1].StageCodes, []int{137}) {
		t.Errorf("killed pipeline %+v", last)
	}
	// process.list names the stages.
	if list := c.result("process.list", `{}`); !strings.Contains(list, `"pipeline":[["yes"],["head","-n","2"]]`) {
		t.Errorf("process.list %s", list)
	}
}

func TestSpawnPipelineErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	c.wantError("process.spawn", `{"id":"x","pipeline":[]}`, -32602, "pipeline needs at least one stage")
	c.wantError("process.spawn", `{"id":"x","pipeline":[["true"],[]]}`, -32602, "pipeline stage 1: Command is required")
	c.wantError("process.spawn", `{"id":"x","pipeline":[["true"]],"command":"true"}`, -32602, "pipeline replaces command and args: send one or the other")
	c.wantError("process.spawn", `{"id":"x","pipeline":"true"}`, -32602, "Invalid params")
	c.wantError("process.spawn", `{"id":"x","pipeline":[["true"]],"tty":true}`, -32602, "tty cannot be combined with pipeline")
	c.wantError("process.spawn", `{"pipeline":[["true"]]}`, -32602, "Process ID is required")
	// A stage that cannot start: nothing is left running, nothing registered.
	line := c.request("process.spawn", `{"id":"x","pipeline":[["sleep","30"],["definitely-not-a-binary-sous"]]}`)
	if !bytes.Contains(line, []byte(`"code":-32603,"message":"pipeline stage 2: spawn definitely-not-a-binary-sous: executable file not found in $PATH"`)) {
		t.Errorf("%s", line)
	}
	c.wantResult("process.reattach", `{"id":"x","fromSeq":0}`, `{"found":false,"running":false,"firstSeq":0,"lastSeq":0,"stdinApplied":0}`)
}

func TestSpawnTimeout(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{TimeoutGrace: 300 * time.Millisecond})
	c := d.dial()
	dir := t.TempDir()
	// The group goes: the shell and its background child.
	start := time.Now()
	c.result("process.spawn", mustJSON(map[string]any{"id": "slow", "command": "sh", "timeoutMs": 200,
		"args": []string{"-c", "sleep 30 & echo $! > " + dir + "/bg; wait"}}))
	frames := c.waitExit("slow")
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("took %s", took)
	}
	raw := c.rawFrames("slow")
	if want := fmt.Sprintf(`{"type":"stream","processId":"slow","stream":"exit","seq":%d,"exitCode":-1,"timedOut":true}`+"\n", len(frames)); string(raw[len(raw)-1]) != want {
		t.Errorf("exit frame\n got %s\nwant %s", raw[len(raw)-1], want)
	}
	waitGone(t, readPidFile(t, dir+"/bg"), 2*time.Second)

	// A group that ignores SIGTERM is killed after the grace; a paused one
	// is continued so that it can act on SIGTERM.
	c.result("process.spawn", mustJSON(map[string]any{"id": "stubborn", "command": "sh", "timeoutMs": 100,
		"args": []string{"-c", "trap '' TERM; sleep 30 & echo $! > " + dir + "/bg2; wait"}}))
	bg2 := readPidFile(t, dir+"/bg2")
	if last := c.waitExit("stubborn"); !last[len(last)-1].TimedOut || last[len(last)-1].ExitCode != -1 {
		t.Errorf("stubborn %+v", last[len(last)-1])
	}
	waitGone(t, bg2, 2*time.Second)
	c.result("process.spawn", `{"id":"paused","command":"sleep","args":["30"],"timeoutMs":150}`)
	c.result("process.kill", `{"id":"paused","signal":"STOP"}`)
	start = time.Now()
	if last := c.waitExit("paused"); !last[len(last)-1].TimedOut {
		t.Errorf("paused %+v", last[len(last)-1])
	}
	if took := time.Since(start); took > 250*time.Millisecond+150*time.Millisecond {
		t.Errorf("a paused process took %s to die: SIGTERM waited for the grace", took)
	}

	// A process that ends in time has a plain exit frame; a pipeline's group
	// is stopped as a whole.
	c.result("process.spawn", `{"id":"quick","command":"true","timeoutMs":10000}`)
	c.waitExit("quick")
	if raw := c.rawFrames("quick"); string(raw[0]) != `{"type":"stream","processId":"quick","stream":"exit","seq":1,"exitCode":0}`+"\n" {
		t.Errorf("exit frame %s", raw[0])
	}
	c.result("process.spawn", `{"id":"pt","pipeline":[["sleep","30"],["cat"]],"timeoutMs":100}`)
	if last := c.waitExit("pt"); !last[len(last)-1].TimedOut || !slices.Equal(last[len(last)-1].StageCodes, []int{143, 143}) {
		t.Errorf("pipeline timeout %+v", last[len(last)-1])
	}
	c.wantError("process.spawn", `{"id":"x","command":"true","timeoutMs":0}`, -32602, "timeoutMs must be a positive number of milliseconds")
	c.wantError("process.spawn", `{"id":"x","command":"true","timeoutMs":"1"}`, -32602, "Invalid params")
}

// process.spawn.exitsignal: the exit frame names the signal that ended the
// process when the spawn asked, and stays claustrum's otherwise; a replay
// to another connection keeps it. (That a spill keeps it too is
// TestSegmentKeepsExtensionMembers.)
func TestSpawnExitSignal(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	c.result("process.spawn", `{"id":"segv","command":"sh","args":["-c","kill -SEGV $$"],"exitSignal":true}`)
	if got, want := exitFrameLine(c, "segv"), `{"type":"stream","processId":"segv","stream":"exit","seq":1,"exitCode":-1,"signal":11}`+"\n"; got != want {
		t.Errorf("exit frame\n got %s\nwant %s", got, want)
	}
	c.result("process.spawn", `{"id":"plain","command":"sh","args":["-c","kill -SEGV $$"]}`)
	if got, want := exitFrameLine(c, "plain"), `{"type":"stream","processId":"plain","stream":"exit","seq":1,"exitCode":-1}`+"\n"; got != want {
		t.Errorf("without exitSignal\n got %s\nwant %s", got, want)
	}
	c.result("process.spawn", `{"id":"fine","command":"sh","args":["-c","exit 3"],"exitSignal":true}`)
	if got, want := exitFrameLine(c, "fine"), `{"type":"stream","processId":"fine","stream":"exit","seq":1,"exitCode":3}`+"\n"; got != want {
		t.Errorf("an exit, not a signal\n got %s\nwant %s", got, want)
	}
	// A pipeline's is its last stage's; the timeout's SIGTERM is named too.
	c.result("process.spawn", `{"id":"pipe","pipeline":[["sleep","30"],["sleep","30"]],"timeoutMs":100,"exitSignal":true}`)
	if got := exitFrameLine(c, "pipe"); !strings.HasSuffix(got, `"exitCode":-1,"stageExitCodes":[143,143],"timedOut":true,"signal":15}`+"\n") {
		t.Errorf("pipeline exit frame %s", got)
	}
	// Replayed to another connection.
	c2 := d.dial()
	c2.result("process.reattach", `{"id":"segv","fromSeq":0}`)
	if got := exitFrameLine(c2, "segv"); !strings.HasSuffix(got, `"exitCode":-1,"signal":11}`+"\n") {
		t.Errorf("replayed exit frame %s", got)
	}
	if caps := c.result("server.capabilities", ""); !strings.Contains(caps, `"`+wire.FeatureSpawnExitSignal+`"`) {
		t.Errorf("the feature is not advertised: %s", caps)
	}
	off := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureSpawnExitSignal}}).dial()
	off.result("process.spawn", `{"id":"segv","command":"sh","args":["-c","kill -SEGV $$"],"exitSignal":true}`)
	if got := exitFrameLine(off, "segv"); strings.Contains(got, "signal") {
		t.Errorf("disabled, the exit frame still names the signal: %s", got)
	}
}

// exitFrameLine waits for process id's exit frame on c and returns its line.
func exitFrameLine(c *rawClient, id string) string {
	c.waitExit(id)
	raw := c.rawFrames(id)
	return string(raw[len(raw)-1])
}

func TestSpawnTTY(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("stty"); err != nil {
		t.Skip("no stty")
	}
	// The daemon's environment has no TERM: the child gets a default one.
	d := startDaemon(t, Config{Env: []string{"PATH=" + os.Getenv("PATH")}})
	c := d.dial()
	script := `stty size; tty >/dev/null && echo is-a-tty; echo "term=$TERM"; while read line; do [ "$line" = q ] && exit 7; stty size; done`
	c.result("process.spawn", mustJSON(map[string]any{"id": "t", "command": "sh", "args": []string{"-c", script},
		"tty": true, "size": map[string]int{"rows": 31, "cols": 97}}))
	waitStdout := func(want string) { t.Helper(); c.waitStdout("t", want) }
	waitStdout("31 97\r\nis-a-tty\r\nterm=xterm-256color\r\n")
	// The child leads its own session and group, with the terminal as its
	// controlling terminal.
	pr := d.srv.Registry().Get("t")
	if sid, _ := unix.Getsid(pr.Pid); sid != pr.Pid {
		t.Errorf("session %d, want the child's pid %d", sid, pr.Pid)
	}
	c.wantResult("process.resize", `{"id":"t","rows":40,"cols":120}`, `{"success":true}`)
	c.result("process.stdin", `{"id":"t","data":"`+base64.StdEncoding.EncodeToString([]byte("\n"))+`"}`)
	waitStdout("40 120\r\n")
	c.result("process.stdin", `{"id":"t","data":"`+base64.StdEncoding.EncodeToString([]byte("q\n"))+`"}`)
	frames := c.waitExit("t")
	if exitCodeOf(frames) != 7 || len(output(frames, wire.Stderr)) != 0 {
		t.Errorf("exit %d, stderr %q", exitCodeOf(frames), output(frames, wire.Stderr))
	}
	c.wantError("process.resize", `{"id":"t","rows":40,"cols":120}`, -32602, "Process not running")

	// Closing stdin is ^D: cat sees the end of its input. The default size
	// is 24x80.
	c.result("process.spawn", `{"id":"cat","command":"sh","args":["-c","stty size; cat"],"tty":true}`)
	c.waitStdout("cat", "24 80\r\n") // the terminal echoes input as it comes: after stty's line
	c.result("process.stdin", `{"id":"cat","data":"`+base64.StdEncoding.EncodeToString([]byte("abc\n"))+`","close":true}`)
	frames = c.waitExit("cat")
	if got := string(output(frames, wire.Stdout)); got != "24 80\r\nabc\r\nabc\r\n" || exitCodeOf(frames) != 0 {
		t.Errorf("cat on a tty: %q, exit %d", got, exitCodeOf(frames))
	}

	// kill reaches the group: the shell and what it started.
	dir := t.TempDir()
	c.result("process.spawn", mustJSON(map[string]any{"id": "grp", "command": "sh", "tty": true,
		"args": []string{"-c", "sleep 30 & echo $! > " + dir + "/bg; wait"}}))
	bg := readPidFile(t, dir+"/bg")
	c.result("process.kill", `{"id":"grp","signal":"KILL"}`)
	c.waitExit("grp")
	waitGone(t, bg, 2*time.Second)
}

func TestSpawnTTYErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	c.result("process.spawn", `{"id":"plain","command":"sleep","args":["30"]}`)
	c.wantError("process.resize", `{"id":"plain","rows":10,"cols":10}`, -32602, "Process has no terminal (spawned without tty)")
	c.wantError("process.resize", `{"id":"nope","rows":10,"cols":10}`, -32602, "Process not found")
	c.wantError("process.resize", `{"rows":10,"cols":10}`, -32602, "Process ID is required")
	c.wantError("process.resize", `{"id":"plain","rows":0,"cols":10}`, -32602, "size: rows and cols must be between 1 and 65535")
	c.wantError("process.resize", ``, -32602, "Invalid params")
	c.wantError("process.spawn", `{"id":"x","command":"true","size":{"rows":3,"cols":4}}`, -32602, "size is only valid with tty")
	c.wantError("process.spawn", `{"id":"x","command":"true","tty":true,"size":{"rows":3,"cols":70000}}`, -32602, "size: rows and cols must be between 1 and 65535")
	c.result("process.kill", `{"id":"plain","signal":"KILL"}`)
}

// Pause and resume signal the whole group: a counter in a grandchild stops
// advancing while paused.
func TestPauseResumeGroup(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	file := filepath.Join(t.TempDir(), "n")
	c.result("process.spawn", shParams("count", `(i=0; while :; do i=$((i+1)); echo $i > `+file+`.tmp; mv `+file+`.tmp `+file+`; sleep 0.01; done) & wait`))
	read := func() int {
		b, _ := os.ReadFile(file)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	deadline := time.Now().Add(5 * time.Second)
	for read() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c.result("process.kill", `{"id":"count","signal":"STOP"}`)
	time.Sleep(50 * time.Millisecond) // a write under way lands
	paused := read()
	time.Sleep(200 * time.Millisecond)
	if n := read(); n != paused {
		t.Fatalf("the counter advanced from %d to %d while paused", paused, n)
	}
	c.result("process.kill", `{"id":"count","signal":"CONT"}`)
	deadline = time.Now().Add(5 * time.Second)
	for read() <= paused+2 {
		if time.Now().After(deadline) {
			t.Fatalf("the counter stayed at %d after resume", read())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.result("process.killAndWait", `{"id":"count","signal":"KILL"}`)
}

func TestAllowCommands(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{AllowCommands: []string{"./rel"}}); err == nil || !strings.Contains(err.Error(), `allowed command "./rel"`) {
		t.Fatalf("relative entry: %v", err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	var logs testutil.SyncBuffer
	d := startDaemon(t, Config{AllowCommands: []string{"echo", sh}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := d.dial()
	// By name: however the command is given.
	c.result("process.spawn", `{"id":"a","command":"echo","args":["hi"]}`)
	if echo, err := exec.LookPath("echo"); err == nil {
		c.result("process.spawn", mustJSON(map[string]any{"id": "b", "command": echo}))
	}
	// By absolute path: the same file, found on PATH or named.
	c.result("process.spawn", `{"id":"c","command":"sh","args":["-c","true"]}`)
	c.result("process.spawn", mustJSON(map[string]any{"id": "d", "command": sh, "args": []string{"-c", "true"}}))
	c.result("process.spawn", `{"id":"e","pipeline":[["echo","x"],["sh","-c","cat"]]}`)

	c.wantError("process.spawn", `{"id":"f","command":"rm","args":["-rf","/nonexistent-sous"]}`, -32602,
		`Command not allowed: "rm" (this daemon allows only echo, `+sh+`; start it with --allow-command rm to allow it)`)
	c.wantError("process.spawn", `{"id":"g","pipeline":[["echo","x"],["/bin/cat"]]}`, -32602,
		`Command not allowed: "/bin/cat" in pipeline stage 1 (this daemon allows only echo, `+sh+`; start it with --allow-command /bin/cat to allow it)`)
	// A PATH of the caller's cannot pass another program off as an allowed path.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "sh"), []byte("#!/bin/true\n"), 0o755)
	c.wantError("process.spawn", mustJSON(map[string]any{"id": "h", "command": "sh", "env": map[string]string{"PATH": dir}}), -32602,
		`Command not allowed: "sh" (this daemon allows only echo, `+sh+`; start it with --allow-command sh to allow it)`)
	if n := d.srv.Stats().RefusedSpawns.Load(); n != 3 {
		t.Errorf("RefusedSpawns = %d", n)
	}
	if !strings.Contains(logs.String(), `msg="spawn refused: command not allowed" id=f command=rm`) {
		t.Errorf("log:\n%s", logs.String())
	}
	// Nothing refused ran or was registered.
	c.wantResult("process.reattach", `{"id":"f","fromSeq":0}`, `{"found":false,"running":false,"firstSeq":0,"lastSeq":0,"stdinApplied":0}`)
}

// A daemon with the extensions disabled behaves as one from before them.
func TestDisableFeatures(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureSpawnPipeline, wire.FeatureSpawnTimeout, wire.FeatureSpawnEnvUnset, wire.FeatureSpawnTTY}})
	c := d.dial()
	caps := c.result("server.capabilities", "")
	if strings.Contains(caps, "process.spawn.pipeline") || strings.Contains(caps, "process.spawn.timeout") ||
		strings.Contains(caps, "process.spawn.env.unset") || strings.Contains(caps, "process.spawn.tty") ||
		strings.Contains(caps, "process.resize") || !strings.Contains(caps, `"process.list","git.diff"`) {
		t.Errorf("capabilities %s", caps)
	}
	c.wantError("process.spawn", `{"id":"x","pipeline":[["true"]]}`, -32602, "Command is required")
	c.wantError("process.resize", `{"id":"x","rows":1,"cols":1}`, -32601, "Unknown method: process.resize")
	// env null sets the variable empty, tty and timeoutMs are ignored.
	c.result("process.spawn", mustJSON(map[string]any{"id": "env", "command": "sh", "tty": true, "timeoutMs": 1,
		"args": []string{"-c", `sleep 0.1; echo "${HOME-unset}|"; [ -t 0 ] || echo no-tty`}, "env": map[string]any{"HOME": nil}}))
	frames := c.waitExit("env")
	if got := string(output(frames, wire.Stdout)); got != "|\nno-tty\n" || exitCodeOf(frames) != 0 || frames[len(frames)-1].TimedOut {
		t.Errorf("stdout %q, exit %+v", got, frames[len(frames)-1])
	}
}

// TestAllowCommandsRunsWhatWasChecked: a command the allowed-commands check
// had to resolve (an absolute entry) runs as resolved there, found on the
// caller's PATH or relative to its cwd, and each spawn resolves it anew:
// an allowed program that goes from PATH is refused, not run from memory.
func TestAllowCommandsRunsWhatWasChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	os.WriteFile(prog, []byte("#!/bin/sh\necho checked $0\n"), 0o755)
	d := startDaemon(t, Config{AllowCommands: []string{prog}})
	c := d.dial()
	c.result("process.spawn", mustJSON(map[string]any{"id": "a", "command": "prog", "env": map[string]string{"PATH": dir}}))
	c.waitStdout("a", "checked "+prog+"\n")
	c.result("process.spawn", mustJSON(map[string]any{"id": "b", "command": "./prog", "cwd": dir}))
	c.waitStdout("b", "checked ./prog\n")
	os.Remove(prog)
	c.wantError("process.spawn", mustJSON(map[string]any{"id": "c", "command": "prog", "env": map[string]string{"PATH": dir}}), -32602,
		`Command not allowed: "prog" (this daemon allows only `+prog+`; start it with --allow-command prog to allow it)`)
}
