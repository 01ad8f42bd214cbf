package builtins

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// TestGitQueriesShapeTheDaemonsAnswers: what git.info, git.status and
// git.branches ask the daemon (paths default to ".", and a relative path is
// the recipe's: made absolute for a host on this machine, as the fake
// stands for the embedded daemon), and the values they make of the answers.
func TestGitQueriesShapeTheDaemonsAnswers(t *testing.T) {
	t.Parallel()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	f.args["cwd"] = cwd
	f.daemon.repo(cwd, fakeRepo{
		info:     wire.GitInfoResult{Repo: "sous", Branch: "main", Root: cwd, RepoSlug: "o/sous", DefaultBranch: "trunk"},
		changes:  []string{"M a.go", "?? new"},
		branches: []string{"feature", "main"},
	})
	f.daemon.repo("/wt", fakeRepo{info: wire.GitInfoResult{Repo: "sous", Branch: "detached:0123abc", Root: "/wt"}})
	r := f.run(`
i = git.info()
print(i.is_repo, i.repo, i.branch, i.root == args["cwd"], i.repo_slug, i.default_branch)
print(git.info("/wt").branch, git.info(path="/wt").root)
print(git.info("sub"))
s = git.status()
print(s.is_repo, s.clean, s.changes)
print(git.status("/wt"), git.status("/elsewhere"))
print(git.branches(), git.branches("/wt"), git.branches("/elsewhere"))
`)
	r.expect(t, 0)
	want := `True sous main True o/sous trunk
detached:0123abc /wt
struct(branch = "", default_branch = "", is_repo = False, repo = "", repo_slug = "", root = "")
True False ["M a.go", "?? new"]
struct(changes = [], clean = True, is_repo = True) struct(changes = [], clean = False, is_repo = False)
["feature", "main"] [] []
`
	if r.stderr != want {
		t.Errorf("log:\n%s\nwant:\n%s", r.stderr, want)
	}
	sent := []string{
		`git.info {"path":"` + cwd + `"}`,
		`git.info {"path":"/wt"}`,
		`git.info {"path":"/wt"}`,
		`git.info {"path":"` + filepath.Join(cwd, "sub") + `"}`,
		`git.status {"path":"` + cwd + `"}`,
		`git.status {"path":"/wt"}`,
		`git.status {"path":"/elsewhere"}`,
		`git.list_branches {"path":"` + cwd + `"}`,
		`git.list_branches {"path":"/wt"}`,
		`git.list_branches {"path":"/elsewhere"}`,
	}
	if got := f.daemon.sent(); !slices.Equal(got, sent) {
		t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(sent, "\n"))
	}
}

// TestGitQueryArgumentErrors: a wrong argument fails before anything is
// sent, naming the builtin and the argument.
func TestGitQueryArgumentErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{`git.info(path=1)`, "git.info: path: want string, got int"},
		{`git.status(1)`, "git.status: path: want string, got int"},
		{`git.branches(None)`, "git.branches: path: want string, got NoneType"},
		{`git.info(".", ".")`, "git.info: got 2 positional arguments, want at most 1"},
		{`git.status(pth=".")`, `git.status: unexpected keyword argument "pth"`},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.run(tt.src+"\n").expect(t, 1, "main.star:1:", "Error in "+strings.SplitN(tt.src, "(", 2)[0]+": "+tt.want)
			if sent := f.daemon.sent(); len(sent) > 0 {
				t.Errorf("reached the daemon: %q", sent)
			}
		})
	}
}
