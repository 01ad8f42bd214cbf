package main

import (
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		src    string
		flags  []string
		code   int
		stderr []string
	}{
		{"finished", "x = 1\n", nil, 0, nil},
		{"fail", "x = 1\nfail(\"boom\")\n", nil, 1, []string{"main.star:2:5: in <toplevel>", "Error in fail: fail: boom"}},
		{"failing builtin in a function", "def f():\n    run(\"false\")\nf()\n", nil, 1,
			[]string{"main.star:3:2: in <toplevel>", "main.star:2:8: in f", "Error in run: run: `false`: exit code 1 (status \"failed\")"}},
		{"runtime error", "x = {}\ny = x[\"k\"]\n", nil, 1, []string{"main.star:2:6", `key "k" not in dict`}},
		{"syntax error", "x = (\n", nil, 2, []string{"main.star:2:1: got end of file, want primary expression"}},
		{"undefined name", "run(\"true\")\nnope()\n", nil, 2, []string{"main.star:2:1: undefined: nope"}},
		{"bad arg flag", "x = 1\n", []string{"-a", "novalue"}, 2, []string{`-a "novalue": want key=value`}},
		{"remote of an unknown kind", "x = 1\n", []string{"--remote", "tcp://h"}, 2, []string{`--remote: target "tcp://h": want "embedded"`}},
		{"unknown flag", "x = 1\n", []string{"--bogus"}, 2, []string{"unknown flag: --bogus"}},
		{"unreadable token file", "x = 1\n", []string{"--socket", "/nonexistent/sock", "--token-file", "/nonexistent/token"}, 2, []string{"--token-file: read token file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, _ := runStar(t, tt.src, tt.flags...)
			o.expect(t, tt.code, tt.stderr...)
		})
	}
	t.Run("missing recipe", func(t *testing.T) {
		t.Parallel()
		sous(t, "run", filepath.Join(t.TempDir(), "none.star")).expect(t, 2, "none.star: cannot read recipe: no such file or directory")
	})
	t.Run("no recipe", func(t *testing.T) {
		t.Parallel()
		sous(t, "run").expect(t, 2, "run: want 1 argument(s), got 0")
	})
	// No recipe, or two, with --json: the events still start and end.
	for name, args := range map[string][]string{"json no recipe": {"run", "--json"}, "json two recipes": {"run", "--json", "a.star", "b.star"}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := sous(t, args...)
			o.expect(t, 2, "want 1 argument(s)")
			lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
			if len(lines) != 2 || !strings.Contains(lines[0], `"event":"start"`) ||
				!strings.Contains(lines[1], `"event":"end"`) || !strings.Contains(lines[1], `"exit_code":2`) {
				t.Errorf("stdout:\n%s", o.stdout)
			}
		})
	}
	// With --json, a usage error the flags hold still gets a start and an
	// end event, as one in the recipe does.
	for name, flags := range map[string][]string{"json bad arg flag": {"-a", "novalue"}, "json bad rule": {"--allow", "Bash("}, "json unknown flag": {"--nope"}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o, _ := runStar(t, "x = 1\n", append(flags, "--json")...)
			o.expect(t, 2, "sous: ")
			lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
			if len(lines) != 2 || !strings.Contains(lines[0], `"event":"start"`) ||
				!strings.Contains(lines[1], `"event":"end"`) || !strings.Contains(lines[1], `"exit_code":2`) {
				t.Errorf("stdout:\n%s", o.stdout)
			}
		})
	}
}

func TestRunNothingBeforeAStaticError(t *testing.T) {
	t.Parallel()
	// The spawn on line 1 must not run: the undefined name on line 2 is
	// found first.
	o, dir := runStar(t, "run(\"touch\", [args[\"dir\"] + \"/ran\"])\nundefined_thing()\n")
	o.expect(t, 2, "undefined: undefined_thing")
	if matches, _ := filepath.Glob(filepath.Join(dir, "ran")); len(matches) > 0 {
		t.Error("the recipe ran before its undefined name was reported")
	}
}

func TestGlobals(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
print(args["k"], args.get("missing", "dflt"), sorted(args.keys()))
print(getenv("PATH") != None, getenv("SOUS_SURELY_UNSET_VAR"), getenv("SOUS_SURELY_UNSET_VAR", "d"))
print(json.encode(struct(a=1, b=[True, None])), json.decode('{"x": 2}')["x"])
print(type(time.now()), time.parse_duration("1m") == time.minute)
start = time.now()
sleep(0.05)
print((time.now() - start) >= time.parse_duration("50ms"))
# the dialect of RECIPES.md: set, while, top-level control, reassignment, recursion
s = set([1, 2, 2])
n = 0
while n < 3:
    n += 1
def fact(k):
    return 1 if k <= 1 else k * fact(k - 1)
if len(s) == 2:
    n = fact(5)
print(n, "%d items" % len(s))
`, "-a", "k=v=w")
	o.expect(t, 0)
	want := `v=w dflt ["dir", "k"]
True None d
{"a":1,"b":[true,null]} 2
time.time True
True
120 2 items
`
	if o.stderr != want {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}
	if o.stdout != "" {
		t.Errorf("stdout = %q, want nothing (print goes to stderr)", o.stdout)
	}
}

func TestArgsAreFrozen(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `args["x"] = "y"`+"\n", "-a", "x=1")
	o.expect(t, 1, "cannot insert into frozen hash table")
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{
		"main.star": `load("lib/a.star", "a")
load("lib/b.star", "b")
load("lib/common.star", "shared")
print(a, b, shared)
shared.append(3)
`,
		// lib/a.star and lib/b.star both load lib/common.star, relative to
		// themselves, and so does main.star: it runs once, and its values
		// are frozen.
		"lib/a.star":      "load(\"common.star\", \"shared\")\na = \"a\"\n",
		"lib/b.star":      "load(\"./common.star\", \"shared\")\nb = \"b\"\n",
		"lib/common.star": "print(\"common runs\")\nshared = [1, 2]\n",
	})
	o := sous(t, "run", filepath.Join(dir, "main.star"))
	o.expect(t, 1, "cannot append to frozen list", "main.star:5:14: in <toplevel>")
	if strings.Count(o.stderr, "common runs") != 1 {
		t.Errorf("a file loaded twice ran %d times:\n%s", strings.Count(o.stderr, "common runs"), o.stderr)
	}
	if !strings.Contains(o.stderr, "a b [1, 2]") {
		t.Errorf("loaded values missing:\n%s", o.stderr)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	t.Run("cycle", func(t *testing.T) {
		t.Parallel()
		dir := testutil.WriteTree(t, map[string]string{
			"main.star":  `load("lib/a.star", "a")` + "\n",
			"lib/a.star": `load("../main.star", "m")` + "\na = 1\n",
		})
		main, a := filepath.Join(dir, "main.star"), filepath.Join(dir, "lib", "a.star")
		sous(t, "run", main).expect(t, 2, a+":1:6: Circular load: "+main+" -> "+a+" -> "+main)
	})
	t.Run("failure inside a loaded file", func(t *testing.T) {
		t.Parallel()
		dir := testutil.WriteTree(t, map[string]string{
			"main.star": `load("util.star", "x")` + "\n",
			"util.star": "x = 1\nfail(\"inside util\")\n",
		})
		sous(t, "run", filepath.Join(dir, "main.star")).expect(t, 1,
			"main.star:1:1: in <toplevel>", "util.star:2:5: in <toplevel>", "Error in fail: fail: inside util")
	})
}

// TestJSONEventStream checks the shape promised by RECIPES.md: stdout holds
// only JSON events, start first and end last.
func TestJSONEventStream(t *testing.T) {
	t.Parallel()
	src := `print("hello")
r = run("sh", ["-c", "echo out; echo err >&2"])
spawn("true", echo=False).wait()
`
	o, _ := runStar(t, src, "--json")
	o.expect(t, 0)
	events := parseEvents(t, o.stdout)
	var names []string
	for _, e := range events {
		names = append(names, e["event"].(string))
	}
	if names[0] != "start" || names[len(names)-1] != "end" {
		t.Fatalf("events %v: want start first and end last", names)
	}
	counts := map[string]int{}
	for _, n := range names {
		counts[n]++
	}
	if counts["log"] != 1 || counts["spawn"] != 2 || counts["exit"] != 2 || counts["output"] != 2 {
		t.Errorf("event counts %v, want 1 log, 2 spawn, 2 exit, 2 output (echo=False sends none)", counts)
	}
	for _, e := range events {
		switch e["event"] {
		case "log":
			if e["text"] != "hello" {
				t.Errorf("log event %v", e)
			}
		case "output":
			if e["id"] == "" || (e["stream"] != "stdout" && e["stream"] != "stderr") || !strings.HasSuffix(e["data"].(string), "\n") {
				t.Errorf("output event %v", e)
			}
		case "end":
			if e["status"] != "ok" || e["exit_code"] != 0.0 || e["error"] != nil {
				t.Errorf("end event %v", e)
			}
		}
	}
	if o.stderr != "" {
		t.Errorf("stderr = %q, want nothing: the human output goes away", o.stderr)
	}
}

func TestJSONFailureEndsWithTheError(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, "run(\"sh\", [\"-c\", \"exit 3\"])\n", "--json")
	o.expect(t, 1, "Traceback", "main.star:1:4")
	events := parseEvents(t, o.stdout)
	end := events[len(events)-1]
	if end["event"] != "end" || end["status"] != "failed" || end["exit_code"] != 1.0 ||
		!strings.Contains(end["error"].(string), `exit code 3 (status "failed")`) {
		t.Errorf("end event %v", end)
	}
	o, _ = runStar(t, "nope()\n", "--json")
	o.expect(t, 2, "undefined: nope")
	events = parseEvents(t, o.stdout)
	if len(events) != 2 || events[1]["status"] != "error" || events[1]["exit_code"] != 2.0 {
		t.Errorf("events of a recipe with an undefined name: %v", events)
	}
}

// parseEvents decodes every stdout line, failing on anything that is not a
// JSON event with an RFC 3339 time.
func parseEvents(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var events []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("stdout line is not JSON: %q", line)
		}
		if _, ok := e["event"].(string); !ok {
			t.Fatalf("line without an event: %q", line)
		}
		ts, _ := e["time"].(string)
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Fatalf("time %q: %v", ts, err)
		}
		events = append(events, e)
	}
	return events
}

// After a flag error, `sous run` reads --json and the recipe from the
// command line by its own flags: a flag's value is no recipe, and --json
// takes the values a boolean flag takes.
func TestScanRunArgs(t *testing.T) {
	t.Parallel()
	run, _, err := newCmdRoot(newTestFactory(strings.NewReader(""), io.Discard, io.Discard, nil)).Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   string
		json   bool
		recipe string
	}{
		{"run x.star --nope --json", true, "x.star"},
		{"run -a f=a.star x.star --nope --json", true, "x.star"},
		{"run --socket s.star x.star --json=1 --nope", true, "x.star"},
		{"run x.star --json=false --nope", false, "x.star"},
		{"run --nope --json=t -- y.star", true, "y.star"},
		{"run x.star --nope", false, "x.star"},
	} {
		json, recipe := scanRunArgs(run.Flags(), strings.Fields(tc.args))
		if json != tc.json || recipe != tc.recipe {
			t.Errorf("%s: json %v, recipe %q; want %v, %q", tc.args, json, recipe, tc.json, tc.recipe)
		}
	}
}
