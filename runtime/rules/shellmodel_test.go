package rules

import (
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Pieces of generated command lines: words in every quoting, expansions
// that are harmless and expansions that run code, operators, redirections,
// keywords, and leftovers that leave a quote or a substitution open.
var (
	genCommands = []string{"go", "rm", "ls", "x", "touch", "eval", "exec", "env", "command", "@BIN@/rm", "'go'", `g\o`, `"g"o`, "$'go'"}
	genPieces   = []string{
		"test", "./...", "-v", "-run=a#b", "a", "''", `""`, "'a b'", `"a b"`, `"a'b"`, `'a"b'`,
		`\;`, `\'`, `\"`, `\\`, `\ `, `\#`, `\$x`, "#c", "x#y", "a=b", "=", "%", "^", ",", ".",
		`$'\''`, `$'\' '`, `$'\\'`, `$'\x41'`, `$'\101'`, `$'a\nb'`, `$'\t'`, `$'\e'`, `$'\z'`, `$'\x'`, `$'\"'`, `$'\?'`, `$'\u0041'`, `$'\c@'`, `$'\0'`,
		`$"x"`, "$", "$$", "$1", "$@", "$*", "$#", "$?", "$-", "$_", "$x", "${x}", "${_}", "$HOME", `"$x"`, `"$_"`, `"${x}"`,
		"${x@P}", "${_@P}", `"${_@P}"`, "${!x}", "${!_}", "${PATH:_:1}", "${x:1:2}", "${a[1]}", "${a[_]}", "${#x}", "${x:-y}", "${x-$(touch p)}",
		"$[1+1]", "$[_]", "$((1))", "$((_))", `"$((_))"`, "$(touch p)", `"$(touch p)"`, "`touch p`", `"` + "`touch p`" + `"`,
		"'$(touch p)'", "'a[$(touch p)]'", "'${x@P}'", "'`touch p`'", `'$[_]'`,
		"*", "?", "[a]", "{a,b}", "{1..2}", "~", "~/x", "a*", "a{b,c}",
		"2>&1", ">&2", ">/dev/null", "> /dev/null", "2>/dev/null", "&>/dev/null", ">/dev/nullx", ">f", ">>f", "<f", "<<<x", "<<EOF", ">|/dev/null", ">& f", "<(touch p)", ">(touch p)",
		"(", ")", "((", "{", "}", "!", "if", "then", "fi", "[[", "]]", "time", "in", "do",
		"'", `"`, "`", "$(", "${", `\`, "$'", "\\\n", "{_@P}", "[_]", "((_))", "{x}", "'$'", `\$'x'`, "$$'x'",
	}
	genSeparators = []string{" ", " ", " ", " ", "  ", "\t", "", "", ";", "; ", " && ", " || ", " | ", " & ", "\n", " |& ", " ;; ", ";&", "\\\n", " \\\n"}
)

// genCommand builds a command line from random pieces. "@BIN@" in a piece
// is the oracle's directory of stubs: no generated line names a real
// program by path.
func genCommand(r *rand.Rand, bin string) string {
	var b strings.Builder
	b.WriteString(genCommands[r.IntN(len(genCommands))])
	for n := r.IntN(7); n >= 0; n-- {
		b.WriteString(genSeparators[r.IntN(len(genSeparators))])
		if r.IntN(4) == 0 {
			b.WriteString(genCommands[r.IntN(len(genCommands))])
		} else {
			b.WriteString(genPieces[r.IntN(len(genPieces))])
		}
	}
	return strings.ReplaceAll(b.String(), "@BIN@", bin)
}

// texts are the words of each command, for messages.
func (p shellParse) texts() [][]string {
	out := make([][]string, len(p.cmds))
	for i, c := range p.cmds {
		out[i] = c.texts()
	}
	return out
}

// allowable reports a parse an allow rule could cover: safe, with at least
// one command, each starting with a literal word.
func allowable(p shellParse) bool {
	if !p.safe() || len(p.cmds) == 0 {
		return false
	}
	for _, c := range p.cmds {
		if !c[0].literal {
			return false
		}
	}
	return true
}

// sameCommand reports whether bash's argv is what the model's command
// says: equal word by word up to the first word that is not literal (whose
// expansion may be any number of words), and as long when all are literal.
func sameCommand(c command, argv []string) bool {
	for i, w := range c {
		if !w.literal {
			return true
		}
		if i >= len(argv) || argv[i] != w.text {
			return false
		}
	}
	return len(argv) == len(c)
}

// runnable reports a command name bash can run here: any name without a
// slash reaches the recorder; one with a slash must be a file.
func runnable(name string) bool {
	if !strings.Contains(name, "/") {
		return true
	}
	_, err := os.Stat(name)
	return err == nil
}

// TestShellModelMatchesBash runs generated command lines through real bash
// and checks the model against what bash ran: whenever the model calls a
// line safe (an allow rule may cover it), every command bash ran is one of
// the model's commands with the same words, no file appeared, and a line
// of one all-literal command ran exactly that command.
func TestShellModelMatchesBash(t *testing.T) {
	t.Parallel()
	o := newBashOracle(t)
	work := t.TempDir()
	r := rand.New(rand.NewPCG(2026, 7))
	const cases = 4000
	lines := make([]string, 0, cases)
	for range cases {
		lines = append(lines, genCommand(r, o.bin()))
	}
	var (
		mu      sync.Mutex
		checked int
		wg      sync.WaitGroup
		next    = make(chan string)
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for line := range next {
				if checkAgainstBash(t, o, work, line) {
					mu.Lock()
					checked++
					mu.Unlock()
				}
			}
		}()
	}
	for _, line := range lines {
		next <- line
	}
	close(next)
	wg.Wait()
	// The generator must reach bash often enough for the test to mean
	// something.
	if checked < cases/10 {
		t.Errorf("only %d of %d generated lines were safe enough to check against bash", checked, cases)
	}
	t.Logf("%d of %d generated lines checked against bash (sandboxed: %v)", checked, cases, o.sandboxed)
}

// tracedWords reads back one command as set -x printed it: the words
// after expansion, quoted where bash would read them otherwise (a ~ within
// a word it leaves bare, which the model reads as the same text but takes
// for a possible expansion). An assignment or a `[[`/`((` makes it unsafe.
// ran are the commands bash ran or could not find (bashRun.execs), which
// tell a command named like an assignment from one.
func tracedWords(entry string, ran [][]string) ([]string, bool) {
	first, _, _ := strings.Cut(entry, " ")
	// set -x prints a command named by an alphabetic reserved word
	// (`\then` runs a command "then") without quoting it, where it quotes
	// '[[' and '!'; read it back as the command it was.
	if reserved[first] && strings.Trim(first, "abcdefghijklmnopqrstuvwxyz") == "" {
		entry = `\` + entry
	}
	// Nor does it quote a command named like an assignment (`"A=1"` runs
	// a command "A=1"), which set -x prints as it prints the assignment
	// A=1. A command of that name is not found (no stub has one), and the
	// oracle's command_not_found_handle records it; an assignment runs
	// nothing.
	if strings.Contains(first, "=") && slices.ContainsFunc(ran, func(argv []string) bool { return len(argv) > 0 && argv[0] == first }) {
		entry = `\` + entry
	}
	p := parseShell(entry)
	if !p.safe() || len(p.cmds) != 1 {
		return nil, false
	}
	return p.cmds[0].texts(), true
}

// checkAgainstBash runs line in bash when the model calls it safe, and
// reports whether it did. Whenever the model calls a line safe, every
// command bash ran, and every simple command it executed (set -x shows an
// assignment, `((..))`, a function too), is one of the model's commands
// with the same words, no file appeared, and a line of one all-literal
// command executed exactly that command.
func checkAgainstBash(t testing.TB, o *bashOracle, work, line string) bool {
	t.Helper()
	p := parseShell(line)
	if !allowable(p) {
		return false
	}
	run, ok := o.run(t, work, line)
	if !ok {
		return false
	}
	if len(run.created) > 0 {
		t.Errorf("bash -c %q created %q, but the model calls it safe", line, run.created)
	}
	for _, argv := range run.execs {
		if !slices.ContainsFunc(p.cmds, func(c command) bool { return sameCommand(c, argv) }) {
			t.Errorf("bash -c %q ran %q, which is not among the model's commands %q", line, argv, p.texts())
		}
	}
	// Every simple command bash executed (set -x prints each, quoted so
	// that bash reads it back, before its redirections and whether or not
	// a program starts) is one of the model's, word for word.
	for _, e := range run.traced {
		argv, ok := tracedWords(e, run.execs)
		if !ok || !slices.ContainsFunc(p.cmds, func(c command) bool { return sameCommand(c, argv) }) {
			t.Errorf("bash -c %q executed %q (set -x), which is not among the model's commands %q", line, e, p.texts())
		}
	}
	if len(p.cmds) == 1 && !slices.ContainsFunc(p.cmds[0], func(w word) bool { return !w.literal }) {
		argv, ok := []string(nil), len(run.traced) == 1
		if ok {
			argv, ok = tracedWords(run.traced[0], run.execs)
		}
		if !ok || !sameCommand(p.cmds[0], argv) {
			t.Errorf("bash -c %q executed %q, want exactly %q (stderr %q)", line, run.traced, p.cmds[0].texts(), run.stderr)
		}
	}
	return true
}
