// Package runtime is the recipe framework: it compiles a recipe and every
// file it loads before anything runs (so syntax errors, undefined names and
// load cycles are usage errors that start nothing), sets up the Starlark
// thread with the recipe dialect of RECIPES.md, the event loop, the output
// (everything the run says is published once on its event bus,
// runtime/event, which every output reads: the human lines or the JSON
// events of --json, and the views of runtime/view: the status area on a
// terminal, the summary, GitHub Actions) and the end of the approver chain
// (--allow/--deny, the prompt, the default), picks the default host (a
// --socket or --remote daemon, else the embedded daemon, started on first
// use), runs the recipe, then the calls it deferred, and last closes every
// connection, stopping the embedded daemon's processes.
//
// It defines how builtins plug in, as Tilt's starkit does, and knows no
// builtin itself: a Plugin lists Entries (a name, its signature, its doc
// and its Func) and may keep state for each run (OnStart, found again with
// Env.State; an io.Closer state is closed when the run ends). A Table built
// from the plugins is the one list of names: the globals of a run, the
// attributes of values such as Host, what Check resolves against and what
// `sous doc` prints. Each Func gets a Call with the run's Env: its
// context, event loop (Waiter), Output, daemon connections (Connector,
// whose Daemon and Proc are the part of daemon/client the builtins use),
// the Approver, and Defer for calls to make when the recipe ends.
//
// The builtins themselves are package builtins; cmd/sous composes the two,
// passing builtins.DefaultTable() to Run and Check. The rule engine
// (runtime/rules) and the agent engine (runtime/agent) are packages of
// their own, with no Starlark in them.
//
// One run is one Run call: nothing is kept between runs.
package runtime
