package rules

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// FuzzShellModelMatchesBash holds the shell model to real bash for any
// line: whenever the model calls a line safe (an allow rule may cover it),
// bash, run in a throwaway sandbox with set -x, executed only the model's
// commands with the model's words (checkAgainstBash). The seeds are the
// attacks of TestAllowRuleRunsNothingElse and generated lines.
//
// The lines are anyone's, so it runs only where bash can be sandboxed.
// Run it with: go test -run '^$' -fuzz FuzzShellModelMatchesBash
// -fuzztime 60s -parallel 1 ./runtime/rules/
func FuzzShellModelMatchesBash(f *testing.F) {
	o := newBashOracle(f)
	if !o.sandboxed {
		f.Skip("no sandbox here: fuzzed lines must not run in an unconfined bash")
	}
	for _, s := range []string{
		`go test $'\' '; touch pw1 #'`, `go test '$(touch pw2)'; go test ${_@P}`, `go test 'a[$(touch pw3)]'; go test $[_]`,
		`go test ${PATH:_:1}`, `go test ${!_}`, `go test ${a[_]}`, "go test $\\\n{_@P}", "go test \\\n; touch x",
		"go test ./... 2>&1 | tail -n 5", "x=1 go", "((x))", "[[ x ]]", "%1", "go test\n",
	} {
		f.Add(s)
	}
	r := rand.New(rand.NewPCG(36, 1))
	for range 64 {
		f.Add(genCommand(r, o.bin()))
	}
	work := f.TempDir()
	f.Fuzz(func(t *testing.T, line string) {
		// bash -c takes no NUL; a \x01 would be read as a trace entry's
		// start; a real program named by path would run unrecorded.
		if strings.ContainsAny(line, "\x00\x01") || o.namesRealProgram(line) || namesAProgram(parseShell(line), o.bin()) {
			return
		}
		checkAgainstBash(t, o, work, line)
	})
}

// namesAProgram reports a command of p named by a path other than the
// oracle's stubs (an ANSI-C quote can spell `/bin/rm` without the text
// showing it).
func namesAProgram(p shellParse, stubs string) bool {
	return slices.ContainsFunc(p.cmds, func(c command) bool {
		name := c[0].text
		return strings.Contains(name, "/") && !strings.HasPrefix(name, stubs+"/")
	})
}
