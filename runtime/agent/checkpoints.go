package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// checkpointEnv turns on the CLI's file checkpointing for an SDK session
// (both 2.1.81 and 2.1.332 read it; the Agent SDKs set it for
// enable_file_checkpointing). The CLI then snapshots each file that Write,
// Edit or NotebookEdit is about to change, keyed by the uuid of the user
// message whose turn changes it.
const checkpointEnv = "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING"

// rewindAnswer is the CLI's response to rewind_files.
type rewindAnswer struct {
	CanRewind    bool     `json:"canRewind"`
	Error        string   `json:"error"`
	FilesChanged []string `json:"filesChanged"`
}

// RewindFiles restores the files the session's tools changed since the
// user message userMessageID (Turn.UserMessageID) to what they were
// before it, and returns the paths it changed. With dryRun it changes
// nothing and returns the paths it would change. It needs
// Options.Checkpoints.
//
// The CLI lists the files only for a dry run (its real rewind answers
// {"canRewind": true}), so a rewind asks for a dry run first.
func (s *Session) RewindFiles(ctx context.Context, userMessageID string, dryRun bool) ([]string, error) {
	if !s.opt.Checkpoints {
		return nil, errors.New("agent: rewind files: the session was started without checkpoints")
	}
	if userMessageID == "" {
		return nil, errors.New("agent: rewind files: no user message id")
	}
	plan, err := s.rewind(ctx, userMessageID, true)
	if err != nil || dryRun {
		return plan.FilesChanged, err
	}
	if _, err := s.rewind(ctx, userMessageID, false); err != nil {
		return nil, err
	}
	return plan.FilesChanged, nil
}

// rewind sends one rewind_files request. A refusal (canRewind false, or
// an error response from a CLI without the request) names the version.
func (s *Session) rewind(ctx context.Context, id string, dryRun bool) (rewindAnswer, error) {
	var a rewindAnswer
	raw, err := s.control(ctx, "rewind_files", map[string]any{"user_message_id": id, "dry_run": dryRun})
	if err != nil {
		var ce *ControlError
		if errors.As(err, &ce) {
			return a, fmt.Errorf("agent: rewind files: %s cannot rewind files: %w", ce.cli(), ce)
		}
		return a, fmt.Errorf("agent: rewind files: %w", err)
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("agent: rewind files: the CLI's answer %s: %w", raw, err)
	}
	if !a.CanRewind {
		msg := a.Error
		if msg == "" {
			msg = "it gave no reason"
		}
		ce := &ControlError{Subtype: "rewind_files", Version: s.Version(), Message: msg}
		return a, fmt.Errorf("agent: rewind files: %s cannot rewind files: %w", ce.cli(), ce)
	}
	return a, nil
}

// withEnv is env with key set to value, leaving env itself untouched (the
// caller's map).
func withEnv(env map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(env)+1)
	for k, v := range env {
		out[k] = v
	}
	out[key] = value
	return out
}
