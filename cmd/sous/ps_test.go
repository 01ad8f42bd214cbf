package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestPsQuotesCommandsAndNamesSignals: sous ps shows each command as a
// shell would need it typed (it joined the words with spaces, so 'a b'
// and an empty argument could not be told apart, and a newline broke the
// table), a pipeline's every stage, and how a process killed by a signal
// ended (it showed "exited -1"), whoever spawned it.
func TestPsQuotesCommandsAndNamesSignals(t *testing.T) {
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	flags := []string{"--socket", sock, "--token-file", tokenFile(t, "tok")}
	run := func(args ...string) outcome {
		t.Helper()
		o := sous(t, append(args[:1:1], append(flags, args[1:]...)...)...)
		if o.code != 0 {
			t.Fatalf("sous %v: exit %d\n%s", args, o.code, o.stderr)
		}
		return o
	}
	run("exec", "--detach", "--id", "quoted", "--", "printf", "%s|", "a b", "", "it's")
	run("exec", "--detach", "--id", "newline", "--", "echo", "x\ny")
	run("exec", "--detach", "--id", "killed", "--", "sleep", "30")
	run("exec", "--detach", "--id", "crashed", "--", "sh", "-c", "kill -SEGV $$")
	// Spawned by a client that did not ask the exit frame to carry the
	// signal (process.spawn.exitsignal), as claustrum's clients do not.
	run("rpc", "process.spawn", `{"id":"raw","command":"sleep","args":["30"]}`)
	run("rpc", "process.spawn", `{"id":"piped","pipeline":[["echo","a b"],["tr","a","b"]]}`)
	run("exec", "--detach", "--id", "running", "--", "sleep", "30")
	run("kill", "killed", "--signal", "KILL", "--wait")
	run("kill", "raw", "--wait")

	var list []struct {
		ID       string `json:"id"`
		Running  bool   `json:"running"`
		ExitCode *int   `json:"exitCode"`
		Signal   int    `json:"signal"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := json.Unmarshal([]byte(run("ps", "--json").stdout), &list); err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, p := range list {
			if p.Running {
				running++
			}
		}
		if running == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running: %+v", list)
		}
	}
	signals := map[string]int{}
	for _, p := range list {
		signals[p.ID] = p.Signal
	}
	if signals["killed"] != 9 || signals["raw"] != 15 || signals["crashed"] != 11 || signals["quoted"] != 0 {
		t.Errorf("ps --json signals: %v", signals)
	}

	rows := map[string]string{}
	lines := strings.Split(strings.TrimSuffix(run("ps").stdout, "\n"), "\n")
	for _, line := range lines[1:] {
		rows[strings.Fields(line)[0]] = line
	}
	if len(rows) != len(lines)-1 || len(rows) != 7 {
		t.Fatalf("ps printed %d rows for 7 processes:\n%s", len(lines)-1, strings.Join(lines, "\n"))
	}
	for id, want := range map[string][2]string{
		"quoted":  {"exited 0", `printf '%s|' 'a b' '' 'it'\''s'`},
		"newline": {"exited 0", `echo $'x\ny'`},
		"killed":  {"killed (SIGKILL)", "sleep 30"},
		"raw":     {"killed (SIGTERM)", "sleep 30"},
		"crashed": {"killed (SIGSEGV)", `sh -c 'kill -SEGV $$'`},
		"piped":   {"exited 0", `echo 'a b' | tr a b`},
		"running": {"running", "sleep 30"},
	} {
		row := rows[id]
		if !strings.Contains(row, "  "+want[0]+"  ") || !strings.HasSuffix(row, "  "+want[1]) {
			t.Errorf("ps row of %s:\n%s\nwant status %q and command %q", id, row, want[0], want[1])
		}
	}
	run("kill", "running", "--signal", "KILL", "--wait")
}

func TestShellJoin(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"go", "test", "./..."}, "go test ./..."},
		{[]string{"echo", "a b", ""}, "echo 'a b' ''"},
		{[]string{"sh", "-c", "echo $HOME; exit 3"}, `sh -c 'echo $HOME; exit 3'`},
		{[]string{"echo", "it's"}, `echo 'it'\''s'`},
		{[]string{"printf", "a\tb\n"}, `printf $'a\tb\n'`},
		{[]string{"echo", "it's\n"}, `echo $'it\'s\n'`},
		{[]string{"x", "\xff\x01", "\u0085", "é"}, `x $'\xff\x01' $'\u0085' é`},
		// A bidirectional override or a zero-width character would make
		// the row read as another command.
		{[]string{"rm", "-rf", "\u202e/ hsab", "a\u200bb"}, `rm -rf $'\u202e/ hsab' $'a\u200bb'`},
	} {
		if got := shellJoin(tc.argv); got != tc.want {
			t.Errorf("shellJoin(%q) = %s, want %s", tc.argv, got, tc.want)
		}
	}
}
