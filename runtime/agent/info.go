package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// What the CLI said about itself, and its refusals of sous's control
// requests put in terms of the version that refused.

// Info is the CLI's answer to initialize (commands, models, output_style,
// available_output_styles, account, ... as the CLI sent it).
func (s *Session) Info() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// Version is the CLI's version as it reports it (claude_code_version):
// recent CLIs in their initialize answer, all in system/init; "" until
// then (2.1.81 before its first turn).
func (s *Session) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// ControlError is the CLI's error response to one of sous's control
// requests: it does not support the subtype, or refused the request.
type ControlError struct {
	Subtype string
	// Version is the CLI's (Session.Version when the answer came; "" if
	// not known yet).
	Version string
	// Message is the CLI's error, as sent.
	Message string
}

func (e *ControlError) Error() string { return e.Message }

// cli names the CLI that answered, with its version when known.
func (e *ControlError) cli() string {
	if e.Version == "" {
		return "the CLI"
	}
	return "Claude Code " + e.Version
}

// Control sends any control request (e.g. "mcp_status",
// "get_context_usage") and returns the CLI's response payload. An error
// response is a *ControlError, wrapped in an error that names the subtype
// and the CLI's version.
func (s *Session) Control(ctx context.Context, subtype string, fields map[string]any) (json.RawMessage, error) {
	if subtype == "" {
		return nil, errors.New("agent: control: empty subtype")
	}
	if _, ok := fields["subtype"]; ok {
		return nil, fmt.Errorf("agent: control %q: the fields cannot set \"subtype\"", subtype)
	}
	resp, err := s.control(ctx, subtype, fields)
	return resp, explainRefusal(err)
}

// explainRefusal rewords a CLI's error response to name the request and
// the version that refused it; other errors pass as they are.
func explainRefusal(err error) error {
	var ce *ControlError
	if !errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("agent: control request %q: %s answered with an error: %w", ce.Subtype, ce.cli(), ce)
}
