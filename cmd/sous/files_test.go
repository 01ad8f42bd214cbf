package main

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// writeTarGz writes a .tar.gz of name -> content (a name ending in "/" is
// a directory).
func writeTarGz(t *testing.T, path string, entries map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for name, content := range entries {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(name, "/") {
			hdr = &tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeDir}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []interface{ Close() error }{tw, gz, f} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"data/b.txt": "bee", "data/a.txt": "ay", "data/.hidden": "h", "data/sub/x": ""})
	o := sous(t, "run", testutil.WriteTree(t, map[string]string{"main.star": `
d = args["dir"] + "/data"
print(files.stat(d + "/a.txt").size, files.stat(d).is_dir, files.stat(d + "/none").exists, files.stat(d + "/a.txt").mode)
print([(e.name, e.is_dir) for e in files.list(d)])
print(files.read(d + "/b.txt"), files.read(d + "/none"), files.read(d + "/b.txt", max_bytes=3))
print(files.validate(d).valid, files.validate(d + "/none"))
files.read(d + "/b.txt", max_bytes=2)
`})+"/main.star", "-a", "dir="+dir)
	o.expect(t, 1, "main.star:7:11", "files.read: "+dir+"/data/b.txt: file exceeds maxBytes")
	want := `2 True False -rw-r--r--
[("a.txt", False), ("b.txt", False), ("sub", True)]
bee None bee
True struct(error = "Path does not exist", is_dir = False, valid = False)
`
	if !strings.HasPrefix(o.stderr, want) {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}
}

func TestExtractTar(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, hostile := filepath.Join(dir, "good.tar.gz"), filepath.Join(dir, "hostile.tar.gz")
	writeTarGz(t, good, map[string]string{"app/": "", "app/VERSION": "1.2.3\n", "app/bin/tool": "#!/bin/sh\n"})
	writeTarGz(t, hostile, map[string]string{"../escape": "x"})
	o, _ := runStar(t, `
dest = args["out"] + "/dest"
print(extract_tar(args["good"], dest))
print(files.read(dest + "/app/VERSION").strip(), files.stat(dest + "/.synced").exists, files.stat(args["good"]).exists)
extract_tar(args["hostile"], args["out"] + "/h")
`, "-a", "good="+good, "-a", "hostile="+hostile, "-a", "out="+dir)
	o.expect(t, 1, "main.star:5:12", "extract_tar: "+hostile+": unsafe path in archive: ../escape")
	if want := "2\n1.2.3 True False\n"; !strings.HasPrefix(o.stderr, want) {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}
}

func TestGit(t *testing.T) {
	t.Parallel()
	repo := makeRepo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	o, _ := runStar(t, `
repo = args["repo"]
i = git.info(repo)
print(i.is_repo, i.branch, i.root == repo, i.repo_slug == "", git.info("/").is_repo)
print(git.status(repo).clean, git.branches(repo))
w = git.worktree_create("topic", args["wt"], repo=repo)
print(w.branch, w.source_branch, w.new_branch, w.path == args["wt"], git.info(args["wt"]).branch)
sh("echo change > README", cwd=args["wt"], echo=False)
s = git.status(args["wt"])
print(s.clean, s.changes)
print(git.branches(repo))
git.worktree_remove(args["wt"], repo=repo, force=True)
print(files.stat(args["wt"]).exists)
git.worktree_create("x", args["wt"] + "2", repo="/")
`, "-a", "repo="+repo, "-a", "wt="+wt)
	o.expect(t, 1, "main.star:14:20", "git.worktree_create: repo /: not a git repository (not_a_repo)")
	want := `True main True True False
True ["feature", "main"]
topic main True True topic
False ["M README"]
["feature", "main", "topic"]
False
`
	if !strings.HasPrefix(o.stderr, want) {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}
}
