package daemon

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

func TestSpawnArgsCwdEnv(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{Env: []string{"PATH=" + os.Getenv("PATH"), "B=inherited", "C=old", "D=kept"}})
	c := d.dial()
	dir := t.TempDir()
	params := mustJSON(map[string]any{
		"id": "env", "command": "sh", "cwd": dir,
		"args": []string{"-c", `pwd; echo "$A|${B-unset}|$C|$D"; printf '%s|' "$@"`, "zero", "a b", "", "c"},
		"env":  map[string]any{"A": "1", "B": nil, "C": "x y"},
	})
	c.wantResult("process.spawn", params, `{"success":true}`)
	frames := c.waitExit("env")
	checkSeqs(t, frames, 1)
	want := dir + "\n1|unset|x y|kept\na b||c|"
	if got := string(output(frames, wire.Stdout)); got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}

	// A relative command is resolved on the child's PATH, a path with a
	// slash relative to cwd.
	os.WriteFile(filepath.Join(dir, "hello.sh"), []byte("#!/bin/sh\necho hi from $0\n"), 0o755)
	c.wantResult("process.spawn", mustJSON(map[string]any{"id": "rel", "command": "./hello.sh", "cwd": dir}), `{"success":true}`)
	if got := string(output(c.waitExit("rel"), wire.Stdout)); got != "hi from ./hello.sh\n" {
		t.Fatalf("relative command: %q", got)
	}
}

func TestSpawnErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	c.wantError("process.spawn", `{"command":"true"}`, -32602, "Process ID is required")
	c.wantError("process.spawn", `{"id":"x"}`, -32602, "Command is required")
	c.wantError("process.spawn", `{"id":"x","command":""}`, -32602, "Command is required")
	for _, params := range []string{
		`{"id":"x","command":"definitely-not-a-binary-sous"}`,
		`{"id":"x","command":"/nonexistent/bin"}`,
		`{"id":"x","command":"true","cwd":"/nonexistent/dir"}`,
	} {
		line := c.request("process.spawn", params)
		if !bytes.Contains(line, []byte(`"error":{"code":-32603,"message":"`)) {
			t.Errorf("%s: %s", params, line)
		}
	}
	// A failed spawn registers nothing.
	c.wantResult("process.reattach", `{"id":"x","fromSeq":0}`, `{"found":false,"running":false,"firstSeq":0,"lastSeq":0,"stdinApplied":0}`)
}

func TestWantPid(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	c.wantResult("process.spawn", `{"id":"plain","command":"sleep","args":["30"]}`, `{"success":true}`)
	c.wantResult("process.spawn", `{"id":"plain2","command":"sleep","args":["30"],"wantPid":false}`, `{"success":true}`)
	res := c.result("process.spawn", `{"id":"pid","command":"sleep","args":["30"],"wantPid":true}`)
	m := regexp.MustCompile(`^\{"success":true,"pid":(\d+),"startTime":(\d+\.?\d*(e\+\d+)?)\}$`).FindStringSubmatch(res)
	if m == nil {
		t.Fatalf("spawn with wantPid: %s", res)
	}
	var pid int
	var start float64
	fmt.Sscan(m[1], &pid)
	fmt.Sscan(m[2], &start)
	if !testutil.Alive(pid) || d.srv.Registry().Get("pid").Pid != pid {
		t.Fatalf("pid %d is not the child", pid)
	}
	if now := float64(time.Now().UnixNano()) / 1e9; start < now-60 || start > now {
		t.Fatalf("startTime %v is not the spawn moment", start)
	}
	tail := `,"pid":` + m[1] + `,"startTime":` + m[2]
	c.wantResult("process.reattach", `{"id":"pid","fromSeq":0,"wantPid":true}`,
		`{"found":true,"running":true,"firstSeq":0,"lastSeq":0,"stdinApplied":0`+tail+`}`)
	c.wantResult("process.reattach", `{"id":"pid","fromSeq":0}`,
		`{"found":true,"running":true,"firstSeq":0,"lastSeq":0,"stdinApplied":0}`)
	c.wantResult("process.reattach", `{"id":"unknown","fromSeq":0,"wantPid":true}`,
		`{"found":false,"running":false,"firstSeq":0,"lastSeq":0,"stdinApplied":0}`)
	// The pid fields never leak into other replies.
	c.wantResult("process.kill", `{"id":"pid","wantPid":true}`, `{"success":true}`)
	frames := c.waitExit("pid")
	if exitCodeOf(frames) != -1 {
		t.Fatalf("exit code %d after SIGTERM", exitCodeOf(frames))
	}
	c.wantResult("process.reattach", `{"id":"pid","fromSeq":1,"wantPid":true}`,
		`{"found":true,"running":false,"firstSeq":1,"lastSeq":1,"stdinApplied":0`+tail+`}`)
	c.result("process.kill", `{"id":"plain"}`)
	c.result("process.kill", `{"id":"plain2"}`)
}

func TestFrameShapes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	c.wantResult("process.spawn", `{"id":"p\"1","command":"printf","args":["hi"]}`, `{"success":true}`)
	c.waitExit(`p"1`)
	got := c.rawFrames(`p"1`)
	want := []string{
		`{"type":"stream","processId":"p\"1","stream":"stdout","seq":1,"data":"aGk="}` + "\n",
		`{"type":"stream","processId":"p\"1","stream":"exit","seq":2,"exitCode":0}` + "\n",
	}
	if len(got) != len(want) {
		t.Fatalf("frames %q", got)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("frame %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}

	// seq runs across stdout, stderr and exit; the exit code is passed on.
	c.result("process.spawn", shParams("mix", `echo out; sleep 0.05; echo err >&2; sleep 0.05; echo out2; exit 3`))
	frames := c.waitExit("mix")
	checkSeqs(t, frames, 1)
	if string(output(frames, wire.Stdout)) != "out\nout2\n" || string(output(frames, wire.Stderr)) != "err\n" || exitCodeOf(frames) != 3 {
		t.Fatalf("frames %+v", frames)
	}
	last := c.rawFrames("mix")[len(frames)-1]
	if string(last) != fmt.Sprintf(`{"type":"stream","processId":"mix","stream":"exit","seq":%d,"exitCode":3}`+"\n", len(frames)) {
		t.Fatalf("exit frame %s", last)
	}

	// A signal-terminated child reports -1, not 128+signo.
	c.result("process.spawn", shParams("sig", `kill -9 $$`))
	if code := exitCodeOf(c.waitExit("sig")); code != -1 {
		t.Fatalf("exit code %d", code)
	}
}

// 1 MiB of random output arrives whole, in frames of at most 32 KiB.
func TestLargeOutputExact(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	data := make([]byte, 1<<20)
	rand.Read(data)
	path := filepath.Join(t.TempDir(), "rand")
	os.WriteFile(path, data, 0o600)
	c.result("process.spawn", shParams("big", `cat `+path+`; cat `+path+` >&2`))
	frames := c.waitExit("big")
	checkSeqs(t, frames, 1)
	if sha256.Sum256(output(frames, wire.Stdout)) != sha256.Sum256(data) {
		t.Fatal("stdout differs")
	}
	if sha256.Sum256(output(frames, wire.Stderr)) != sha256.Sum256(data) {
		t.Fatal("stderr differs")
	}
	for _, raw := range c.rawFrames("big") {
		if !bytes.HasPrefix(raw, []byte(`{"type":"stream","processId":"big","stream":"`)) {
			t.Fatalf("frame %.80s", raw)
		}
	}
}

func TestSurviveAndReattach(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	a := d.dial()
	a.result("process.spawn", shParams("long", `echo one; read x; echo "got $x"`))
	a.waitFrames("long", 1)
	a.nc.Close()
	<-a.readDone

	b := d.dial()
	b.wantResult("process.reattach", `{"id":"long","fromSeq":0}`,
		`{"found":true,"running":true,"firstSeq":1,"lastSeq":1,"stdinApplied":0}`)
	// The replay comes before the reply.
	b.mu.Lock()
	order := fmt.Sprintf("%q", b.all)
	b.mu.Unlock()
	if want := fmt.Sprintf("%q", []string{
		`{"type":"stream","processId":"long","stream":"stdout","seq":1,"data":"b25lCg=="}` + "\n",
		`{"jsonrpc":"2.0","id":1,"result":{"found":true,"running":true,"firstSeq":1,"lastSeq":1,"stdinApplied":0}}` + "\n",
	}); order != want {
		t.Fatalf("reattach lines %s\nwant %s", order, want)
	}
	b.wantResult("process.stdin", `{"id":"long","data":"aGkK"}`, `{"success":true,"applied":3}`)
	frames := b.waitExit("long")
	checkSeqs(t, frames, 1)
	if got := string(output(frames, wire.Stdout)); got != "one\ngot hi\n" {
		t.Fatalf("stdout %q", got)
	}

	// fromSeq is exclusive.
	c := d.dial()
	c.wantResult("process.reattach", `{"id":"long","fromSeq":1}`,
		`{"found":true,"running":false,"firstSeq":1,"lastSeq":3,"stdinApplied":3}`)
	frames = c.waitExit("long")
	checkSeqs(t, frames, 2)
	c.resetFrames("long")
	c.wantResult("process.reattach", `{"id":"long","fromSeq":3}`,
		`{"found":true,"running":false,"firstSeq":1,"lastSeq":3,"stdinApplied":3}`)
	c.wantResult("process.reattach", `{"id":"long","fromSeq":-5}`,
		`{"found":true,"running":false,"firstSeq":1,"lastSeq":3,"stdinApplied":3}`)
	if n := len(c.waitFrames("long", 3)); n != 3 {
		t.Fatalf("fromSeq -5 replayed %d frames", n)
	}
	c.wantResult("process.reattach", `{"id":"nope","fromSeq":0}`,
		`{"found":false,"running":false,"firstSeq":0,"lastSeq":0,"stdinApplied":0}`)
	c.wantResult("process.reattach", `{"fromSeq":0}`,
		`{"found":false,"running":false,"firstSeq":0,"lastSeq":0,"stdinApplied":0}`)
}

// Reattaching on the connection that already follows a process restarts the
// stream from fromSeq without duplicates or reordering.
func TestReattachSameConnection(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	// The child goes quiet (waiting on stdin) while the test reattaches:
	// frames a previous subscription wrote after its own reply may still
	// be in flight when the test clears its buffer, which would look like
	// duplicates. Replayed frames always precede the reply, so a quiet
	// child makes each round's frames exactly the replay.
	c.result("process.spawn", shParams("tick", `i=0; while [ $i -lt 200 ]; do echo $i; i=$((i+1)); done; read x; echo end`))
	c.waitFor("200 lines", 10*time.Second, func() bool { // called with c.mu held
		var out []byte
		var f wire.Frame
		for _, line := range c.frames["tick"] {
			if _, err := wire.ParseFrame(line, &f); err == nil && f.Stream == wire.Stdout {
				out = append(out, f.Data...)
			}
		}
		return bytes.HasSuffix(out, []byte("199\n"))
	})
	for i := 0; i < 5; i++ {
		c.mu.Lock()
		delete(c.frames, "tick")
		c.mu.Unlock()
		c.result("process.reattach", `{"id":"tick","fromSeq":0}`)
	}
	c.result("process.stdin", `{"id":"tick","data":"Z28K"}`) // "go\n": the child prints end and exits
	frames := c.waitExit("tick")
	checkSeqs(t, frames, 1)
	var want strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	want.WriteString("end\n")
	if got := string(output(frames, wire.Stdout)); got != want.String() {
		t.Fatalf("stdout %q", got)
	}
}

func TestReuseLiveID(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	a, b := d.dial(), d.dial()
	dir := t.TempDir()
	a.result("process.spawn", shParams("dup", fmt.Sprintf(`sleep 60 & echo $! > %s/gc; echo $$ > %s/p; echo old; wait`, dir, dir)))
	leader := readPidFile(t, filepath.Join(dir, "p"))
	grandchild := readPidFile(t, filepath.Join(dir, "gc"))
	a.waitFrames("dup", 1)
	b.result("process.reattach", `{"id":"dup","fromSeq":0}`)
	b.waitFrames("dup", 1)
	a.resetFrames("dup")
	b.resetFrames("dup")

	a.wantResult("process.spawn", `{"id":"dup","command":"echo","args":["new"]}`, `{"success":true}`)
	waitGone(t, leader, 5*time.Second)
	waitGone(t, grandchild, 5*time.Second)
	got := a.waitExit("dup")
	if len(got) != 2 || got[0].Seq != 1 || string(got[0].Data) != "new\n" || got[1].ExitCode != 0 {
		t.Fatalf("frames under the reused id: %q", a.rawFrames("dup"))
	}
	time.Sleep(100 * time.Millisecond)
	if fs := b.rawFrames("dup"); len(fs) != 0 {
		t.Fatalf("stray frames on the old process's subscriber: %q", fs)
	}
	a.wantResult("process.reattach", `{"id":"dup","fromSeq":0}`,
		`{"found":true,"running":false,"firstSeq":1,"lastSeq":2,"stdinApplied":0}`)
}

func TestStdin(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

	// decode -> exists -> running -> offset
	c.wantError("process.stdin", `{"id":"nope","data":"!!!"}`, -32602, "Invalid base64 data")
	c.wantError("process.stdin", `{"id":"nope","data":"aGk="}`, -32602, "Process not found")
	c.wantError("process.stdin", `{"data":"aGk="}`, -32602, "Process not found")
	c.result("process.spawn", `{"id":"done","command":"true"}`)
	c.waitExit("done")
	c.wantError("process.stdin", `{"id":"done","data":"!"}`, -32602, "Invalid base64 data")
	c.wantError("process.stdin", `{"id":"done","data":"aGk="}`, -32602, "Process not running")
	c.wantError("process.stdin", `{"id":"done","data":"aGk=","offset":99}`, -32602, "Process not running")

	c.result("process.spawn", `{"id":"cat","command":"cat"}`)
	steps := []struct{ params, reply string }{
		{`{"id":"cat","data":""}`, `{"success":true,"applied":0}`},
		{`{"id":"cat","data":"` + b64("abc") + `"}`, `{"success":true,"applied":3}`},
		{`{"id":"cat","data":"` + b64("def") + `","offset":3}`, `{"success":true,"applied":6}`},
		{`{"id":"cat","data":"` + b64("abc") + `","offset":0}`, `{"success":true,"applied":6,"duplicate":true}`},
		{`{"id":"cat","data":"` + b64("def") + `","offset":3}`, `{"success":true,"applied":6,"duplicate":true}`},
		{`{"id":"cat","data":"","offset":6}`, `{"success":true,"applied":6}`},
		{`{"id":"cat","data":"` + b64("efgh") + `","offset":4}`, `{"success":true,"applied":8}`},
		{`{"id":"cat","data":"` + b64("cdefgh") + `","offset":2}`, `{"success":true,"applied":8,"duplicate":true}`},
		{`{"id":"cat","data":"` + b64("ij") + `"}`, `{"success":true,"applied":10}`},
	}
	for _, s := range steps {
		c.wantResult("process.stdin", s.params, s.reply)
	}
	c.wantError("process.stdin", `{"id":"cat","data":"`+b64("zz")+`","offset":11}`, -32003, "stdin offset gap: offset ahead of applied bytes")
	// process.stdin.close: data first, then EOF, so cat exits.
	c.wantResult("process.stdin", `{"id":"cat","data":"`+b64("k")+`","offset":10,"close":true}`, `{"success":true,"applied":11}`)
	frames := c.waitExit("cat")
	if got := string(output(frames, wire.Stdout)); got != "abcdefghijk" {
		t.Fatalf("cat received %q", got)
	}
	if exitCodeOf(frames) != 0 {
		t.Fatalf("cat exit %d", exitCodeOf(frames))
	}
	var r wire.ReattachResult
	json.Unmarshal([]byte(c.result("process.reattach", `{"id":"cat","fromSeq":999}`)), &r)
	if r.StdinApplied != 11 {
		t.Fatalf("stdinApplied %d", r.StdinApplied)
	}

	// After close, a retried closing request is a duplicate and fresh data
	// is refused (it could never reach the child).
	c.result("process.spawn", shParams("linger", `cat; sleep 30`))
	c.wantResult("process.stdin", `{"id":"linger","data":"`+b64("x")+`","offset":0,"close":true}`, `{"success":true,"applied":1}`)
	c.wantResult("process.stdin", `{"id":"linger","data":"`+b64("x")+`","offset":0,"close":true}`, `{"success":true,"applied":1,"duplicate":true}`)
	c.wantError("process.stdin", `{"id":"linger","data":"`+b64("y")+`"}`, -32602, "Process stdin closed")
	c.wantResult("process.stdin", `{"id":"linger","data":""}`, `{"success":true,"applied":1}`)
	if got := string(output(c.waitFrames("linger", 1), wire.Stdout)); got != "x" {
		t.Fatalf("linger got %q", got)
	}
	c.result("process.kill", `{"id":"linger","signal":"KILL"}`)
}

func TestKillGroup(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	dir := t.TempDir()
	c.result("process.spawn", shParams("tree", fmt.Sprintf(`sleep 60 & echo $! > %s/gc; echo $$ > %s/p; wait`, dir, dir)))
	leader := readPidFile(t, filepath.Join(dir, "p"))
	grandchild := readPidFile(t, filepath.Join(dir, "gc"))
	c.wantResult("process.kill", `{"id":"tree"}`, `{"success":true}`)
	waitGone(t, leader, 5*time.Second)
	waitGone(t, grandchild, 5*time.Second)
	if code := exitCodeOf(c.waitExit("tree")); code != -1 {
		t.Fatalf("exit code %d", code)
	}
	// After the reap the kill is a no-op that still succeeds.
	c.wantResult("process.kill", `{"id":"tree","signal":"KILL"}`, `{"success":true}`)
	if d.srv.Registry().Get("tree").Signal(9) {
		t.Fatal("a reaped process was signalled")
	}
	c.wantError("process.kill", `{"id":"nope"}`, -32602, "Process not found")
	c.wantError("process.kill", `{}`, -32602, "Process ID is required")
	c.wantError("process.kill", `{"id":"tree","signal":"BOGUS"}`, -32602, "Invalid signal: BOGUS")

	// Named, prefixed and numeric signals.
	for i, sig := range []string{"SIGINT", "hup", "9", "KILL", "SEGV", "sigbus"} {
		id := fmt.Sprintf("s%d", i)
		c.result("process.spawn", `{"id":"`+id+`","command":"sleep","args":["60"]}`)
		c.wantResult("process.kill", `{"id":"`+id+`","signal":"`+sig+`"}`, `{"success":true}`)
		if code := exitCodeOf(c.waitExit(id)); code != -1 {
			t.Fatalf("%s: exit %d", sig, code)
		}
	}
}

func TestKillAndWait(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	const stubborn = `trap '' TERM; echo ready; while :; do sleep 1; done`

	c.wantResult("process.killAndWait", `{"id":"nope"}`, `{"found":false,"died":false}`)
	c.wantError("process.killAndWait", `{}`, -32602, "Process ID is required")
	c.wantError("process.killAndWait", `{"signal":"TERM"}`, -32602, "Process ID is required")

	c.result("process.spawn", `{"id":"gone","command":"true"}`)
	c.waitExit("gone")
	c.wantResult("process.killAndWait", `{"id":"gone"}`, `{"found":true,"died":true,"alreadyExited":true}`)

	c.result("process.spawn", `{"id":"coop","command":"sleep","args":["60"]}`)
	c.wantResult("process.killAndWait", `{"id":"coop"}`, `{"found":true,"died":true}`)
	c.result("process.spawn", `{"id":"hard","command":"sh","args":["-c","`+stubborn+`"]}`)
	c.waitFrames("hard", 1)
	c.wantResult("process.killAndWait", `{"id":"hard","signal":"KILL"}`, `{"found":true,"died":true}`)

	c.result("process.spawn", `{"id":"esc","command":"sh","args":["-c","`+stubborn+`"]}`)
	c.waitFrames("esc", 1)
	start := time.Now()
	c.wantResult("process.killAndWait", `{"id":"esc","timeoutMs":200}`, `{"found":true,"died":true,"escalated":true}`)
	if el := time.Since(start); el < 200*time.Millisecond || el > 2*time.Second {
		t.Errorf("escalation after %v, want ~200ms", el)
	}

	c.result("process.spawn", `{"id":"keep","command":"sh","args":["-c","`+stubborn+`"]}`)
	c.waitFrames("keep", 1)
	c.wantResult("process.killAndWait", `{"id":"keep","timeoutMs":100,"escalate":false}`, `{"found":true,"died":false}`)
	c.wantResult("process.reattach", `{"id":"keep","fromSeq":1}`, `{"found":true,"running":true,"firstSeq":1,"lastSeq":1,"stdinApplied":0}`)
	c.wantResult("process.killAndWait", `{"id":"keep","signal":"KILL","escalate":false}`, `{"found":true,"died":true}`)
	if code := exitCodeOf(c.waitExit("keep")); code != -1 {
		t.Fatalf("exit %d", code)
	}
}

// timeoutMs 0 and negative both mean the 3000 ms default.
func TestKillAndWaitDefaultGrace(t *testing.T) {
	t.Parallel()
	for _, tm := range []string{`"timeoutMs":0,`, `"timeoutMs":-100,`, ``} {
		t.Run(tm, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t, Config{})
			c := d.dial()
			c.result("process.spawn", `{"id":"s","command":"sh","args":["-c","trap '' TERM; echo ready; while :; do sleep 1; done"]}`)
			c.waitFrames("s", 1)
			start := time.Now()
			c.wantResult("process.killAndWait", `{`+tm+`"id":"s"}`, `{"found":true,"died":true,"escalated":true}`)
			if el := time.Since(start); el < 2900*time.Millisecond || el > 5*time.Second {
				t.Errorf("waited %v, want ~3s", el)
			}
		})
	}
}

func TestKillGrace(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		in   *int64
		want time.Duration
	}{
		{nil, 3 * time.Second},
		{ms(0), 3 * time.Second},
		{ms(-100), 3 * time.Second},
		{ms(1), time.Millisecond},
		{ms(50), 50 * time.Millisecond},
		{ms(8000), 8 * time.Second},
		{ms(600000), 600 * time.Second},
		{ms(600001), 600 * time.Second},
		{ms(1 << 62), 600 * time.Second}, // would overflow as a Duration
	} {
		if got := killGrace(tc.in); got != tc.want {
			t.Errorf("killGrace(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestProcessList(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	c.wantResult("process.list", `{}`, `{"processes":[]}`)
	c.result("process.spawn", `{"id":"a","command":"sh","args":["-c","exit 4"]}`)
	c.waitExit("a")
	c.result("process.spawn", `{"id":"b","command":"sleep","args":["60"]}`)
	var list wire.ProcessListResult
	json.Unmarshal([]byte(c.result("process.list", `{}`)), &list)
	if len(list.Processes) != 2 {
		t.Fatalf("list %+v", list)
	}
	a, b := list.Processes[0], list.Processes[1]
	if a.ID != "a" || a.Running || a.ExitCode == nil || *a.ExitCode != 4 || a.LastSeq != 1 || a.Command != "sh" || len(a.Args) != 2 {
		t.Errorf("a: %+v", a)
	}
	if b.ID != "b" || !b.Running || b.ExitCode != nil || b.Pid == 0 || b.StartTime < a.StartTime {
		t.Errorf("b: %+v", b)
	}
	c.result("process.kill", `{"id":"b","signal":"KILL"}`)
}

// A client that half-closes once it has sent its requests (`sous daemon
// bridge` at the end of its stdin, `nc -N`) still gets every answer, and a
// kill it asked for is carried out in full: the end of its requests is not
// the end of the connection.
func TestHalfCloseAnswersRequestsInFlight(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	c.result("process.spawn", shParams("s", `trap '' TERM; echo ready; while :; do sleep 1; done`))
	c.waitFrames("s", 1)

	kill := c.sendRequest("process.killAndWait", `{"id":"s","timeoutMs":300}`)
	info := c.sendRequest("git.info", mustJSON(map[string]string{"path": repo}))
	if err := c.nc.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"found":true,"died":true,"escalated":true}}`+"\n", kill)
	if got := string(c.respFor(strconv.Itoa(kill))); got != want {
		t.Errorf("killAndWait after the half-close:\n got %s\nwant %s", got, want)
	}
	if got := string(c.respFor(strconv.Itoa(info))); !strings.Contains(got, `"isRepo":true`) {
		t.Errorf("git.info after the half-close: %s", got)
	}
	c.waitClosed(10 * time.Second)
}

// A connection that ends before its killAndWait does (here: closed by the
// daemon for an oversized line) gets no answer, but the child still gets
// its SIGKILL when the grace runs out.
func TestKillAndWaitEscalatesAfterTheConnectionEnds(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	dir := t.TempDir()
	c.result("process.spawn", shParams("s", `trap '' TERM; echo $$ > `+dir+`/pid; echo ready; while :; do sleep 1; done`))
	c.waitFrames("s", 1)
	pid := readPidFile(t, filepath.Join(dir, "pid"))

	c.sendRequest("process.killAndWait", `{"id":"s","timeoutMs":400}`)
	// The daemon may close before the whole line is written.
	_, _ = io.WriteString(c.nc, strings.Repeat("x", wire.MaxLine+1)+"\n")
	c.waitClosed(10 * time.Second)
	waitGone(t, pid, 5*time.Second)
}

// A peer that closes the connection altogether is not waited for, even
// with a request still in flight that only its end can stop: a
// process.stdin to a child that never reads its stdin.
func TestClosedPeerCancelsRequestsInFlight(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	owner := d.dial()
	owner.result("process.spawn", `{"id":"deaf","command":"sleep","args":["60"]}`)
	c := d.dial()
	chunk := base64.StdEncoding.EncodeToString(make([]byte, 512<<10))
	const n = 32 // 16 MiB: more than the pipe and the daemon's 8 MiB queue hold
	for range n {
		c.sendRequest("process.stdin", `{"id":"deaf","data":"`+chunk+`"}`)
	}
	// Until the answers stop: the rest wait for room that never comes.
	c.waitFor("the first answers", 10*time.Second, func() bool { return len(c.resps) > 0 })
	for last := -1; ; time.Sleep(100 * time.Millisecond) {
		c.mu.Lock()
		now := len(c.resps)
		c.mu.Unlock()
		if now == last {
			break
		}
		last = now
	}
	c.mu.Lock()
	answered := len(c.resps)
	c.mu.Unlock()
	if answered >= n {
		t.Fatalf("all %d writes were answered: none is held up", n)
	}
	c.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for d.srv.Stats().ConnectionsOpen.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open 5 s after the peer closed, want 1", d.srv.Stats().ConnectionsOpen.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	owner.wantResult("process.killAndWait", `{"id":"deaf","signal":"KILL"}`, `{"found":true,"died":true}`)
}
