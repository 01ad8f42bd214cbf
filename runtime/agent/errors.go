package agent

import "errors"

// Errors callers can test for with errors.Is.
var (
	// ErrTurnTimeout is wrapped by Send and Pending.Wait when a turn ran
	// past Options.TurnTimeout and was interrupted.
	ErrTurnTimeout = errors.New("turn timed out")
	// ErrCLIStuck is wrapped with ErrTurnTimeout when the CLI did not stop
	// the timed-out turn when interrupted: the session was ended.
	ErrCLIStuck = errors.New("the CLI did not stop")
	// ErrClosed is wrapped by calls on a closed session.
	ErrClosed = errors.New("agent session closed")
	// ErrCLIExited is wrapped when the CLI process ended while the session
	// still needed it.
	ErrCLIExited = errors.New("claude CLI exited")
	// ErrSDKURLRejected is wrapped when the CLI refuses --sdk-url for a
	// local endpoint (Claude Code 2.1.121 and later).
	ErrSDKURLRejected = errors.New("the Claude Code CLI refused --sdk-url for a local endpoint")
)
