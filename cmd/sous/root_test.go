package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestTopLevelCommandsAreNamedAsTheyAreBuilt: newCmdRootFor picks the one
// command to build by the name in topLevelCommands, so each name must be
// the name (and the only one) of the command it builds.
func TestTopLevelCommandsAreNamedAsTheyAreBuilt(t *testing.T) {
	t.Parallel()
	f := newTestFactory(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, nil)
	for _, c := range topLevelCommands() {
		cmd := c.build(f)
		if cmd.Name() != c.name || len(cmd.Aliases) != 0 {
			t.Errorf("%q builds %q (aliases %v)", c.name, cmd.Name(), cmd.Aliases)
		}
	}
	if got, want := len(newCmdRoot(f).Commands()), len(topLevelCommands()); got != want {
		t.Errorf("the whole tree has %d commands, the list %d", got, want)
	}
}

// TestOneCommandTreeAnswersAsTheWholeTree: a command line that names a
// top-level command first is parsed by a root holding that command alone
// (newCmdRootFor); what it prints and its exit code must be what the whole
// tree gives: help, usage and flag errors, group help, an unknown
// subcommand of a group.
func TestOneCommandTreeAnswersAsTheWholeTree(t *testing.T) {
	t.Parallel()
	lines := [][]string{
		{"run", "--help"}, {"run"}, {"run", "--bogus", "x.star"}, {"run", "-a", "novalue", "x.star"},
		{"run", "--json", "--bogus", "x.star"}, {"run", "a.star", "b.star"},
		{"exec", "--help"}, {"exec"}, {"daemon"}, {"daemon", "--help"}, {"daemon", "nope"}, {"daemon", "serve", "--help"},
		{"git", "worktree", "nope"}, {"files", "--help"}, {"version", "--help"}, {"doc", "--help"}, {"check", "--help"},
		{"ps", "--bogus"}, {"model", "serve", "--help"}, {"runs", "--help"}, {"resume"}, {"approvals", "--help"},
	}
	for _, c := range topLevelCommands() {
		lines = append(lines, []string{c.name, "--help"})
	}
	for _, args := range lines {
		var wholeOut, wholeErr, oneOut, oneErr bytes.Buffer
		whole := executeRoot(newTestFactory(strings.NewReader(""), &wholeOut, &wholeErr, nil), newCmdRoot(newTestFactory(strings.NewReader(""), &wholeOut, &wholeErr, nil)), args)
		f := newTestFactory(strings.NewReader(""), &oneOut, &oneErr, nil)
		root := newCmdRootFor(f, args)
		if args[0] != "completion" && len(root.Commands()) != 1 {
			t.Errorf("%q: the root has %d commands, want the one named", args, len(root.Commands()))
		}
		one := executeRoot(f, root, args)
		if one != whole || untimed(oneOut.String()) != untimed(wholeOut.String()) || oneErr.String() != wholeErr.String() {
			t.Errorf("%q: one command: exit %d\n%s%s\nthe whole tree: exit %d\n%s%s", args, one, oneOut.String(), oneErr.String(),
				whole, wholeOut.String(), wholeErr.String())
		}
	}
}

// untimed drops the times of --json events, which differ between two runs.
func untimed(s string) string {
	return regexp.MustCompile(`"time":"[^"]*"`).ReplaceAllString(s, `"time":""`)
}
