package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// recipe is the path of a recipe shipped in recipes/.
func recipe(name string) string { return filepath.Join("..", "..", "recipes", name) }

func TestShippedRecipesCheck(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(recipe("*.star"))
	if err != nil || len(paths) < 4 {
		t.Fatalf("recipes: %v %v", paths, err)
	}
	o := sous(t, append([]string{"check"}, paths...)...)
	o.expect(t, 0)
	if got := strings.Count(o.stdout, "ok "); got != len(paths) {
		t.Errorf("check printed %d ok lines for %d recipes:\n%s", got, len(paths), o.stdout)
	}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(src), "# "+filepath.Base(p)+": ") || !strings.Contains(string(src), "sous run recipes/"+filepath.Base(p)) {
			t.Errorf("%s: the header comment must say what it does and how to run it", p)
		}
	}
}

func TestRecipeHello(t *testing.T) {
	t.Parallel()
	o := sous(t, "run", recipe("hello.star"), "-a", "name=tester")
	o.expect(t, 0, "hello, tester", "this machine: ", "ticker: ok, exit code 0", "counter: ok, exit code 0",
		"2 sous", "1 starlark", "stage exit codes: [0, 0, 0]")
	if !strings.Contains(o.stdout, "tick 1\n") || !strings.Contains(o.stdout, "tick 3\n") || !strings.Contains(o.stdout, " entries in ") {
		t.Errorf("stdout:\n%s", o.stdout)
	}
}

// goModule writes a tiny Go module whose test passes or fails.
func goModule(t *testing.T, pass bool) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	want := "3"
	if !pass {
		want = "4"
	}
	return testutil.WriteTree(t, map[string]string{
		"go.mod": "module example.com/tiny\n\ngo 1.22\n",
		"add.go": "package tiny\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
		"add_test.go": "package tiny\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(1, 2); got != " + want +
			" {\n\t\tt.Fatalf(\"Add(1, 2) = %d\", got)\n\t}\n}\n",
		"cmd/tiny/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/tiny\"\n)\n\nfunc main() { fmt.Println(tiny.Add(1, 2)) }\n",
	})
}

func TestRecipeBuildAndTest(t *testing.T) {
	t.Parallel()
	t.Run("passing module", func(t *testing.T) {
		t.Parallel()
		o := sous(t, "run", recipe("build-and-test.star"), "-a", "module="+goModule(t, true))
		o.expect(t, 0, "2 package(s) in ./...", "go vet: ok", "go build: ok", "go test: ok", "all good")
	})
	t.Run("failing test", func(t *testing.T) {
		t.Parallel()
		o := sous(t, "run", recipe("build-and-test.star"), "-a", "module="+goModule(t, false))
		o.expect(t, 1, "go build: ok", "Error in run: run: `go test -count=1 ./...`: exit code 1 (status \"failed\")")
		if strings.Contains(o.stderr, "all good") {
			t.Error("the recipe went on after a failing step")
		}
		if !strings.Contains(o.stdout, "Add(1, 2) = 3") {
			t.Errorf("the test's failure was not echoed:\n%s", o.stdout)
		}
	})
	t.Run("no module", func(t *testing.T) {
		t.Parallel()
		sous(t, "run", recipe("build-and-test.star")).expect(t, 1, "usage: sous run build-and-test.star -a module=DIR")
	})
}

func TestRecipeWorktrees(t *testing.T) {
	t.Parallel()
	repo := makeRepo(t)
	o := sous(t, "run", recipe("worktrees.star"), "-a", "repo="+repo)
	o.expect(t, 0, "feature: ok (exit code 0)", "main: ok (exit code 0)", "all 2 branches ok")
	if !strings.Contains(o.stdout, "first") {
		t.Errorf("the command's output was not echoed:\n%s", o.stdout)
	}
	if fileExists(repo + ".worktrees") {
		t.Error("the worktrees were left behind")
	}
	out, err := exec.Command("git", "-C", repo, "branch", "--list", "fanout/*").Output()
	if err != nil || len(out) != 0 {
		t.Errorf("fanout branches left behind: %q %v", out, err)
	}

	o = sous(t, "run", recipe("worktrees.star"), "-a", "repo="+repo, "-a", "branches=feature", "-a", "cmd=echo broke >&2; exit 3")
	o.expect(t, 1, "feature: failed (exit code 3)", "the command failed on feature")

	// A run that fails halfway (no branch nosuch to make a worktree from)
	// removes the worktree and branch it made, so the next run can make
	// them again instead of failing on "already exists".
	for range 2 {
		o = sous(t, "run", recipe("worktrees.star"), "-a", "repo="+repo, "-a", "branches=feature,nosuch")
		o.expect(t, 1, "worktree "+repo+".worktrees/feature <- feature", "Error in git.worktree_create: git.worktree_create: ")
		if strings.Contains(o.stderr, "already exists") || strings.Contains(o.stderr, "sous: deferred") {
			t.Errorf("stderr:\n%s", o.stderr)
		}
		if fileExists(repo + ".worktrees") {
			t.Error("the failed run left its worktrees")
		}
		out, err = exec.Command("git", "-C", repo, "branch", "--list", "fanout/*").Output()
		if err != nil || len(out) != 0 {
			t.Errorf("the failed run left fanout branches: %q %v", out, err)
		}
	}
}

func TestRecipeRelease(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"sha256sum", "tar", "mktemp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH", tool)
		}
	}
	dir := t.TempDir()
	files := map[string]string{"app-1.2.3/bin/tool": "#!/bin/sh\necho tool\n", "app-1.2.3/VERSION": "1.2.3\n"}
	sums := ""
	for _, name := range []string{"bin/tool", "VERSION"} {
		h := sha256.Sum256([]byte(files["app-1.2.3/"+name]))
		sums += fmt.Sprintf("%s  %s\n", hex.EncodeToString(h[:]), name)
	}
	files["app-1.2.3/SHA256SUMS"] = sums
	// Archived by tar from a real tree, as a release is: bin/tool 0755.
	src := testutil.WriteTree(t, files)
	if err := os.Chmod(filepath.Join(src, "app-1.2.3", "bin", "tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "app-1.2.3.tar.gz")
	if out, err := exec.Command("tar", "czf", archive, "-C", src, "app-1.2.3").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	raw, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(raw)
	dest := filepath.Join(dir, "installed")

	o := sous(t, "run", recipe("release.star"), "-a", "archive="+archive, "-a", "sha256="+hex.EncodeToString(digest[:]),
		"-a", "version=1.2.3", "-a", "dest="+dest)
	o.expect(t, 0, "archive sha256 ok", "extracted 3 files into "+dest, "2 files match SHA256SUMS", "version 1.2.3 ok",
		"release ready in "+dest+"/app-1.2.3")
	if !fileExists(archive) {
		t.Error("the original archive was consumed")
	}
	// The release's binary runs where it was unpacked.
	if out, err := exec.Command(filepath.Join(dest, "app-1.2.3", "bin", "tool")).Output(); err != nil || string(out) != "tool\n" {
		t.Errorf("bin/tool of the extracted release: %q, %v; want it executable", out, err)
	}

	o = sous(t, "run", recipe("release.star"), "-a", "archive="+archive, "-a", "version=9.9")
	o.expect(t, 1, `VERSION says "1.2.3", want "9.9"`)
	o = sous(t, "run", recipe("release.star"), "-a", "archive="+archive, "-a", "sha256=00")
	o.expect(t, 1, "sha256 is "+hex.EncodeToString(digest[:])+", want 00")

	files["app-1.2.3/VERSION"] = "tampered\n"
	writeTarGz(t, archive, files)
	o = sous(t, "run", recipe("release.star"), "-a", "archive="+archive)
	o.expect(t, 1, "computed checksum did NOT match")
	if !strings.Contains(o.stdout, "VERSION: FAILED") {
		t.Errorf("the per-file check was not echoed:\n%s", o.stdout)
	}
}

// TestRecipeDeploySecrets: the shipped secrets recipe runs a command with
// the token and the .env values in its environment; the command uses the
// real values, and sous shows *** for them, also when the command fails.
func TestRecipeDeploySecrets(t *testing.T) {
	t.Parallel()
	const token, dbPass = "tok-deploy-0123456789", "db-pass-s3cret"
	dir := testutil.WriteTree(t, map[string]string{".env": "export DB_PASS='" + dbPass + "'\nREGION=eu-west-1\n"})
	env := []string{"PATH=" + os.Getenv("PATH"), "DEPLOY_TOKEN=" + token}
	deploy := `test "$DEPLOY_TOKEN" = ` + token + ` && test "$DB_PASS" = ` + dbPass + ` && echo "pushing with $DEPLOY_TOKEN to $REGION"`
	w := &agentWorld{t: t, env: env}
	for _, tc := range []struct {
		cmd   string
		code  int
		wants []string
	}{
		{deploy, 0, []string{"deploying with 3 credentials: DB_PASS, DEPLOY_TOKEN, REGION", "reads: ***", "pushing with *** to ***", "deployed"}},
		{deploy + "; echo \"no luck, $DB_PASS\" >&2; exit 5", 1, []string{"no luck, ***", "the deploy failed (exit code 5) with token ***"}},
	} {
		o := w.sous("run", recipe("deploy-secrets.star"), "-a", "env="+filepath.Join(dir, ".env"), "-a", "cmd="+tc.cmd)
		all := o.stdout + o.stderr
		if o.code != tc.code {
			t.Errorf("exit code %d, want %d:\n%s", o.code, tc.code, all)
		}
		for _, want := range tc.wants {
			if !strings.Contains(all, want) {
				t.Errorf("the output lacks %q:\n%s", want, all)
			}
		}
		if strings.Contains(all, token) || strings.Contains(all, dbPass) || strings.Contains(all, "eu-west-1") {
			t.Errorf("a secret is in the output:\n%s", all)
		}
	}
}
