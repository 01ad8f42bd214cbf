package runtime

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
	"go.starlark.net/starlark"
)

// The plugin mechanism with a plugin of the tests' own, what builtins/
// does in miniature: a run's state made by OnStart, found with Env.State,
// closed (io.Closer) after the deferred calls; calls deferred with
// Env.Defer, run newest first when the recipe ends.

// tally is the test plugin's state for one run.
type tally struct {
	count int
	log   *[]string // shared with the test, to see the order of events
}

func (s *tally) Close() error {
	*s.log = append(*s.log, "closed")
	return errors.New("tally: closed with " + strings.Repeat("|", s.count))
}

// testPlugin defines count() (adds one to the run's tally and returns it),
// later(fn) (defers fn) and ended() (whether the recipe has ended).
func testPlugin(log *[]string) Plugin {
	return Plugin{
		Name: "tally",
		Entries: []Entry{
			{Name: "count", Sig: "count() -> int", Doc: "Adds one to the run's tally.", Fn: func(c *Call) (starlark.Value, error) {
				s := c.Env.State("tally").(*tally)
				s.count++
				return starlark.MakeInt(s.count), nil
			}},
			{Name: "later", Sig: "later(fn)", Doc: "Calls fn when the recipe ends.", Fn: func(c *Call) (starlark.Value, error) {
				var fn starlark.Callable
				if err := starlark.UnpackPositionalArgs(c.Name, c.Args, c.Kwargs, 1, &fn); err != nil {
					return nil, err
				}
				c.Env.Defer(Deferred{Fn: fn, At: c.Thread.CallFrame(1).Pos})
				return starlark.None, nil
			}},
			{Name: "ended", Sig: "ended() -> bool", Doc: "Whether the recipe has ended.", Fn: func(c *Call) (starlark.Value, error) {
				return starlark.Bool(c.Env.RecipeEnded()), nil
			}},
		},
		OnStart: func(env *Env) any {
			*log = append(*log, "start")
			return &tally{log: log}
		},
	}
}

// stateless is a plugin without state.
var stateless = Plugin{Name: "plain", Entries: []Entry{{Name: "plain", Sig: "plain -> string", Doc: "A value.",
	Value: func(env *Env) starlark.Value { return starlark.String(fmtState(env.State("plain"))) }}}}

func fmtState(v any) string {
	if v == nil {
		return "no state"
	}
	return "state"
}

func TestPluginStatePerRun(t *testing.T) {
	t.Parallel()
	var log []string
	table := MustTable(stateless, testPlugin(&log))
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
print(plain, count(), count(), ended())
later(lambda: print("second deferred", count(), ended()))
later(lambda: print("first deferred", count()))
`})
	for run := range 2 {
		log = nil
		var stderr bytes.Buffer
		err := Run(context.Background(), Options{Recipe: filepath.Join(dir, "main.star"), Stdout: &bytes.Buffer{}, Stderr: &stderr, Table: table})
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, stderr.String())
		}
		// Each run starts from a fresh tally; Close's error is one line.
		want := "no state 1 2 False\nfirst deferred 3\nsecond deferred 4 True\nsous: tally: closed with ||||\n"
		if stderr.String() != want {
			t.Errorf("run %d: stderr:\n%s\nwant:\n%s", run, stderr.String(), want)
		}
		if !slices.Equal(log, []string{"start", "closed"}) {
			t.Errorf("run %d: events %v", run, log)
		}
	}
}

func TestNewTableRefusesTwoPluginsOfOneName(t *testing.T) {
	t.Parallel()
	_, err := NewTable(stateless, Plugin{Name: "plain"})
	if err == nil || err.Error() != "builtins: plugin plain is defined twice" {
		t.Errorf("NewTable = %v", err)
	}
}

// A run builds only the globals its files name, the loaded ones' too: a
// global's Value runs when some file of the recipe uses the name, never
// otherwise.
func TestRunBuildsOnlyTheGlobalsItsFilesUse(t *testing.T) {
	t.Parallel()
	var built []string
	value := func(name string) Entry {
		return Entry{Name: name, Sig: name + " -> string", Doc: "A value.", Value: func(*Env) starlark.Value {
			built = append(built, name)
			return starlark.String(name)
		}}
	}
	table := MustTable(Plugin{Name: "values", Entries: []Entry{value("used_here"), value("used_there"), value("unused"), value("shadowed")}})
	dir := testutil.WriteTree(t, map[string]string{
		"main.star": `
load("lib.star", "there")
shadowed = "mine"
print(used_here, there(), shadowed)
`,
		"lib.star": `
def there():
    return used_there
`})
	var stderr bytes.Buffer
	if err := Run(context.Background(), Options{Recipe: filepath.Join(dir, "main.star"), Stdout: &bytes.Buffer{}, Stderr: &stderr, Table: table}); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if got := stderr.String(); got != "used_here used_there mine\n" {
		t.Errorf("stderr = %q", got)
	}
	slices.Sort(built)
	if !slices.Equal(built, []string{"used_here", "used_there"}) {
		t.Errorf("built %v, want [used_here used_there]", built)
	}
}
