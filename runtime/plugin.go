package runtime

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"go.starlark.net/starlark"
)

// How a plugin registers its builtins, as Tilt's starkit does: a plugin is
// a value that lists the names it defines (Entries) and may keep state for
// each run (OnStart). The runtime builds a Table from the plugins it is
// given, registers the globals from it and runs the recipe; the plugins
// never see the interpreter, and the runtime never sees a plugin's state.

// Plugin is a group of builtins.
type Plugin struct {
	Name    string
	Entries []Entry
	// OnStart, when set, is called as a run starts, before any recipe code
	// runs, with the run's Env; it returns what the plugin keeps for that
	// run (nil: nothing), which its builtins find again with
	// Env.State(Name). A plugin keeps nothing between runs and nothing in
	// package variables: a run's state lives and dies with its Env.
	//
	// A state that implements io.Closer is closed when the run ends, after
	// the recipe's deferred calls and before the run's daemon connections
	// close: what it holds open (an agent's CLI) ends while its daemon is
	// still there to reap it. Close's error is reported in one line, as
	// "sous: " and the error.
	OnStart func(env *Env) any
	// Decoders make the plugin's Recordable values again from a run's
	// journal, by their Record kind (journalvalue.go).
	Decoders map[string]Decoder
}

// Func implements a builtin function or method.
type Func func(c *Call) (starlark.Value, error)

// Call is one invocation of a builtin.
type Call struct {
	Env    *Env
	Thread *starlark.Thread
	Name   string // the builtin's qualified name; every error starts with it
	Args   starlark.Tuple
	Kwargs []starlark.Tuple
	Host   *Host          // the host a host-bound builtin acts on
	Recv   starlark.Value // the receiver of a method
	// Since is when a journaled call first started, when a resumed run
	// does again a call its runner died in (zero otherwise): sleep waits
	// only what is left.
	Since time.Time
	// JournalID names the call in a durable run ("RUN-SEQ", stable across
	// resumes), "" in a run without a journal: what a builtin derives the
	// ids of what it starts from, so that a resume can find them again
	// (durablelive.go).
	JournalID string
	// Rejoining is set when a resumed run does again a call of an entry
	// with Rejoin whose runner died in it on a daemon that outlives the
	// runner: the builtin takes over what the call had started.
	Rejoining bool
	started   int // the processes the call started (NewProcessID)
}

// Errorf returns an error prefixed with the builtin's name.
func (c *Call) Errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", c.Name, fmt.Sprintf(format, args...))
}

// Entry documents one name and, unless it is documentation only, implements
// it. The name says what it is:
//
//   - "spawn": a global; a function (Fn) or a value made per run (Value).
//     A global with neither is Starlark's own (print, fail, load) or the
//     heading of a module or a type.
//   - "files.stat": a member of the module "files". Modules are built from
//     their members.
//   - "Process.wait": a method (Fn) or attribute (Attr) of the type
//     "Process". Types are capitalised.
type Entry struct {
	Name string
	Sig  string // how it is called: "spawn(cmd, args=[], *, ...) -> Process"
	Doc  string
	// Host marks builtins that act on a daemon: the global acts on the
	// default host, and the same name is a method of every Host value
	// (h.spawn, h.files).
	Host  bool
	Fn    Func
	Attr  func(recv starlark.Value) starlark.Value
	Value func(env *Env) starlark.Value
	// Journal says what a durable run's journal does with a call of Fn
	// (durable.go). The zero value, JournalLive, is the safe one: a
	// journal holding such a call is not resumed.
	Journal Journaling
	// Replayed, when set, is called with a value a resumed run answered
	// a call of Fn with from the journal: what the call would have done
	// besides returning it (getenv(secret=True) redacts it).
	Replayed func(c *Call, v starlark.Value)
	// Rejoin says the builtin can take over what a call of it had
	// started when its runner died in it on a daemon that outlives the
	// runner (Call.Rejoining): a resume does it again rather than stop.
	Rejoin bool
}

// Owner is the module or type an entry belongs to ("" for a global), and
// Short is its name within it.
func (e *Entry) Owner() (owner, short string) {
	if i := strings.IndexByte(e.Name, '.'); i >= 0 {
		return e.Name[:i], e.Name[i+1:]
	}
	return "", e.Name
}

// IsType reports whether the name is a type's (Process, Result, Host).
func IsType(name string) bool {
	r := []rune(name)
	return len(r) > 0 && unicode.IsUpper(r[0])
}
