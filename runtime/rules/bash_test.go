package rules

import "testing"

// TestAllowRuleRunsNothingElse: each command below makes real bash run
// `touch` although its words start with `go test`. Bash(go test:*) must not
// allow any of them: the shell model reads ANSI-C quotes as bash does, and
// an expansion that can run code ($[..], $((..)), ${x@P}, ${!x}, substring
// offsets, subscripts) makes a command unmatchable by an allow rule.
func TestAllowRuleRunsNothingElse(t *testing.T) {
	t.Parallel()
	o := newBashOracle(t)
	work := t.TempDir()
	allow := Set{Allow: mustRules(t, "allow", "Bash(go test:*)")}
	for _, cmd := range []string{
		`go test $'\' '; touch pw1 #'`,
		`go test '$(touch pw2)'; go test ${_@P}`,
		`go test '$(touch pw2)'; go test "${_@P}"`,
		`go test 'a[$(touch pw3)]'; go test $[_]`,
		`go test 'a[$(touch pw3)]'; go test $((_))`,
		`go test 'a[$(touch pw3)]'; go test "$((_))"`,
		`go test 'a[$(touch pw4)]'; go test ${PATH:_:1}`,
		`go test 'a[$(touch pw4)]'; go test ${PATH:0:_}`,
		`go test 'a[$(touch pw5)]'; go test ${!_}`,
		`go test 'x[$(touch pw6)]'; go test ${a[_]}`,
		`go test $'a\'b '; touch pw7; #'`,
		// A backslash-newline goes before bash reads the line: $\<newline>{ is ${.
		"go test '$(touch pw8)'; go test $\\\n{_@P}",
		"go test '$(touch pw8)'; go test \"$\\\n{_@P}\"",
		"go test 'a[$(touch pw9)]'; go test $\\\n[_]",
		"go test 'a[$(touch pw9)]'; go test $\\\n(\\\n(_))",
		"go test 'a[$(touch pw9)]'; go test ${PATH:\\\n_:1}",
		"go test \\\n; touch pw10",
	} {
		run, ok := o.run(t, work, cmd)
		if !ok {
			continue
		}
		if !run.ran("touch") {
			t.Errorf("bash -c %q did not run touch (it ran %q; stderr %q): the case tests nothing", cmd, run.execs, run.stderr)
		}
		if v, _ := allow.Decide(bash(cmd)); v == Allowed {
			t.Errorf("Bash(go test:*) allows %q, which bash runs as %q", cmd, run.execs)
		}
	}
}
