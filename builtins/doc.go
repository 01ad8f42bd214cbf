// Package builtins holds the Starlark bindings of sous, grouped as plugins
// of the runtime (proc, files, git, hosts, agents and the core names):
// thin functions that check their arguments, call the daemon through the
// run's runtime.Daemon, and shape its results into Starlark values. They
// hold no protocol logic (that is daemon/client's), no policy logic (that
// is runtime/rules') and no framework: the interpreter, the event loop, the
// output, the approvals chain and the daemon connections are package
// runtime's, which defines the Plugin, Entry, Call and Env this package
// fills in. Nothing here outlives a run: everything a run shares arrives in
// its *runtime.Env, and what a plugin keeps for a run (the live processes,
// the agent sessions and the recipe's policy) is its state, made by its
// OnStart (see Plugins).
//
// Every name a recipe can use is an Entry of one of these plugins;
// DefaultTable builds the runtime.Table that `sous run`, `sous check` and
// `sous doc` use. A new group of builtins is one more Plugin.
//
// Conventions, following go.starlark.net's lib/: a builtin is named by its
// qualified name (files.stat, Process.wait), and every error it returns starts
// with that name; argument errors name the argument and say what was wanted
// ("spawn: cwd: want string, got int").
package builtins
