package builtins

import (
	"slices"
	"strings"
	"testing"
)

// TestFilesShapeTheDaemonsAnswers: what files.* ask the daemon, and the
// values they make of its answers.
func TestFilesShapeTheDaemonsAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.daemon.file("/data", fakeFile{dir: true})
	f.daemon.file("/data/a.txt", fakeFile{content: "ay"})
	f.daemon.file("/data/b.txt", fakeFile{content: "bee", mode: "-rwx------"})
	f.daemon.file("/data/sub", fakeFile{dir: true})
	r := f.run(`
s = files.stat("/data/b.txt")
print(s.exists, s.is_dir, s.size, s.mode, files.stat("/data").is_dir)
print(files.stat("/none"))
print([(e.name, e.path, e.is_dir) for e in files.list("/data")])
print(files.read("/data/a.txt"), files.read("/none"), files.read("/data/b.txt", max_bytes=3))
print(files.validate("/data"))
print(files.validate("/none"))
`)
	r.expect(t, 0)
	want := `True False 3 -rwx------ True
struct(exists = False, is_dir = False, mode = "", size = 0)
[("a.txt", "/data/a.txt", False), ("b.txt", "/data/b.txt", False), ("sub", "/data/sub", True)]
ay None bee
struct(error = "", is_dir = True, valid = True)
struct(error = "Path does not exist", is_dir = False, valid = False)
`
	if r.stderr != want {
		t.Errorf("log:\n%s\nwant:\n%s", r.stderr, want)
	}
	sent := []string{
		`files.stat {"path":"/data/b.txt"}`,
		`files.stat {"path":"/data"}`,
		`files.stat {"path":"/none"}`,
		`files.list {"path":"/data"}`,
		`files.read {"path":"/data/a.txt"}`,
		`files.read {"path":"/none"}`,
		`files.read {"path":"/data/b.txt","maxBytes":3}`,
		`files.validate {"path":"/data"}`,
		`files.validate {"path":"/none"}`,
	}
	if got := f.daemon.sent(); !slices.Equal(got, sent) {
		t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(sent, "\n"))
	}
}

// TestFilesErrors: a wrong argument fails before anything is sent; the
// daemon's refusal fails naming the path, without the method's name the
// daemon puts first.
func TestFilesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src, want string
		sent      bool // the call reached the daemon
	}{
		{`files.read(1)`, "files.read: path: want string, got int", false},
		{`files.read("/", max_bytes="x")`, "files.read: max_bytes: want int, got string", false},
		{`files.read("/", max_bytes=-1)`, "files.read: max_bytes: want at least 0, got -1", false},
		{`files.stat()`, "files.stat: missing argument for path", false},
		{`files.list("/a", "/b")`, "files.list: got 2 positional arguments, want at most 1", false},
		{`files.validate(path=None)`, "files.validate: path: want string, got NoneType", false},
		{`files.stat("/", follow=True)`, `files.stat: unexpected keyword argument "follow"`, false},
		{`files.read("/data/b.txt", max_bytes=2)`, "files.read: /data/b.txt: file exceeds maxBytes", true},
		{`files.read("/data")`, "files.read: /data: path is a directory", true},
		{`files.list("/none")`, "files.list: /none: open /none: no such file or directory", true},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.daemon.file("/data", fakeFile{dir: true})
			f.daemon.file("/data/b.txt", fakeFile{content: "bee"})
			f.run(tt.src+"\n").expect(t, 1, "main.star:1:", "Error in "+strings.SplitN(tt.src, "(", 2)[0]+": "+tt.want)
			if sent := len(f.daemon.sent()) > 0; sent != tt.sent {
				t.Errorf("reached the daemon: %v, want %v (%q)", sent, tt.sent, f.daemon.sent())
			}
		})
	}
}
