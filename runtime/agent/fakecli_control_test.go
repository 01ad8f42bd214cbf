package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeOldCLI is a CLI of a version without sous's newer control requests:
// it says its version in initialize, refuses every other control request
// as the real CLI refuses an unknown subtype, except "ignored_request",
// which it never answers.
func fakeOldCLI(emit func(any), next func() map[string]any) int {
	for m := next(); m != nil; m = next() {
		if m["type"] != "control_request" {
			continue
		}
		req, _ := m["request"].(map[string]any)
		switch req["subtype"] {
		case "initialize":
			emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": m["request_id"],
				"response": map[string]any{"claude_code_version": "2.0.99", "commands": []any{}}}})
		case "ignored_request":
		default:
			emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "error", "request_id": m["request_id"],
				"error": "Unsupported control request subtype: " + req["subtype"].(string)}})
		}
	}
	return 0
}

// TestFakeOldCLIRefusesRewind: a CLI without rewind_files makes
// RewindFiles fail naming the version and the feature, and Control fail
// naming the subtype and the version; a request the CLI never answers
// ends with the caller's deadline, not a hang.
func TestFakeOldCLIRefusesRewind(t *testing.T) {
	t.Parallel()
	opt := fakeOptions("old")
	opt.Checkpoints = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, embedded(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Version() != "2.0.99" {
		t.Errorf("version %q, want the one initialize said", s.Version())
	}
	_, err = s.RewindFiles(ctx, "6a0c7c2e-0000-4000-8000-000000000000", false)
	var ce *ControlError
	if want := "agent: rewind files: Claude Code 2.0.99 cannot rewind files: Unsupported control request subtype: rewind_files"; err == nil || err.Error() != want || !errors.As(err, &ce) {
		t.Errorf("rewind: %v\nwant: %s", err, want)
	}
	_, err = s.Control(ctx, "get_context_usage", map[string]any{"x": 1})
	if want := `agent: control request "get_context_usage": Claude Code 2.0.99 answered with an error: Unsupported control request subtype: get_context_usage`; err == nil || err.Error() != want {
		t.Errorf("control: %v\nwant: %s", err, want)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	_, err = s.Control(short, "ignored_request", nil)
	if err == nil || !strings.Contains(err.Error(), "no answer from the CLI") || time.Since(start) > 5*time.Second {
		t.Errorf("an unanswered request: %v after %s", err, time.Since(start))
	}
	if _, err := s.Control(ctx, "x", map[string]any{"subtype": "y"}); err == nil || !strings.Contains(err.Error(), `cannot set "subtype"`) {
		t.Errorf("fields setting subtype: %v", err)
	}
}
