package rules

import "testing"

// TestDenyLooksThroughWrappers: a deny rule for rm matches rm run through
// an assignment, a keyword, a wrapper program, an absolute path or a shell
// script, while an allow rule for rm allows none of them.
func TestDenyLooksThroughWrappers(t *testing.T) {
	t.Parallel()
	deny := Set{Deny: mustRules(t, "deny", "Bash(rm:*)", "Sudo(rm:*)")}
	allow := Set{Allow: mustRules(t, "allow", "Bash(rm:*)", "Sudo(rm:*)")}
	for _, cmd := range []string{
		"FOO=1 rm -rf x", "command rm x", "command -p rm x", "env rm x", "env -i rm x", "env -i FOO=1 rm x",
		"env -u HOME rm x", "exec rm x", "exec -a name rm x", "nohup rm x", "time rm x", "time -p rm x",
		"nice rm x", "nice -n 5 rm x", "timeout 5 rm x", "timeout -s KILL 5 rm x", "xargs rm", "xargs -0 -I{} rm {}",
		"sudo rm x", "sudo -u root -- rm x", "sudo -- -/rm x", "env -i -/rm", "sudo env FOO=1 nice rm x", "builtin rm x", "/bin/rm x", "/usr/bin/rm -rf x",
		"./rm x", `\rm x`, `r''m x`, `"rm" x`, "stdbuf -oL rm x", "setsid rm x", "doas rm x",
		"find . -name x -exec rm {} ;", "find . -execdir rm -f {} +", "sh -c 'rm -rf x'", "bash -lc \"rm x\"",
		"sudo sh -c 'cd /; rm -rf x'", "eval rm x", "eval 'rm x'", "ls; sudo rm x", "if true; then env rm x; fi",
	} {
		if v, _ := deny.Decide(bash(cmd)); v != Denied {
			t.Errorf("deny Bash(rm:*) %s %q", v, cmd)
		}
		if v, _ := allow.Decide(bash(cmd)); v == Allowed && cmd != `\rm x` && cmd != `r''m x` && cmd != `"rm" x` {
			t.Errorf("allow Bash(rm:*) allows %q: allow rules must not look through wrappers", cmd)
		}
	}
	for _, argv := range [][]any{{"env", "rm", "x"}, {"/bin/rm", "x"}, {"nice", "-n", "5", "rm"}, {"sh", "-c", "rm -rf /x"}} {
		req := Request{Tool: "Sudo", Input: map[string]any{"command": argv}}
		if v, _ := deny.Decide(req); v != Denied {
			t.Errorf("deny Sudo(rm:*) %s %q", v, argv)
		}
		if v, _ := allow.Decide(req); v == Allowed {
			t.Errorf("allow Sudo(rm:*) allows %q", argv)
		}
	}
	// What does not run rm is not denied.
	for _, cmd := range []string{"ls rm", "echo rm", "git rm x", "grep -r rm .", "find . -name rm", "rmdir x", "echo 'sudo rm'"} {
		if v, _ := deny.Decide(bash(cmd)); v == Denied {
			t.Errorf("deny Bash(rm:*) denies %q, which runs no rm", cmd)
		}
	}
}

// TestDenyShellFormsRunRm checks against real bash that the shell-level
// forms above do run rm, so the deny rule is right to match them.
func TestDenyShellFormsRunRm(t *testing.T) {
	t.Parallel()
	o := newBashOracle(t)
	work := t.TempDir()
	deny := Set{Deny: mustRules(t, "deny", "Bash(rm:*)")}
	for _, cmd := range []string{
		"FOO=1 rm x", "time rm x", "! rm x", `\rm x`, `r''m x`, `"rm" x`, "$'rm' x", `$'\x72m' x`, "if true; then rm x; fi",
		"{ rm x; }", "(rm x)", "echo $(rm x)", "echo `rm x`", "x=$(rm x)", "echo ${y:-$(rm x)}", o.bin() + "/rm x",
	} {
		run, ok := o.run(t, work, cmd)
		if !ok {
			continue
		}
		ranRm := false
		for _, argv := range run.execs {
			ranRm = ranRm || argv[0] == "rm" || argv[0] == o.bin()+"/rm"
		}
		if !ranRm {
			t.Errorf("bash -c %q ran %q, no rm: the case tests nothing", cmd, run.execs)
		}
		if v, _ := deny.Decide(bash(cmd)); v != Denied {
			t.Errorf("deny Bash(rm:*) %s %q, which bash runs as %q", v, cmd, run.execs)
		}
	}
}
