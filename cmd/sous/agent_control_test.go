package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// A session's control surface through sous run with the real CLI:
// on_message, checkpoints and rewind_files, info and raw control requests,
// the extra fields of a permission request and approve(updates=).

// recipeCase is a CLI version over a transport.
type recipeCase struct{ name, version, transport string }

var (
	stdio81   = recipeCase{"2.1.81/stdio", claudecli.WebSocket, "stdio"}
	ws81      = recipeCase{"2.1.81/websocket", claudecli.WebSocket, "websocket"}
	stdioLast = recipeCase{"latest/stdio", claudecli.Latest, "stdio"}
)

// TestAgentOnMessage: on_message sees every message of a turn as it comes,
// partial stream_events included, while the recipe is inside send and a
// policy answers a permission request of the same turn; all of them ran
// before send returned, the result last.
func TestAgentOnMessage(t *testing.T) {
	for _, tc := range []recipeCase{stdio81, ws81, stdioLast} {
		t.Run(tc.name, func(t *testing.T) {
			var w *agentWorld
			w = newAgentWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				if n == 0 {
					return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.dir, "out.txt"), "content": "x\n"})
				}
				return fakemodel.Text("written, and this reply streams in several pieces")
			}})
			o := w.run(`
seen = []
asked = []

def on_message(msg):
    kind = msg["type"]
    if kind == "control_request":
        kind += " " + msg["request"]["subtype"]
    if kind == "stream_event":
        kind += " " + msg["event"]["type"]
    if not seen or seen[-1] != kind:
        seen.append(kind)

def policy(req):
    asked.append(len(seen))
    return approve()

s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), transport = "` + tc.transport + `",
                policy = policy, on_message = on_message)
t = s.send("write it")
print("turn:", t.ok, t.text)
print("last:", seen[-1])
print("asked after", "control_request can_use_tool" in seen[:asked[0]])
print("stream:", "stream_event content_block_delta" in seen, "stream_event message_start" in seen)
print("system first:", seen[0] in ["system", "control_response"] or seen)
n = len(seen)
s.close()
`)
			o.expect(t, 0, "turn: True written, and this reply streams in several pieces",
				"last: result", "asked after True", "stream: True True", "system first: True")
		})
	}
}

// TestAgentOnMessageFails: an on_message that fails fails the recipe with
// its traceback.
func TestAgentOnMessageFails(t *testing.T) {
	w := newAgentWorld(t, claudecli.Latest, fakemodel.Options{Script: []fakemodel.Reply{fakemodel.Text("hi")}})
	o := w.run(`def on_message(msg):
    if msg["type"] == "result":
        fail("on_message saw " + msg["subtype"])

s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), on_message = on_message)
s.send("hello")
print("not reached")
`)
	o.expect(t, 1, "main.star:6:7: in <toplevel>", "main.star:3:13: in on_message", "Error in fail: fail: on_message saw success")
	if strings.Contains(o.stderr, "not reached") {
		t.Error("the recipe went on")
	}
}

// TestAgentCheckpoints: turn 1 writes v1 of a file, turn 2 writes v2; a
// dry run of rewind_files(t2) lists the file and changes nothing, the
// rewind restores v1; rewind_files(t1) removes the file turn 1 created.
func TestAgentCheckpoints(t *testing.T) {
	for _, tc := range []recipeCase{stdio81, ws81, stdioLast} {
		t.Run(tc.name, func(t *testing.T) {
			var w *agentWorld
			w = newAgentWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.dir, "notes.txt"), "content": "v1\n"})
				case 2:
					return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.dir, "notes.txt"), "content": "v2\n"})
				}
				return fakemodel.Text("done")
			}})
			o := w.run(`
path = args["dir"] + "/notes.txt"
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), transport = "` + tc.transport + `",
                policy = lambda req: approve(), checkpoints = True)
t1 = s.send("write v1")
t2 = s.send("write v2")
print("ids:", len(t1.user_message_id) == 36, t1.user_message_id != t2.user_message_id)
print("dry:", s.rewind_files(t2, dry_run = True) == [path], files.read(path).strip())
print("rewind:", s.rewind_files(t2) == [path], files.read(path).strip())
print("to turn 1:", s.rewind_files(t1) == [path], files.read(path))
`)
			o.expect(t, 0, "ids: True True", "dry: True v2", "rewind: True v1", "to turn 1: True None")
		})
	}
}

// TestAgentCheckpointsRefused: rewind_files on a session without
// checkpoints fails saying so; a turn of another session has no
// checkpoint in this one, and the CLI's refusal names the version.
func TestAgentCheckpointsRefused(t *testing.T) {
	w := newAgentWorld(t, claudecli.Latest, fakemodel.Options{Script: []fakemodel.Reply{fakemodel.Text("a"), fakemodel.Text("b")}})
	o := w.run(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]))
s.rewind_files(s.send("hi"), dry_run = True)
`)
	o.expect(t, 1, "Session.rewind_files: the session has no checkpoints: start it with sdk.session(..., checkpoints=True)")
	o = w.run(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), checkpoints = True)
other = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), checkpoints = True)
t = s.send("hi")
print("nothing changed:", s.rewind_files(t, dry_run = True))
print("version:", other.info["claude_code_version"])
other.rewind_files(t, dry_run = True)
print("not reached")
`)
	lines := o.stderrLines("version: 2.1.")
	if len(lines) != 1 {
		t.Fatalf("the recipe printed no version:\n%s", o.stderr)
	}
	version := strings.TrimSpace(strings.TrimPrefix(lines[0], "version: "))
	o.expect(t, 1, "nothing changed: []",
		"Session.rewind_files: rewind files: Claude Code "+version+" cannot rewind files: No file checkpoint found for this message.")
	if strings.Contains(o.stderr, "not reached") {
		t.Error("the recipe went on")
	}
}

// TestAgentInfoAndControl: Session.info is the initialize answer;
// Session.control sends mcp_status (and get_context_usage on the current
// CLI) and returns the answer; 2.1.81 lacks get_context_usage, and the
// error names the request, the version and the CLI's message.
func TestAgentInfoAndControl(t *testing.T) {
	for _, tc := range []recipeCase{stdio81, stdioLast} {
		t.Run(tc.name, func(t *testing.T) {
			w := newAgentWorld(t, tc.version, fakemodel.Options{Script: []fakemodel.Reply{fakemodel.Text("hi")}})
			o := w.run(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]))
info = s.info
print("info:", type(info), len(info["commands"]) > 0, len(info["models"]) > 0, type(info["output_style"]))
s.send("hello")
status = s.control("mcp_status")
print("mcp_status:", type(status["mcpServers"]))
usage = s.control("get_context_usage")
print("usage:", type(usage))
`)
			if tc.version == claudecli.Latest {
				o.expect(t, 0, "info: dict True True string", "mcp_status: list", "usage: dict")
				return
			}
			o.expect(t, 1, "info: dict True True string", "mcp_status: list",
				`Session.control: control request "get_context_usage": Claude Code 2.1.81 answered with an error: Unsupported control request subtype: get_context_usage`)
		})
	}
}

// TestAgentRequestFields: a policy sees decision_reason for a Read outside
// the working directory and blocked_path for a Bash writing a file, the
// CLI's suggestions, no agent_id; approving the Read with an
// addDirectories update makes the next Read there need no request.
func TestAgentRequestFields(t *testing.T) {
	for _, tc := range []recipeCase{stdio81, ws81, stdioLast} {
		t.Run(tc.name, func(t *testing.T) {
			outside, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"a.txt", "b.txt"} {
				os.WriteFile(filepath.Join(outside, f), []byte(f), 0o644)
			}
			var w *agentWorld
			w = newAgentWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.ToolUse("Read", map[string]any{"file_path": filepath.Join(outside, "a.txt")})
				case 1:
					return fakemodel.ToolUse("Read", map[string]any{"file_path": filepath.Join(outside, "b.txt")})
				case 2:
					return fakemodel.ToolUse("Bash", map[string]any{"command": "touch " + filepath.Join(w.dir, "t")})
				}
				return fakemodel.Text("done")
			}})
			o := w.run(`
outside = "` + outside + `"
def policy(req):
    print("ask:", req.tool, req.decision_reason, req.blocked_path, req.agent_id, type(req.suggestions))
    if req.tool == "Read":
        return approve(updates = [{"type": "addDirectories", "directories": [outside], "destination": "session"}])
    return approve()

s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), transport = "` + tc.transport + `", policy = policy)
print("turn:", s.send("go").text)
`)
			o.expect(t, 0, "ask: Read Path is outside allowed working directories None None list",
				"ask: Bash None "+filepath.Join(w.dir, "t")+" None list", "turn: done")
			if n := len(o.stderrLines("ask: ")); n != 2 {
				t.Errorf("the policy was asked %d times, want 2 (the update allows the second Read)", n)
			}
		})
	}
}

// TestAgentOnMessageJSON: the partial messages on_message asks for are
// its alone: --json still shows the session's whole messages, not the
// stream_events.
func TestAgentOnMessageJSON(t *testing.T) {
	w := newAgentWorld(t, claudecli.Latest, fakemodel.Options{Script: []fakemodel.Reply{fakemodel.Text("streamed in pieces")}})
	o := w.run(`
partials = []
def on_message(msg):
    if msg["type"] == "stream_event":
        partials.append(msg)
t = sdk.send("hello", cwd = args["dir"], cli = json.decode(args["cli"]), on_message = on_message)
print("partials:", len(partials) > 0, t.text)
`, "--json")
	o.expect(t, 0)
	types := map[string]int{}
	var logged string
	for _, e := range o.events(t) {
		switch e["event"] {
		case "agent":
			m, _ := e["message"].(map[string]any)
			types[fmt.Sprint(m["type"])]++
		case "log":
			if text, _ := e["text"].(string); strings.HasPrefix(text, "partials: ") {
				logged = text
			}
		}
	}
	if logged != "partials: True streamed in pieces" {
		t.Errorf("the recipe logged %q", logged)
	}
	if types["stream_event"] != 0 || types["result"] != 1 || types["assistant"] == 0 {
		t.Errorf("agent events by message type %v: want assistant and result, no stream_event", types)
	}
}

// TestAgentRequestFromSubagent: a tool use by a subagent (2.1.81 runs a
// Task subagent inside the turn) carries the subagent's id; the main
// agent's has none.
func TestAgentRequestFromSubagent(t *testing.T) {
	for _, tc := range []recipeCase{stdio81, ws81} {
		t.Run(tc.name, func(t *testing.T) {
			var w *agentWorld
			w = newAgentWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				sub := firstPrompt(req) == "write the file"
				switch {
				case sub && toolTurn(req) == 0:
					return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.dir, "sub.txt"), "content": "x\n"})
				case sub:
					return fakemodel.Text("sub done")
				case toolTurn(req) == 0:
					return fakemodel.ToolUse("Task", map[string]any{"description": "write it", "prompt": "write the file", "subagent_type": "general-purpose"})
				case toolTurn(req) == 1:
					return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.dir, "main.txt"), "content": "y\n"})
				}
				return fakemodel.Text("done")
			}})
			o := w.run(`
def policy(req):
    print("ask:", req.tool, req.input["file_path"].split("/")[-1], req.agent_id != None, type(req.agent_id))
    return approve()

s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), transport = "` + tc.transport + `", policy = policy)
print("turn:", s.send("go").text)
`)
			o.expect(t, 0, "ask: Write sub.txt True string", "ask: Write main.txt False NoneType", "turn: done")
		})
	}
}
