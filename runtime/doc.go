// Package runtime runs recipes: it compiles a recipe and every file it
// loads before anything runs (so syntax errors, undefined names and load
// cycles are usage errors that start nothing), sets up the Starlark thread
// with the recipe dialect of RECIPES.md, the builtins of a builtins.Table,
// the event loop and the output (human, or JSON events with --json), picks
// the default host (a --socket daemon, else the embedded daemon, started on
// first use) and, when the recipe ends, closes every connection, stopping
// the embedded daemon's processes.
//
// One run is one Run call: nothing is kept between runs.
package runtime
