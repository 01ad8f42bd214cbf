package runtime

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"

	"github.com/seed5ad92d46/sous/daemon/client"
)

func TestCheckFindsEveryErrorBeforeRunning(t *testing.T) {
	t.Parallel()
	tab := MustTable(stateless)
	tests := []struct {
		name  string
		files map[string]string
		want  []string // file:line:col: message, with DIR for the directory
	}{
		{"syntax", map[string]string{"main.star": "x = (\n"}, []string{"DIR/main.star:2:1: got end of file, want primary expression"}},
		{"undefined names", map[string]string{"main.star": "print(a)\nb()\n"},
			[]string{"DIR/main.star:1:7: undefined: a", "DIR/main.star:2:1: undefined: b"}},
		{"missing load", map[string]string{"main.star": `load("lib/none.star", "x")`},
			[]string{"DIR/main.star:1:6: cannot load lib/none.star: DIR/lib/none.star: no such file or directory"}},
		{"cycle", map[string]string{
			"main.star":  `load("lib/a.star", "a")`,
			"lib/a.star": `load("b.star", "b")` + "\na = 1\n",
			"lib/b.star": `load("../main.star", "c")` + "\nb = 1\n",
		}, []string{"DIR/lib/b.star:1:6: Circular load: DIR/main.star -> DIR/lib/a.star -> DIR/lib/b.star -> DIR/main.star"}},
		{"error in a loaded file", map[string]string{
			"main.star":    `load("util.star", "f")`,
			"util.star":    "def f():\n    return nope\n",
			"ignored.star": "syntax error here (",
		}, []string{"DIR/util.star:2:12: undefined: nope"}},
		{"errors in the loading file and in the files it loads, in one pass", map[string]string{
			"main.star": `load("util.star", "f")` + "\n" + `load("none.star", "g")` + "\nprint(zzz)\n",
			"util.star": "def f():\n    return nope\n",
		}, []string{
			"DIR/main.star:3:7: undefined: zzz",
			"DIR/util.star:2:12: undefined: nope",
			"DIR/main.star:2:6: cannot load none.star: DIR/none.star: no such file or directory",
		}},
		{"name the loaded file does not define", map[string]string{
			"main.star":     `load("lib/side.star", "z", "nope", other="f", again="g")` + "\n",
			"lib/side.star": "print('ran')\nz = 1\ndef f():\n    pass\n" + `load("more.star", "g")` + "\n",
			"lib/more.star": "g = 2\n",
		}, []string{
			"DIR/main.star:1:29: load: name nope not found in module lib/side.star",
			// A name a file loads is its own, not passed on to its loaders.
			"DIR/main.star:1:54: load: name g not found in module lib/side.star",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := testutil.WriteTree(t, tt.files)
			err := Check(filepath.Join(dir, "main.star"), tab)
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Check = %v, want a *CompileError", err)
			}
			got := strings.ReplaceAll(strings.Join(ce.Errs, "\n"), dir, "DIR")
			if want := strings.Join(tt.want, "\n"); got != want {
				t.Errorf("errors:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestCheckAcceptsTheDialectAndDiamondLoads(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{
		"main.star": `load("a.star", "a")
load("b.star", "b")
s = set([1, 2])
n = 0
while n < 3:
    n += 1
if n == 3:
    n = a + b
def fact(k):
    return 1 if k <= 1 else k * fact(k - 1)
`,
		"a.star":      "load(\"common.star\", \"c\")\na = c\n",
		"b.star":      "load(\"common.star\", \"c\")\nb = c\n",
		"common.star": "c = 1\n",
	})
	if err := Check(filepath.Join(dir, "main.star"), MustTable(stateless)); err != nil {
		t.Fatal(err)
	}
}

// runWithoutDaemon runs the recipe dir/name with its default host a socket
// nobody serves, and returns its error and its log (stderr).
func runWithoutDaemon(dir, name string) (error, string) {
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), Options{
		Recipe: filepath.Join(dir, name), Stdout: &stdout, Stderr: &stderr,
		Host: client.Target{URL: "unix:///nonexistent/sous.sock"}, Table: MustTable(stateless),
	})
	return err, stderr.String()
}
