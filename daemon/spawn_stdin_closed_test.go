package daemon

import (
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// stdinAnswers is what process.stdin answers a running process whose
// stdin is closed: fresh data, no data, a close again, and data at an
// offset already applied, each as the whole response line minus its id.
func stdinAnswers(c *rawClient, id string) []string {
	c.t.Helper()
	data := base64.StdEncoding.EncodeToString([]byte("late\n"))
	var out []string
	for _, params := range []string{
		`{"id":"` + id + `","data":"` + data + `"}`,
		`{"id":"` + id + `","data":"` + data + `","offset":0}`,
		`{"id":"` + id + `"}`,
		`{"id":"` + id + `","offset":0}`,
		`{"id":"` + id + `","close":true}`,
		`{"id":"` + id + `","data":"","close":true}`,
	} {
		line := string(c.request("process.stdin", params))
		if i := strings.Index(line, `,"result"`); i >= 0 {
			line = line[i+1:]
		} else if i := strings.Index(line, `,"error"`); i >= 0 {
			line = line[i+1:]
		}
		out = append(out, strings.TrimSpace(line))
	}
	return out
}

// A spawn with stdinClosed: the child reads end-of-file at once from a
// pipe (not /dev/null), and process.stdin answers exactly as for a stdin
// closed with process.stdin {"close":true} right after the spawn.
func TestSpawnStdinClosed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	if caps := c.result("server.capabilities", ""); !strings.Contains(caps, `"`+wire.FeatureSpawnStdinClosed+`"`) {
		t.Fatalf("capabilities do not list %s: %s", wire.FeatureSpawnStdinClosed, caps)
	}

	// cat ends at once with nothing; read sees EOF; the stdin is a FIFO.
	c.result("process.spawn", `{"id":"cat","command":"cat","stdinClosed":true}`)
	c.result("process.spawn", `{"id":"read","command":"sh","args":["-c","read x || echo eof; test -p /dev/stdin && echo fifo"],"stdinClosed":true}`)
	for id, want := range map[string]string{"cat": "", "read": "eof\nfifo\n"} {
		frames := c.waitExit(id)
		if got := string(output(frames, wire.Stdout)); got != want || exitCodeOf(frames) != 0 {
			t.Errorf("%s: stdout %q exit %d, want %q and 0", id, got, exitCodeOf(frames), want)
		}
	}

	// Still running after it read end-of-file: the later requests.
	script := `cat; echo eof; exec sleep 30`
	c.result("process.spawn", `{"id":"spawned","command":"sh","args":["-c",`+string(wire.QuoteID(script))+`],"stdinClosed":true}`)
	c.result("process.spawn", shParams("asked", script))
	c.result("process.stdin", `{"id":"asked","close":true}`)
	c.waitStdout("spawned", "eof\n")
	c.waitStdout("asked", "eof\n")
	got, want := stdinAnswers(c, "spawned"), stdinAnswers(c, "asked")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("process.stdin after stdinClosed:\n%s\nafter process.stdin close:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(got[0], `"code":-32602,"message":"Process stdin closed"`) || !strings.Contains(got[2], `"result":{"success":true,"applied":0}`) {
		t.Errorf("answers: %q", got)
	}
	if res := c.result("process.reattach", `{"id":"spawned","fromSeq":1}`); !strings.Contains(res, `"stdinApplied":0`) {
		t.Errorf("reattach: %s", res)
	}
	c.result("process.kill", `{"id":"spawned","signal":"KILL"}`)
	c.result("process.kill", `{"id":"asked","signal":"KILL"}`)

	// A pipeline: its first stage's stdin is the one closed.
	c.result("process.spawn", `{"id":"pl","pipeline":[["sh","-c","cat; echo first"],["tr","a-z","A-Z"]],"stdinClosed":true}`)
	if frames := c.waitExit("pl"); string(output(frames, wire.Stdout)) != "FIRST\n" {
		t.Errorf("pipeline stdout %q", output(frames, wire.Stdout))
	}

	// A terminal cannot be half-closed: refused, nothing started.
	c.wantError("process.spawn", `{"id":"tty","command":"cat","tty":true,"stdinClosed":true}`, wire.CodeInvalidParams, MsgStdinClosedTTY)
	if d.srv.Registry().Get("tty") != nil {
		t.Error("the refused terminal spawn started a process")
	}
}

// A passed stdin (mirror "stdin") is the child's to read: stdinClosed with
// it is refused, and the descriptor is not kept.
func TestSpawnStdinClosedWithPassedStdin(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	resp := string(c.requestPassing("process.spawn", `{"id":"in","command":"cat","mirror":["stdin"],"stdinClosed":true}`, r))
	r.Close()
	if !strings.Contains(resp, `"message":`+string(wire.QuoteID(MsgStdinClosedPassed))) {
		t.Fatalf("spawn: %s", resp)
	}
	// The daemon closed its copy: nothing reads the pipe any more.
	w.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := w.Write([]byte("x")); err == nil {
		t.Error("the pipe still has a reader: the daemon kept the passed stdin")
	}
}

// A daemon without the extension (as one from before it) neither lists it
// nor honours the param, which it ignores as claustrum ignores unknown
// ones: the child's stdin stays open for process.stdin.
func TestSpawnStdinClosedDisabled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureSpawnStdinClosed}})
	c := d.dial()
	if caps := c.result("server.capabilities", ""); strings.Contains(caps, wire.FeatureSpawnStdinClosed) {
		t.Fatalf("capabilities list the disabled extension: %s", caps)
	}
	c.result("process.spawn", `{"id":"open","command":"sh","args":["-c","read x; echo got $x"],"stdinClosed":true}`)
	c.result("process.stdin", `{"id":"open","data":"`+base64.StdEncoding.EncodeToString([]byte("hi\n"))+`","close":true}`)
	if frames := c.waitExit("open"); string(output(frames, wire.Stdout)) != "got hi\n" {
		t.Errorf("stdout %q", output(frames, wire.Stdout))
	}
}

// process.stdin.close disabled (for clients' fallbacks: a daemon without
// it, such as claustrum's): not advertised, and a close param does
// nothing, as an unknown param does there; the stdin stays open and takes
// more data.
func TestStdinCloseDisabled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureStdinClose}})
	c := d.dial()
	if caps := c.result("server.capabilities", ""); strings.Contains(caps, `"`+wire.FeatureStdinClose+`"`) {
		t.Fatalf("capabilities list the disabled extension: %s", caps)
	}
	c.result("process.spawn", `{"id":"open","command":"sleep","args":["30"]}`)
	c.wantResult("process.stdin", `{"id":"open","data":"","offset":0,"close":true}`, `{"success":true,"applied":0}`)
	data := base64.StdEncoding.EncodeToString([]byte("hi\n"))
	c.wantResult("process.stdin", `{"id":"open","data":"`+data+`","offset":0}`, `{"success":true,"applied":3}`)
	c.result("process.kill", `{"id":"open","signal":"KILL"}`)
}

// A keyed spawn's resend answers with the process the first request
// started and changes nothing of it: its stdin stays as that request made
// it, whatever the resend says of stdinClosed.
func TestSpawnStdinClosedResend(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	data := base64.StdEncoding.EncodeToString([]byte("hi\n"))
	c.result("process.spawn", `{"id":"open","command":"sleep","args":["30"],"spawnKey":"k1"}`)
	c.result("process.spawn", `{"id":"open","command":"sleep","args":["30"],"spawnKey":"k1","stdinClosed":true}`)
	c.wantResult("process.stdin", `{"id":"open","data":"`+data+`"}`, `{"success":true,"applied":3}`)

	c.result("process.spawn", `{"id":"shut","command":"sleep","args":["30"],"spawnKey":"k2","stdinClosed":true}`)
	c.result("process.spawn", `{"id":"shut","command":"sleep","args":["30"],"spawnKey":"k2"}`)
	c.wantError("process.stdin", `{"id":"shut","data":"`+data+`"}`, wire.CodeInvalidParams, "Process stdin closed")
	for _, id := range []string{"open", "shut"} {
		if pr := d.srv.Registry().Get(id); pr == nil || pr.StartTime == 0 {
			t.Fatalf("%s: not in the registry", id)
		}
		c.result("process.kill", `{"id":"`+id+`","signal":"KILL"}`)
	}
}
