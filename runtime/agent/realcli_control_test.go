package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// The session's control surface with the real CLI against the scripted
// model: file checkpoints and rewind_files, the initialize answer, raw
// control requests, partial messages and the fields of can_use_tool.

func allowAll(context.Context, Request) (Decision, error) { return Allow(nil), nil }

// writeTurns scripts two turns: the first writes v1 of path, the second
// v2, each then says done.
func writeTurns(path func() string) fakemodel.Options {
	return fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		switch n {
		case 0:
			return fakemodel.ToolUse("Write", map[string]any{"file_path": path(), "content": "v1\n"})
		case 2:
			return fakemodel.ToolUse("Write", map[string]any{"file_path": path(), "content": "v2\n"})
		}
		return fakemodel.Text("done")
	}}
}

// TestRewindFiles: with checkpoints, turn 1 writes v1 of a file and turn 2
// v2; a dry run of a rewind to turn 2 lists the file and changes nothing,
// the rewind restores v1 and returns the file.
func TestRewindFiles(t *testing.T) {
	for _, tc := range cliCases {
		t.Run(tc.name, func(t *testing.T) {
			var w *world
			w = newWorld(t, tc.version, writeTurns(func() string { return filepath.Join(w.work, "notes.txt") }))
			file := filepath.Join(w.work, "notes.txt")
			s := w.start(embedded(t), tc.transport, Options{Checkpoints: true, Permission: allowAll})
			t1 := send(t, s, "write v1")
			if got := readFile(t, file); got != "v1\n" {
				t.Fatalf("after turn 1 the file holds %q", got)
			}
			t2 := send(t, s, "write v2")
			if got := readFile(t, file); got != "v2\n" {
				t.Fatalf("after turn 2 the file holds %q", got)
			}
			if t1.UserMessageID == "" || t2.UserMessageID == "" || t1.UserMessageID == t2.UserMessageID {
				t.Fatalf("user message ids %q and %q: want two different uuids", t1.UserMessageID, t2.UserMessageID)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dry, err := s.RewindFiles(ctx, t2.UserMessageID, true)
			if err != nil {
				t.Fatalf("dry run: %v", err)
			}
			if !slices.Contains(dry, file) {
				t.Errorf("dry run lists %q, want %s", dry, file)
			}
			if got := readFile(t, file); got != "v2\n" {
				t.Errorf("a dry run changed the file to %q", got)
			}
			changed, err := s.RewindFiles(ctx, t2.UserMessageID, false)
			if err != nil {
				t.Fatalf("rewind: %v", err)
			}
			if !slices.Contains(changed, file) {
				t.Errorf("rewind returned %q, want %s", changed, file)
			}
			if got := readFile(t, file); got != "v1\n" {
				t.Errorf("after the rewind the file holds %q, want v1", got)
			}
			// Turn 1 created the file: rewinding to it removes it.
			if _, err := s.RewindFiles(ctx, t1.UserMessageID, false); err != nil {
				t.Fatalf("rewind to turn 1: %v", err)
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("after a rewind to turn 1 the file is still there (%v)", err)
			}
		})
	}
}

// TestRewindFilesRefused: without checkpoints sous refuses at once; with
// them, a message id the CLI has no checkpoint for is an error naming the
// version and the CLI's reason.
func TestRewindFilesRefused(t *testing.T) {
	w := newWorld(t, claudecli.Latest, fakemodel.Options{Script: []fakemodel.Reply{fakemodel.Text("hi")}})
	c := embedded(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	off := w.start(c, TransportStdio, Options{})
	if _, err := off.RewindFiles(ctx, "x", true); err == nil || !strings.Contains(err.Error(), "without checkpoints") {
		t.Errorf("rewind without checkpoints: %v", err)
	}
	on := w.start(c, TransportStdio, Options{Checkpoints: true})
	send(t, on, "hello")
	_, err := on.RewindFiles(ctx, "6a0c7c2e-0000-4000-8000-000000000000", true)
	var ce *ControlError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "Claude Code "+on.Version()) || !strings.Contains(err.Error(), "checkpoint") {
		t.Errorf("rewind to an unknown message: %v, want a ControlError naming the version and the missing checkpoint", err)
	}
}

// TestInfoAndControl: Info is the initialize answer; Control sends any
// request and returns its answer, and a subtype the CLI does not support
// fails naming the subtype, the version and the CLI's message.
func TestInfoAndControl(t *testing.T) {
	for _, tc := range []cliCase{cliCases[0], cliCases[2]} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.version, fakemodel.Options{Script: []fakemodel.Reply{fakemodel.Text("hi")}})
			s := w.start(embedded(t), tc.transport, Options{})
			var info struct {
				Commands []map[string]any `json:"commands"`
				Models   []map[string]any `json:"models"`
				Style    string           `json:"output_style"`
			}
			if err := json.Unmarshal(s.Info(), &info); err != nil || len(info.Commands) == 0 || len(info.Models) == 0 || info.Style == "" {
				t.Errorf("info %.300s (%v): want commands, models and output_style", s.Info(), err)
			}
			if v := s.Version(); tc.version == claudecli.Latest && !strings.HasPrefix(v, "2.1.") {
				t.Errorf("version %q before a turn: the latest CLI says it in initialize", v)
			}
			send(t, s, "hello")
			if v := s.Version(); !strings.HasPrefix(v, "2.1.") || tc.version == claudecli.WebSocket && v != "2.1.81" {
				t.Errorf("version %q after a turn, want the CLI's", v)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			raw, err := s.Control(ctx, "mcp_status", nil)
			if err != nil || !strings.Contains(string(raw), "mcpServers") {
				t.Errorf("mcp_status: %s %v", raw, err)
			}
			raw, err = s.Control(ctx, "get_context_usage", nil)
			t.Logf("get_context_usage: %.200s %v", raw, err)
			if tc.version == claudecli.Latest {
				if err != nil || len(raw) == 0 {
					t.Errorf("get_context_usage on the latest CLI: %v", err)
				}
			} else {
				msg := ""
				if err != nil {
					msg = err.Error()
				}
				for _, want := range []string{`"get_context_usage"`, "Claude Code 2.1.81", "Unsupported control request subtype"} {
					if !strings.Contains(msg, want) {
						t.Errorf("get_context_usage on 2.1.81: %q, want it to say %s", msg, want)
					}
				}
			}
			if _, err := s.Control(ctx, "no_such_request", nil); err == nil || !strings.Contains(err.Error(), `"no_such_request"`) {
				t.Errorf("an unknown subtype: %v", err)
			}
		})
	}
}

// TestPartialMessages: with PartialMessages the CLI streams stream_event
// messages, which the observer sees before the turn's result.
func TestPartialMessages(t *testing.T) {
	for _, tc := range []cliCase{cliCases[0], cliCases[2]} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.version, fakemodel.Options{Script: []fakemodel.Reply{fakemodel.Text("a fairly long reply, streamed in pieces")}})
			// The observer runs on the session's goroutine, which may
			// still observe messages after the turn came back.
			var mu sync.Mutex
			var seen []string
			s := w.start(embedded(t), tc.transport, Options{PartialMessages: true, Observer: func(e Event) {
				if e.Dir == In {
					mu.Lock()
					seen = append(seen, e.Type)
					mu.Unlock()
				}
			}})
			turn := send(t, s, "hello")
			if !hasMessage(turn, "stream_event", "") {
				t.Errorf("the turn has no stream_event message")
			}
			mu.Lock()
			defer mu.Unlock()
			i, j := slices.Index(seen, "stream_event"), slices.Index(seen, "result")
			if i < 0 || j < i {
				t.Errorf("observed %v: want stream_event before result", seen)
			}
		})
	}
}

// TestRequestFieldsAndUpdates: can_use_tool's blocked_path,
// decision_reason and permission_suggestions reach the Request; allowing
// a Read outside the working directory with the CLI's own addDirectories
// suggestion as updatedPermissions makes a second Read there need no
// request.
func TestRequestFieldsAndUpdates(t *testing.T) {
	for _, tc := range []cliCase{cliCases[0], cliCases[2]} {
		t.Run(tc.name, func(t *testing.T) {
			var w *world
			outside, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"a.txt", "b.txt"} {
				os.WriteFile(filepath.Join(outside, f), []byte(f), 0o644)
			}
			w = newWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.ToolUse("Read", map[string]any{"file_path": filepath.Join(outside, "a.txt")})
				case 1:
					return fakemodel.ToolUse("Read", map[string]any{"file_path": filepath.Join(outside, "b.txt")})
				case 2:
					return fakemodel.ToolUse("Bash", map[string]any{"command": "touch " + filepath.Join(w.work, "t")})
				}
				return fakemodel.Text("done")
			}})
			rec := &recorder{decide: func(r Request) (Decision, error) {
				if r.Tool != "Read" {
					return Allow(nil), nil
				}
				var sugg []PermissionUpdate
				json.Unmarshal(r.Suggestions, &sugg)
				for _, u := range sugg {
					if u.Type == "addDirectories" {
						return Allow(nil, u), nil
					}
				}
				return Allow(nil, PermissionUpdate{Type: "addDirectories", Directories: []string{outside}, Destination: "session"}), nil
			}}
			s := w.start(embedded(t), tc.transport, Options{Permission: rec.callback})
			send(t, s, "go")
			reqs := rec.requests()
			var tools []string
			for _, r := range reqs {
				tools = append(tools, r.Tool)
			}
			if !slices.Equal(tools, []string{"Read", "Bash"}) {
				t.Fatalf("permission requests for %v, want Read (once: the update allowed the second) and Bash", tools)
			}
			read, bash := reqs[0], reqs[1]
			if !strings.Contains(read.DecisionReason, "outside allowed working directories") || read.BlockedPath != "" {
				t.Errorf("Read outside: decision reason %q, blocked path %q", read.DecisionReason, read.BlockedPath)
			}
			if bash.BlockedPath != filepath.Join(w.work, "t") || bash.DecisionReason != "" {
				t.Errorf("Bash touch: blocked path %q, decision reason %q", bash.BlockedPath, bash.DecisionReason)
			}
			if !strings.Contains(string(read.Suggestions), "addRules") || read.AgentID != "" {
				t.Errorf("Read suggestions %s, agent id %q", read.Suggestions, read.AgentID)
			}
		})
	}
}
