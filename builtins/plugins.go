package builtins

import "slices"

// Plugins returns the builtin groups of this build. Each call builds them
// afresh: no table is shared between runs through a package variable.
func Plugins() []Plugin {
	return []Plugin{
		{Name: "core", Entries: slices.Concat(coreEntries(), numberEntries(), deferEntries(), waitEntries())},
		{Name: "proc", Entries: slices.Concat(spawnEntries(), runEntries(), pipelineEntries(), processEntries(), resultEntries())},
		{Name: "files", Entries: filesEntries()},
		{Name: "git", Entries: gitEntries()},
		{Name: "hosts", Entries: hostEntries()},
		{Name: "agents", Entries: slices.Concat(sdkEntries(), approvalEntries())},
	}
}

// DefaultTable is the table of every builtin of this build.
func DefaultTable() *Table { return MustTable(Plugins()...) }
