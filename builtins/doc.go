// Package builtins holds the Starlark bindings of sous: thin functions that
// check their arguments, call daemon/client, and shape its results into
// Starlark values. They hold no protocol logic (that is daemon/client's) and
// no state of their own: everything a run shares (its context, event loop,
// output and daemon connections) arrives in the *Env the runtime makes for
// each run.
//
// Every name a recipe can use is an Entry of a Plugin. A Table built from the
// plugins is the only list of names: the runtime registers the globals from
// it, the Process, Result and Host types answer attribute lookups from it,
// `sous check` resolves names against it and `sous doc` prints it. A new group
// of builtins (the agent builtins, say) is one more Plugin.
//
// Conventions, following go.starlark.net's lib/: a builtin is named by its
// qualified name (files.stat, Process.wait), and every error it returns starts
// with that name; argument errors name the argument and say what was wanted
// ("spawn: cwd: want string, got int").
package builtins
