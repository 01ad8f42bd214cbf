package bench

import (
	"os"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// scriptedCLI is the agent rows' world: the latest real Claude Code CLI,
// a scripted model that answers every request "done" (closed when the
// test ends), a home directory for the CLI, and the environment that
// points the CLI there.
func scriptedCLI(t *testing.T) (cli []string, home string, env []string) {
	t.Helper()
	cli = claudecli.Find(t, claudecli.Latest)
	api, err := fakemodel.Start(fakemodel.Options{Func: func(*fakemodel.Request, int) fakemodel.Reply {
		return fakemodel.Text("done")
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	home = t.TempDir()
	env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb"}
	for k, v := range claudecli.Env(home, api.URL()) {
		env = append(env, k+"="+v)
	}
	return cli, home, env
}
