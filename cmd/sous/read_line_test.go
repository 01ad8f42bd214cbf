package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// TestReadLineDialogue: write a line, read the answer, three times over.
// lines() cannot do this: each call starts from the first line, so every
// round read the first answer again. read_line goes on from where the
// last call stopped, and gives None once the process has exited and
// everything was read.
func TestReadLineDialogue(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
p = spawn(["python3", "-c", """
import sys
for line in sys.stdin:
    print("got " + line.strip() + "!", flush=True)
print("bye", end="", flush=True)
"""], echo=False)
for word in ["one", "two", "three"]:
    p.write(word + "\n")
    print(p.read_line())
p.close_stdin()
print(p.read_line(), p.read_line(stream="stdout"), p.read_line())
print([l for l in p.lines()])  # lines() still starts from the first line
`)
	o.expect(t, 0)
	want := "got one!\ngot two!\ngot three!\nbye None None\n[\"got one!\", \"got two!\", \"got three!\", \"bye\"]\n"
	if o.stderr != want {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}
}

// TestReadLineStreams: each stream has its own position; "\r\n" ends a
// line as "\n" does; the last line without a newline comes at exit.
func TestReadLineStreams(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
p = spawn(["sh", "-c", "printf 'a\\nb\\r\\n\\npartial'; printf 'e1\\ne2' >&2"], echo=False)
print([p.read_line() for _ in range(5)])
print([p.read_line("stderr") for _ in range(3)])
print(p.wait().exit_code, repr(p.read_line(timeout=0)))
`)
	o.expect(t, 0)
	want := "[\"a\", \"b\", \"\", \"partial\", None]\n[\"e1\", \"e2\", None]\n0 None\n"
	if o.stderr != want {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}
}

// TestReadLineTimeout: a timeout that passes before a whole line fails
// read_line, as wait(timeout) fails, and the process keeps running.
func TestReadLineTimeout(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
p = spawn(["sh", "-c", "echo first; printf 'half a line'; exec sleep 30"], id="quiet", echo=False)
print(p.read_line(timeout=5))
p.read_line(timeout=0.2)
`)
	o.expect(t, 1, "main.star:4:12", "Process.read_line: process quiet wrote no complete line on stdout within 0.2s; it keeps running")
	if o.stderr[:len("first\n")] != "first\n" {
		t.Errorf("log:\n%s", o.stderr)
	}
	o, _ = runStar(t, `spawn("true").read_line(timeout=-1)`)
	o.expect(t, 1, "Process.read_line: timeout: want a number of seconds")
	o, _ = runStar(t, `spawn("true").read_line("stdin")`)
	o.expect(t, 1, `Process.read_line: stream: want "stdout" or "stderr", got "stdin"`)
}

// TestReadLineLetsPoliciesRun: while read_line waits, an agent's
// permission request is answered on the recipe thread. The policy itself
// writes the line read_line waits for, so the recipe only goes on if the
// policy ran during the wait.
func TestReadLineLetsPoliciesRun(t *testing.T) {
	t.Parallel()
	var w *agentWorld
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if toolTurn(req) == 0 {
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.dir, "out.txt"), "content": "x\n"})
		}
		return fakemodel.Text("done")
	}})
	o := w.run(`
p = spawn(["sh", "-c", "read answer; echo \"policy said $answer\""], echo=False)
def policy(req):
    p.write(req.tool + "\n")
    return approve()
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), policy = policy)
pending = s.start("write it")
print(p.read_line(timeout=120))
print(pending.wait().text)
`)
	o.expect(t, 0, "policy said Write\ndone\n")
	if _, err := os.Stat(filepath.Join(w.dir, "out.txt")); err != nil {
		t.Errorf("the approved Write did not run: %v", err)
	}
}
