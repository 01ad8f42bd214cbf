// Package wire holds claustrum's JSON-RPC wire contract: request and response
// envelopes, error codes and messages, the params and results of every method,
// and the stream frames. The daemon and the client both use it, so the two sides
// cannot drift apart.
//
// The contract is docs/PROTOCOL.md. Field order in the
// result structs is the order the reference daemon emits, because callers
// compare frames byte for byte.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxLine is the largest request line the daemon serves, in bytes, not counting
// the newline. A longer line closes the connection with no reply.
const MaxLine = 1024*1024 - 1

// MaxFrameData is the most output bytes one stdout or stderr frame carries.
const MaxFrameData = 32 * 1024

// Error codes of the protocol.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
	CodeUnauthorized   = -32001
	CodeStdinGap       = -32003
)

// Fixed error messages. Methods add their own (see the method docs in docs/PROTOCOL.md).
const (
	MsgParseError     = "Parse error"
	MsgInvalidVersion = "Invalid JSON-RPC version"
	MsgUnauthorized   = "Unauthorized: invalid or missing auth token"
	MsgInvalidParams  = "Invalid params"
	MsgStdinGap       = "stdin offset gap: offset ahead of applied bytes"
	// MsgProcessNotFound answers a method naming an id the daemon does
	// not know.
	MsgProcessNotFound = "Process not found"
	// MsgProcessNotRunning answers process.stdin (and process.resize) for
	// a process that has exited.
	MsgProcessNotRunning = "Process not running"
	// MsgCommandNotAllowed starts the refusal of a command the daemon's
	// --allow-command list leaves out.
	MsgCommandNotAllowed = "Command not allowed: "
)

// Error is a JSON-RPC error object. It is also a Go error, so handlers can
// return it through ordinary error paths.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

// Errorf builds an *Error with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidParams is the -32602 error with the given message.
func InvalidParams(msg string) *Error { return &Error{Code: CodeInvalidParams, Message: msg} }

// IsNotRunning reports whether err is a daemon's answer that the process
// has exited (MsgProcessNotRunning): to a stdin write or close, a child
// that is gone read all it would.
func IsNotRunning(err error) bool {
	var we *Error
	return errors.As(err, &we) && we.Code == CodeInvalidParams && we.Message == MsgProcessNotRunning
}

// Internal is the -32603 error carrying err's text.
func Internal(err error) *Error { return &Error{Code: CodeInternal, Message: err.Error()} }

// Request is one JSON-RPC request line. ID is kept raw so that numeric and
// string ids are echoed back exactly as sent.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	Auth    string          `json:"auth,omitempty"`
}

// Response is one JSON-RPC response line. Exactly one of Result and Error is set.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Methods lists the 19 methods of the protocol in the order
// server.capabilities returns them.
var Methods = []string{
	"server.ping", "server.version", "server.capabilities", "server.shutdown",
	"files.list", "files.validate", "files.stat", "files.read", "files.extract_tar",
	"git.info", "git.status", "git.list_branches", "git.worktree_create", "git.worktree_remove",
	"process.spawn", "process.stdin", "process.kill", "process.killAndWait", "process.reattach",
}

// Feature names advertised in server.capabilities.features.
const (
	FeatureStdinOffset = "process.stdin.offset" // the resumable stdin contract (always present)
	FeatureStdinClose  = "process.stdin.close"  // process.stdin {"close":true}
	// process.stdin requests for one process, sent on one connection
	// without waiting for their answers, are applied in the order sent
	// (claustrum handles them concurrently, so a later one can arrive at
	// the queue first and be refused as a gap).
	FeatureStdinOrdered = "process.stdin.ordered"
	FeatureProcessList  = "process.list"        // the process.list method
	FeatureWebSocket    = "transport.websocket" // the daemon also serves JSON-RPC over WebSocket

	// process.spawn and process.reattach {"notifyGone": true}: when the
	// daemon stops following the process for this connection without an
	// exit frame (a spawn reused its id, or it was forgotten), it says so
	// with a Gone notification instead of leaving the client waiting.
	FeatureProcessGone = "process.gone"

	// process.spawn {"pipeline": [[cmd, args...], ...]}: the stages joined by
	// pipes in one process group; stderr frames carry "stage", the exit frame
	// "stageExitCodes".
	FeatureSpawnPipeline = "process.spawn.pipeline"
	// process.spawn {"timeoutMs": n}: the daemon kills the group (TERM, then
	// KILL after 3 s) once n ms pass; the exit frame then carries "timedOut":true.
	FeatureSpawnTimeout = "process.spawn.timeout"
	// process.spawn {"exitSignal": true}: when a signal ends the process
	// (its last stage, for a pipeline), the exit frame carries "signal": n
	// after exitCode (-1, as always), so the spawner can tell a crash
	// (SIGSEGV) or the OOM killer (SIGKILL) from the rest.
	FeatureSpawnExitSignal = "process.spawn.exitsignal"
	// process.spawn {"env": {"NAME": null}} unsets an inherited variable
	// (claustrum would set it to "").
	FeatureSpawnEnvUnset = "process.spawn.env.unset"
	// process.spawn {"tty": true, "size": {"rows", "cols"}}: a pseudo-terminal
	// as the child's controlling terminal; process.resize {id, rows, cols}.
	FeatureSpawnTTY = "process.spawn.tty"
	// process.spawn {"sandbox": {...}} (see Sandbox): Landlock and a private
	// network namespace confine the child. Advertised only where the kernel
	// enforces it.
	FeatureSpawnSandbox = "process.spawn.sandbox"
	// process.spawn {"mirror": ["stdout", "stderr"]} on a Unix socket, with
	// that many pipe descriptors passed in the request line's SCM_RIGHTS:
	// the daemon tees the child's output into those pipes as it reads it,
	// and sends this connection the frames it mirrored without their data,
	// marked "mirrored":true (other connections get them whole). The
	// daemon's copies close when the connection does. A spawner that
	// reconnects reattaches with {"mirrored": true} to keep the marks: what
	// the daemon teed before it saw the connection go is in the pipes
	// already.
	FeatureSpawnMirror = "process.spawn.mirror"
	// process.spawn {"mirror": [..., "stdin"]}: the descriptor passed for
	// "stdin", a pipe or regular file open for reading, is the child's
	// stdin itself (a pipeline's first stage's), as a shell's redirection
	// would make it; process.stdin then refuses data, and closing it does
	// nothing. A terminal's child cannot take one.
	FeatureSpawnMirrorStdin = "process.spawn.mirror.stdin"
	// process.spawn {"mirror": [...], "direct": true}: the descriptors passed
	// for "stdout" and "stderr", pipes or regular files open for writing,
	// are the child's own stdout and stderr rather than pipes to tee into:
	// the daemon reads neither, so they have no frames and no replay. For a
	// spawner nobody else can follow the process through (sous exec on its
	// embedded daemon). A terminal's child cannot take them.
	FeatureSpawnMirrorDirect = "process.spawn.mirror.direct"
	// process.spawn {"mirror": [...]} without "direct": the descriptor
	// passed for "stdout" or "stderr" may also be a regular file open for
	// writing, or the null device, which the daemon writes the output to
	// itself as it reads it (one copy, where the frames to the spawner and
	// its own write would be three), ahead of the frames, marked mirrored
	// as a tee's are. A write that fails or falls short ends the mirror:
	// what it did not write comes with data, unmarked.
	FeatureSpawnMirrorFiles = "process.spawn.mirror.files"
	// process.spawn {"spawnKey": k}: a spawn whose id names a process the
	// daemon still has (running or exited) that was spawned with the same
	// key starts nothing: it answers as that spawn did and follows that
	// process from its first frame. A client sends one key per spawn it
	// means, the same on a resend after a lost connection, so the resend
	// cannot replace (kill) the process the first request started when
	// the daemon handled it late. Spawns of one id are serialised.
	FeatureSpawnKey = "process.spawn.key"
	// process.spawn {"stdinClosed": true}: the child's stdin is closed as
	// it starts, as after process.stdin {"close":true} sent at once: the
	// child reads end-of-file, and process.stdin answers as for a closed
	// stdin (fresh data -32602 "Process stdin closed"; no data, or close
	// again, succeeds with applied 0). It saves the spawner of a command
	// it has nothing to write to one request and answer per command. Not
	// with tty, nor with a passed stdin (mirror "stdin"): -32602.
	FeatureSpawnStdinClosed = "process.spawn.stdin.closed"

	// git.worktree_remove {"strict": true}: instead of removing whatever is
	// at worktreePath (the contract's lenient default), the daemon removes
	// only a linked worktree of baseRepo with nothing to lose. Otherwise
	// success is false with errorCode "worktree_dirty" (and "changes", the
	// porcelain lines of git.status) or "not_a_worktree", and nothing is
	// deleted.
	FeatureWorktreeRemoveStrict = "git.worktree_remove.strict"
	// git.worktree_create {"reportNewBranch": true}: a success carries
	// "newBranch", true when the daemon created branchName, false when it
	// checked out a branch that existed (sourceBranch is then only the
	// echo the contract asks for).
	FeatureWorktreeCreateNewBranch = "git.worktree_create.newbranch"

	// files.extract_tar {"modes": "archive", "keepArchive": true} (see
	// ExtractOptions): entries keep the archive's permission bits (masked
	// by the daemon's umask, never set-user-ID, set-group-ID, sticky or
	// writable by others) instead of 0600/0700, and the archive is left in
	// place instead of consumed. Without them the call is claustrum's.
	FeatureExtractOptions = "files.extract_tar.options"
)

// ---- server.* ----

// PingResult is server.ping's result.
type PingResult struct {
	Pong bool `json:"pong"`
}

// VersionResult is server.version's result.
type VersionResult struct {
	Version  string `json:"version"`
	Platform string `json:"platform"`
	Arch     string `json:"arch"`
}

// CapabilitiesResult is server.capabilities' result.
type CapabilitiesResult struct {
	Version  string   `json:"version"`
	Methods  []string `json:"methods"`
	Features []string `json:"features"`
}

// ---- files.* ----

// PathParams binds the params of every files.* method, as claustrum does: a
// field that belongs to the namespace participates in decoding even where the
// method does not read it.
type PathParams struct {
	Path        string `json:"path"`
	MaxBytes    *int64 `json:"maxBytes,omitempty"`
	ArchivePath string `json:"archivePath,omitempty"`
	DestDir     string `json:"destDir,omitempty"`
}

// StatResult is files.stat's result.
type StatResult struct {
	Exists bool   `json:"exists"`
	IsDir  bool   `json:"isDir"`
	Size   int64  `json:"size"`
	Mode   string `json:"mode"`
}

// ListEntry is one entry of files.list.
type ListEntry struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	IsDir bool   `json:"isDir"`
}

// ListResult is files.list's result.
type ListResult struct {
	Entries []ListEntry `json:"entries"`
}

// ReadResult is files.read's result.
type ReadResult struct {
	Content string `json:"content"`
	Exists  bool   `json:"exists"`
}

// ValidateResult is files.validate's result.
type ValidateResult struct {
	Valid bool   `json:"valid"`
	IsDir bool   `json:"isDir"`
	Error string `json:"error,omitempty"`
}

// ExtractOptions are files.extract_tar's extension params
// (FeatureExtractOptions). The daemon decodes them apart from PathParams,
// so that files.stat and the rest ignore them whatever their type, as
// claustrum ignores a key it does not know.
type ExtractOptions struct {
	// Modes is ModesOwner (the default: files 0600, directories 0700) or
	// ModesArchive.
	Modes string `json:"modes,omitempty"`
	// KeepArchive leaves archivePath in place.
	KeepArchive bool `json:"keepArchive,omitempty"`
}

// The values of ExtractOptions.Modes.
const (
	ModesOwner   = "owner"
	ModesArchive = "archive"
)

// ExtractParams are files.extract_tar's params with the extension's. With
// zero options they encode exactly as PathParams.
type ExtractParams struct {
	PathParams
	ExtractOptions
}

// ExtractResult is files.extract_tar's result. FileCount is emitted whenever
// the archive was opened (success, or a failure found while reading it).
type ExtractResult struct {
	Success   bool   `json:"success"`
	FileCount *int   `json:"fileCount,omitempty"`
	Error     string `json:"error,omitempty"`
}

// ---- git.* ----

// GitParams binds the params of every git.* method.
type GitParams struct {
	Path         string `json:"path"`
	BaseRepo     string `json:"baseRepo,omitempty"`
	BranchName   string `json:"branchName,omitempty"`
	WorktreePath string `json:"worktreePath,omitempty"`
	SourceBranch string `json:"sourceBranch,omitempty"`
	// Extensions: git.worktree_remove.strict, git.worktree_create.newbranch.
	Strict          bool `json:"strict,omitempty"`
	ReportNewBranch bool `json:"reportNewBranch,omitempty"`
	// Extension git.worktree_create.include: globs of untracked paths to
	// copy from the repository into the new worktree.
	Include []string `json:"include,omitempty"`
}

// GitInfoResult is git.info's result for a repository. For a path outside any
// repository only IsRepo, RepoSlug and DefaultBranch are sent
// (see GitInfoNotRepo).
type GitInfoResult struct {
	IsRepo        bool   `json:"isRepo"`
	Repo          string `json:"repo"`
	Branch        string `json:"branch"`
	Root          string `json:"root"`
	RepoSlug      string `json:"repoSlug"`
	DefaultBranch string `json:"defaultBranch"`
}

// GitInfoNotRepo is git.info's result outside a repository.
type GitInfoNotRepo struct {
	IsRepo        bool   `json:"isRepo"`
	RepoSlug      string `json:"repoSlug"`
	DefaultBranch string `json:"defaultBranch"`
}

// GitStatusResult is git.status's result.
type GitStatusResult struct {
	IsRepo  bool     `json:"isRepo"`
	Clean   bool     `json:"clean"`
	Changes []string `json:"changes,omitempty"`
}

// GitBranchesResult is git.list_branches' result.
type GitBranchesResult struct {
	IsRepo   bool     `json:"isRepo"`
	Branches []string `json:"branches"`
}

// WorktreeResult is the result of git.worktree_create and git.worktree_remove.
type WorktreeResult struct {
	Success      bool   `json:"success"`
	Path         string `json:"path,omitempty"`
	SourceBranch string `json:"sourceBranch,omitempty"`
	Error        string `json:"error,omitempty"`
	ErrorCode    string `json:"errorCode,omitempty"`
	// NewBranch: whether create made branchName (asked for with
	// reportNewBranch; absent otherwise).
	NewBranch *bool `json:"newBranch,omitempty"`
	// Changes: what a strict remove refused to lose (ErrCodeWorktreeDirty).
	Changes []string `json:"changes,omitempty"`
}

// Worktree error codes.
const (
	ErrCodeNotARepo          = "not_a_repo"
	ErrCodeWorktreeAddFailed = "worktree_add_failed"
	// A strict git.worktree_remove's refusals (git.worktree_remove.strict).
	ErrCodeWorktreeDirty = "worktree_dirty"
	ErrCodeNotAWorktree  = "not_a_worktree"
)

// ---- process.* ----

// ProcessParams binds the params of every process.* method.
type ProcessParams struct {
	ID      string             `json:"id"`
	Command string             `json:"command,omitempty"`
	Args    []string           `json:"args,omitempty"`
	Cwd     string             `json:"cwd,omitempty"`
	Env     map[string]*string `json:"env,omitempty"` // a null value unsets an inherited variable (extension)
	WantPid bool               `json:"wantPid,omitempty"`
	// NotifyGone asks for a Gone notification (process.gone extension).
	NotifyGone bool   `json:"notifyGone,omitempty"`
	Data       string `json:"data,omitempty"`
	Offset     *int64 `json:"offset,omitempty"`
	Close      bool   `json:"close,omitempty"` // process.stdin.close extension
	Signal     string `json:"signal,omitempty"`
	TimeoutMs  *int64 `json:"timeoutMs,omitempty"`
	ExitSignal bool   `json:"exitSignal,omitempty"`
	Escalate   *bool  `json:"escalate,omitempty"`
	FromSeq    int64  `json:"fromSeq,omitempty"`
	// Extensions of process.spawn (timeoutMs above is also spawn's limit).
	Pipeline [][]string `json:"pipeline,omitempty"` // process.spawn.pipeline: instead of command and args
	Tty      bool       `json:"tty,omitempty"`      // process.spawn.tty
	Size     *TermSize  `json:"size,omitempty"`     // process.spawn.tty: the terminal's size (default 24x80)
	Sandbox  *Sandbox   `json:"sandbox,omitempty"`  // process.spawn.sandbox; absent or null: unsandboxed
	Mirror   []string   `json:"mirror,omitempty"`   // process.spawn.mirror(.stdin): the streams of the passed descriptors, in order
	Direct   bool       `json:"direct,omitempty"`   // process.spawn.mirror.direct: the passed stdout and stderr are the child's own
	SpawnKey string     `json:"spawnKey,omitempty"` // process.spawn.key: a resend with the same key answers, it does not spawn again
	// process.spawn.stdin.closed: the child's stdin is closed from its start.
	StdinClosed bool `json:"stdinClosed,omitempty"`
	// process.reattach by the spawner of a mirrored process, on a new
	// connection (process.spawn.mirror): it has what the daemon mirrored,
	// so those frames come marked, without data, as on the spawn's.
	Mirrored bool `json:"mirrored,omitempty"`
	// process.resize's new size.
	Rows int `json:"rows,omitempty"`
	Cols int `json:"cols,omitempty"`
}

// TermSize is a terminal's size in character cells.
type TermSize struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

// DefaultTermSize is the size of a terminal spawned without one.
var DefaultTermSize = TermSize{Rows: 24, Cols: 80}

// Sandbox is process.spawn's "sandbox" (extension process.spawn.sandbox):
//
//	"sandbox": {"mode": "read-only" | "workspace-write", "write": [path, ...], "network": false}
//
// The child (every stage of a pipeline, a terminal's child too) may read and
// execute anything, and write only beneath the write roots (files or
// directories; relative ones are resolved against the process's cwd), plus
// /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom and /dev/tty.
// Mode "read-only" takes no write roots; "workspace-write" takes any number
// (at least one is usual). "network": false (the default) starts the child in
// a private network namespace where nothing is reachable, not even the
// host's loopback; true keeps the host's network. The child cannot signal
// processes outside its sandbox or reach their abstract Unix sockets
// (Landlock ABI 6), and where it gets a mount namespace (see package
// sandbox) it cannot change the metadata of files outside its write roots
// nor connect to the daemon's own sockets.
//
// Validation, after the id and the command: a mode other than the two, a
// write root in read-only mode, or an empty write root is -32602; a sandbox
// the kernel cannot enforce, a write root that does not exist, or a
// namespace that cannot be created is -32603, and nothing runs. A daemon
// never runs a process unsandboxed that asked for a sandbox.
type Sandbox struct {
	Mode    string   `json:"mode"`
	Write   []string `json:"write,omitempty"`
	Network bool     `json:"network,omitempty"`
}

// Sandbox modes.
const (
	SandboxReadOnly       = "read-only"
	SandboxWorkspaceWrite = "workspace-write"
)

// SpawnResult is process.spawn's result.
type SpawnResult struct {
	Success   bool    `json:"success"`
	Pid       int     `json:"pid,omitempty"`
	StartTime float64 `json:"startTime,omitempty"`
}

// StdinResult is process.stdin's result.
type StdinResult struct {
	Success   bool  `json:"success"`
	Applied   int64 `json:"applied"`
	Duplicate bool  `json:"duplicate,omitempty"`
}

// SuccessResult is the plain {"success":true} result.
type SuccessResult struct {
	Success bool `json:"success"`
}

// KillAndWaitResult is process.killAndWait's result.
type KillAndWaitResult struct {
	Found         bool `json:"found"`
	Died          bool `json:"died"`
	AlreadyExited bool `json:"alreadyExited,omitempty"`
	Escalated     bool `json:"escalated,omitempty"`
}

// ReattachResult is process.reattach's result.
type ReattachResult struct {
	Found        bool    `json:"found"`
	Running      bool    `json:"running"`
	FirstSeq     int64   `json:"firstSeq"`
	LastSeq      int64   `json:"lastSeq"`
	StdinApplied int64   `json:"stdinApplied"`
	Pid          int     `json:"pid,omitempty"`
	StartTime    float64 `json:"startTime,omitempty"`
}

// ProcessInfo is one entry of process.list (extension).
type ProcessInfo struct {
	ID        string   `json:"id"`
	Running   bool     `json:"running"`
	Pid       int      `json:"pid"`
	Command   string   `json:"command"`
	Args      []string `json:"args"`
	ExitCode  *int     `json:"exitCode,omitempty"`
	StartTime float64  `json:"startTime"`
	LastSeq   int64    `json:"lastSeq"`
	// Pipeline lists every stage of a pipeline process (Command and Args
	// are its first stage's); absent for other processes.
	Pipeline [][]string `json:"pipeline,omitempty"`
	Tty      bool       `json:"tty,omitempty"`
	// Signal is the signal that ended an exited process whose exitCode
	// is -1 (its last stage's, for a pipeline), whoever spawned it;
	// absent otherwise, and from daemons before it.
	Signal int `json:"signal,omitempty"`
}

// ProcessListResult is process.list's result (extension).
type ProcessListResult struct {
	Processes []ProcessInfo `json:"processes"`
}

// SummarizeChanges names the changes of a dirty worktree in one line for
// messages: the first few git.status porcelain lines (leading blanks
// trimmed), then how many more ("M a.txt, ?? new and 3 more").
func SummarizeChanges(changes []string) string {
	const shown = 5
	n := min(len(changes), shown)
	parts := make([]string, n)
	for i, c := range changes[:n] {
		parts[i] = strings.TrimLeft(c, " ")
	}
	s := strings.Join(parts, ", ")
	if more := len(changes) - n; more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// CredentialEnv names the environment variables through which a sous
// client finds a daemon and authenticates to it. A daemon never passes them
// on from its own environment to the processes it starts (a spawn may still
// set them in env): a sandboxed command that inherited them could ask the
// daemon to run anything outside its sandbox.
var CredentialEnv = []string{"SOUS_TOKEN", "CLAUDE_RPC_TOKEN", "SOUS_SOCKET", "SOUS_REMOTE"}
