package builtins

import (
	"slices"

	"github.com/seed5ad92d46/sous/runtime"
)

// Config is what a build may set about its builtins.
type Config struct {
	// Lines bounds what a Process.lines() iteration holds; the zero value
	// is the documented bounds.
	Lines LinesLimits
}

// The names of the plugins that keep state for a run (runtime.Env.State).
const (
	procPlugin   = "proc"
	agentsPlugin = "agents"
)

// Plugins returns the builtin groups of this build with the documented
// bounds.
func Plugins() []runtime.Plugin { return Config{}.Plugins() }

// Plugins returns the builtin groups of this build. Each call builds them
// afresh: no table is shared between runs through a package variable, and
// what a plugin keeps for a run is made by its OnStart for that run.
func (cfg Config) Plugins() []runtime.Plugin {
	return []runtime.Plugin{
		{Name: "core", Entries: slices.Concat(coreEntries(), numberEntries(), deferEntries(), waitEntries(), fanoutEntries(), retryEntries(), budgetEntries())},
		{Name: procPlugin, Entries: slices.Concat(spawnEntries(), runEntries(), pipelineEntries(), processEntries(), resultEntries()),
			OnStart:  func(*runtime.Env) any { return &procState{lines: cfg.Lines} },
			Decoders: map[string]runtime.Decoder{resultKind: decodeResult, processKind: decodeProcess}},
		{Name: "files", Entries: filesEntries()},
		{Name: "secrets", Entries: secretsEntries()},
		{Name: "git", Entries: append(gitEntries(), gitFinishEntries()...)},
		{Name: "hosts", Entries: slices.Concat(hostEntries(), poolEntries())},
		{Name: agentsPlugin, Entries: slices.Concat(sdkEntries(), hookEntries(), approvalEntries(), toolEntries(), controlEntries(), agentDefEntries()),
			Decoders: map[string]runtime.Decoder{sessionKind: decodeSession, turnKind: decodeTurn, pendingKind: decodePending},
			OnStart: func(env *runtime.Env) any {
				a := &agents{}
				env.Budget.OnExceeded(a.stopTurns)
				return a
			}},
	}
}

// DefaultTable is the table of every builtin of this build.
func DefaultTable() *runtime.Table { return runtime.MustTable(Plugins()...) }

// procState is what the process builtins keep for a run.
type procState struct {
	// The run's processes that have not ended, for spawn's id check
	// (live.go).
	live  liveProcesses
	lines LinesLimits
}

// procOf is the process builtins' state in the run env.
func procOf(env *runtime.Env) *procState { return env.State(procPlugin).(*procState) }

// agentsOf is the agent builtins' state in the run env (sdk.go).
func agentsOf(env *runtime.Env) *agents { return env.State(agentsPlugin).(*agents) }
