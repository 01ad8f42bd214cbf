package fileops

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// sandbox is a temp dir holding the archive and, a few levels down, destDir,
// so that any escape through "../" lands somewhere the test can see.
type sandbox struct {
	root, dest string
}

func newSandbox(t testing.TB) sandbox {
	root := t.TempDir()
	return sandbox{root: root, dest: filepath.Join(root, "a", "b", "c", "dest")}
}

// outside lists everything under the sandbox that is not destDir's own tree.
func (s sandbox) outside(t testing.TB) []string {
	t.Helper()
	var out []string
	for p := range tree(t, s.root) {
		full := filepath.Join(s.root, p)
		if full == s.dest || strings.HasPrefix(full, s.dest+"/") || strings.HasPrefix(s.dest, full+"/") {
			continue
		}
		out = append(out, p)
	}
	return out
}

var allOptions = []struct {
	name string
	opt  extractOptions
}{
	{"default", extractOptions{}},
	{"wipeInPlace", extractOptions{wipeInPlace: true}},
	{"noReadahead", extractOptions{noReadahead: true}},
	{"sequential", extractOptions{workers: 1}},
	{"noOpenat2", extractOptions{noOpenat2: true}},
	{"noOpenat2/sequential", extractOptions{noOpenat2: true, workers: 1}},
}

func TestExtractTar(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 40<<10) // 640 KiB: several copy buffers
	archive := tarGz(t,
		dir("./"),
		dir("pkg/"),
		file("pkg/main.go", "package main\n"),
		file("pkg/deep/er/x.txt", "implicit parents"),
		file("README", "hi"),
		file("empty", ""),
		file("big.bin", big),
		dir("emptydir/"),
	)
	for _, o := range allOptions {
		t.Run(o.name, func(t *testing.T) {
			s := newSandbox(t)
			ap := writeArchive(t, s.root, archive)
			res, err := extractTar(ap, s.dest, Options{}, o.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustJSONT(t, res); got != `{"success":true,"fileCount":5}` {
				t.Fatalf("result = %s", got)
			}
			want := map[string]string{
				"pkg":               "d700",
				"pkg/main.go":       "f600:package main\n",
				"pkg/deep":          "d700",
				"pkg/deep/er":       "d700",
				"pkg/deep/er/x.txt": "f600:implicit parents",
				"README":            "f600:hi",
				"empty":             "f600:",
				"big.bin":           "f600:" + big,
				"emptydir":          "d700",
				".synced":           "f600:",
			}
			if got := tree(t, s.dest); !reflect.DeepEqual(got, want) {
				t.Errorf("tree = %v\nwant %v", short(got), short(want))
			}
			fi, err := os.Stat(s.dest)
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("destDir mode = %v, %v; want 0700", fi.Mode(), err)
			}
			if exists(ap) {
				t.Error("archive not consumed")
			}
			if out := s.outside(t); len(out) != 0 {
				t.Errorf("written outside destDir: %v", out)
			}
		})
	}
}

// short truncates long file contents so a failure message stays readable.
func short(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		out[k] = v
	}
	return out
}

func mustJSONT(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExtractTarWipesOldContent(t *testing.T) {
	for _, o := range allOptions {
		t.Run(o.name, func(t *testing.T) {
			s := newSandbox(t)
			mustWriteTB(t, filepath.Join(s.dest, "old.txt"), "old")
			mustWriteTB(t, filepath.Join(s.dest, "keep", "nested", "old"), "old")
			mustWriteTB(t, filepath.Join(s.dest, ".synced"), "stale")
			if err := os.Chmod(s.dest, 0o755); err != nil {
				t.Fatal(err)
			}
			ap := writeArchive(t, s.root, tarGz(t, file("keep/new", "new")))
			res, err := extractTar(ap, s.dest, Options{}, o.opt)
			if err != nil || !res.Success {
				t.Fatalf("extract = %+v, %v", res, err)
			}
			want := map[string]string{"keep": "d700", "keep/new": "f600:new", ".synced": "f600:"}
			if got := tree(t, s.dest); !reflect.DeepEqual(got, want) {
				t.Errorf("tree = %v, want %v", got, want)
			}
			if l := leftovers(t, filepath.Dir(s.dest)); len(l) != 0 {
				t.Errorf("old tree left aside: %v", l)
			}
			if fi, err := os.Stat(s.dest); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("destDir mode = %v, %v; want 0700", fi.Mode(), err)
			}
			// destDir's parent holds nothing else, hidden or not.
			if des, err := os.ReadDir(filepath.Dir(s.dest)); err != nil || len(des) != 1 || des[0].Name() != "dest" {
				t.Errorf("parent holds %v, %v; want only dest", des, err)
			}
		})
	}
}

// A destDir whose name leaves no room for the hidden sibling is wiped in
// place instead.
func TestExtractTarMoveAsideFallback(t *testing.T) {
	root := t.TempDir()
	dest := filepath.Join(root, strings.Repeat("d", 250))
	mustWriteTB(t, filepath.Join(dest, "old", "file"), "old")
	ap := writeArchive(t, root, tarGz(t, file("new", "new")))
	res, err := ExtractTar(ap, dest)
	if err != nil || !res.Success {
		t.Fatalf("extract = %+v, %v", res, err)
	}
	want := map[string]string{"new": "f600:new", ".synced": "f600:"}
	if got := tree(t, dest); !reflect.DeepEqual(got, want) {
		t.Errorf("tree = %v, want %v", got, want)
	}
	if des, err := os.ReadDir(root); err != nil || len(des) != 1 {
		t.Errorf("root holds %v, %v; want only destDir", des, err)
	}
}

// destDir as a symlink: like RemoveAll, the link itself is replaced and its
// target is left alone.
func TestExtractTarDestIsSymlink(t *testing.T) {
	s := newSandbox(t)
	target := filepath.Join(s.root, "target")
	mustWriteTB(t, filepath.Join(target, "precious"), "keep me")
	if err := os.MkdirAll(filepath.Dir(s.dest), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, s.dest); err != nil {
		t.Fatal(err)
	}
	ap := writeArchive(t, s.root, tarGz(t, file("x", "y")))
	if res, _ := ExtractTar(ap, s.dest); !res.Success {
		t.Fatalf("extract = %+v", res)
	}
	if fi, err := os.Lstat(s.dest); err != nil || !fi.IsDir() {
		t.Errorf("destDir is %v, %v; want a real directory", fi.Mode(), err)
	}
	if got := tree(t, target); got["precious"] != "f644:keep me" && got["precious"] != "f600:keep me" {
		t.Errorf("symlink target changed: %v", got)
	}
}

func TestExtractTarRequiredParams(t *testing.T) {
	d := t.TempDir()
	ap := writeArchive(t, d, tarGz(t, file("x", "y")))
	for _, args := range [][2]string{{"", filepath.Join(d, "dest")}, {ap, ""}, {"", ""}} {
		res, err := ExtractTar(args[0], args[1])
		var we *wire.Error
		if !errors.As(err, &we) || *we != (wire.Error{Code: -32602, Message: "archivePath and destDir are required"}) {
			t.Errorf("ExtractTar(%q, %q) error = %v", args[0], args[1], err)
		}
		if res != (wire.ExtractResult{}) {
			t.Errorf("ExtractTar(%q, %q) result = %+v, want zero", args[0], args[1], res)
		}
	}
	if !exists(ap) {
		t.Error("archive consumed by a request missing params")
	}
}

func TestExtractTarBadDestDir(t *testing.T) {
	d := t.TempDir()
	ap := writeArchive(t, d, tarGz(t, file("x", "y")))
	for _, dest := range []string{"relative/dest", "dest", ".", "/", "//", "/./", "/tmp/.."} {
		res, err := ExtractTar(ap, dest)
		if err != nil {
			t.Fatalf("ExtractTar(%q) error = %v", dest, err)
		}
		want := `{"success":false,"error":"destDir must be an absolute, non-root path: ` + dest + `"}`
		if got := mustJSONT(t, res); got != want {
			t.Errorf("ExtractTar(%q) = %s, want %s", dest, got, want)
		}
		if !exists(ap) {
			t.Fatalf("archive consumed for destDir %q", dest)
		}
	}
}

func TestExtractTarMissingArchive(t *testing.T) {
	s := newSandbox(t)
	mustWriteTB(t, filepath.Join(s.dest, "old"), "old")
	ap := filepath.Join(s.root, "missing.tgz")
	res, err := ExtractTar(ap, s.dest)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"success":false,"error":"open ` + ap + `: no such file or directory"}`
	if got := mustJSONT(t, res); got != want {
		t.Errorf("result = %s, want %s", got, want)
	}
	if !exists(filepath.Join(s.dest, "old")) {
		t.Error("destDir wiped although the archive could not be opened")
	}
}

func TestExtractTarBadGzip(t *testing.T) {
	valid := tarGz(t, file("a", "aaaa"), file("b", strings.Repeat("b", 100000)))
	corruptCRC := bytes.Clone(valid)
	corruptCRC[len(corruptCRC)-8] ^= 0xff
	tests := []struct {
		name, data, wantErr string
	}{
		{"not gzip", "this is not a gzip stream at all", "gzip: invalid header"},
		{"empty file", "", "gzip: EOF"},
		{"plain tar", string(tarBytes(t, file("a", "b"))), "gzip: invalid header"},
		{"truncated", string(valid[:len(valid)/2]), "gzip: unexpected EOF"},
		{"bad checksum", string(corruptCRC), "gzip: invalid checksum"},
		{"trailing garbage", string(valid) + "this is trailing garbage, not a gzip member", "gzip: invalid header"},
	}
	for _, tt := range tests {
		for _, o := range allOptions {
			t.Run(tt.name+"/"+o.name, func(t *testing.T) {
				s := newSandbox(t)
				ap := writeArchive(t, s.root, []byte(tt.data))
				res, err := extractTar(ap, s.dest, Options{}, o.opt)
				if err != nil {
					t.Fatal(err)
				}
				want := `{"success":false,"fileCount":0,"error":"` + tt.wantErr + `"}`
				if got := mustJSONT(t, res); got != want {
					t.Errorf("result = %s, want %s", got, want)
				}
				if exists(ap) {
					t.Error("archive not consumed")
				}
				if exists(filepath.Join(s.dest, ".synced")) {
					t.Error(".synced written on failure")
				}
				if out := s.outside(t); len(out) != 0 {
					t.Errorf("written outside destDir: %v", out)
				}
			})
		}
	}
}

// A stream that is not gzip at all is refused before destDir is touched.
func TestExtractTarBadGzipKeepsDestDir(t *testing.T) {
	s := newSandbox(t)
	mustWriteTB(t, filepath.Join(s.dest, "old"), "old")
	ap := writeArchive(t, s.root, []byte("nope"))
	if res, _ := ExtractTar(ap, s.dest); res.Success {
		t.Fatal("success on garbage")
	}
	if !exists(filepath.Join(s.dest, "old")) {
		t.Error("destDir wiped for an archive whose gzip header is bad")
	}
}

func TestExtractTarHostile(t *testing.T) {
	longName := strings.Repeat("n", 10<<10)
	longMsg := strings.Repeat("n", 1024) + "... (10240 bytes)"
	tests := []struct {
		name    string
		entries func(s sandbox) []entry
		wantErr string // "" = success
		altErr  string // also accepted from parallel workers
		check   func(t *testing.T, s sandbox)
	}{
		{name: "dotdot escape", entries: one(file("../../escape", "x")),
			wantErr: "unsafe path in archive: ../../escape"},
		{name: "deep dotdot escape", entries: one(file("../../../../../../../../../../../../tmp/escape", "x")),
			wantErr: "unsafe path in archive: ../../../../../../../../../../../../tmp/escape"},
		{name: "dotdot dir escape", entries: one(dir("../evil/")),
			wantErr: "unsafe path in archive: ../evil/"},
		{name: "absolute", entries: func(s sandbox) []entry { return []entry{file(filepath.Join(s.root, "abs"), "x")} },
			wantErr: "unsafe path in archive: <root>/abs"},
		{name: "absolute etc", entries: one(file("/etc/x", "x")),
			wantErr: "unsafe path in archive: /etc/x"},
		{name: "absolute inside dest", entries: func(s sandbox) []entry { return []entry{file(s.dest+"/x", "x")} },
			wantErr: "unsafe path in archive: <root>/a/b/c/dest/x"},
		{name: "a/../../b", entries: one(file("a/../../b", "x")),
			wantErr: "unsafe path in archive: a/../../b"},
		{name: "sibling prefix", entries: one(file("../dest-evil/x", "x")),
			wantErr: "unsafe path in archive: ../dest-evil/x"},
		{name: "a/../b allowed", entries: one(file("a/../b", "x")),
			check: wantTree(map[string]string{"b": "f600:x", ".synced": "f600:"})},
		{name: "back inside allowed", entries: one(file("../dest/in", "x")),
			check: wantTree(map[string]string{"in": "f600:x", ".synced": "f600:"})},
		{name: "file named dot", entries: one(file(".", "x")), wantErr: "unsafe path in archive: ."},
		{name: "file with empty name", entries: one(file("", "x")), wantErr: "unsafe path in archive: "},
		{name: "10 KB name", entries: one(file(longName, "x")), wantErr: "unsafe path in archive: " + longMsg},
		{name: "10 KB dir name", entries: one(dir(longName + "/")), wantErr: "unsafe path in archive: " + strings.Repeat("n", 1024) + "... (10241 bytes)"},
		{name: "symlink", entries: one(special("link", tar.TypeSymlink)),
			wantErr: "unsupported tar entry type 2: link"},
		{name: "symlink then write through it", entries: one(special("link", tar.TypeSymlink), file("link/x", "x")),
			wantErr: "unsupported tar entry type 2: link"},
		{name: "hardlink", entries: one(special("hard", tar.TypeLink)),
			wantErr: "unsupported tar entry type 1: hard"},
		{name: "char device", entries: one(special("null", tar.TypeChar)),
			wantErr: "unsupported tar entry type 3: null"},
		{name: "block device", entries: one(special("sda", tar.TypeBlock)),
			wantErr: "unsupported tar entry type 4: sda"},
		{name: "fifo", entries: one(special("fifo", tar.TypeFifo)),
			wantErr: "unsupported tar entry type 6: fifo"},
		{name: "contiguous", entries: one(special("cont", tar.TypeCont)),
			wantErr: "unsupported tar entry type 7: cont"},
		{name: "unknown type", entries: one(special("what", 'Z')),
			wantErr: "unsupported tar entry type Z: what"},
		{name: "unprintable type", entries: func(s sandbox) []entry { return []entry{rawEntry(t, "ctl", 0x01, tar.FormatUSTAR, nil)} },
			wantErr: `unsupported tar entry type \x01: ctl`},
		{name: "old GNU sparse", entries: func(s sandbox) []entry { return []entry{rawEntry(t, "sp", tar.TypeGNUSparse, tar.FormatGNU, nil)} },
			wantErr: "unsupported tar entry type S: sp"},
		{name: "PAX sparse", entries: func(s sandbox) []entry { return paxSparse(t, "sp") },
			wantErr: "unsupported tar entry type S: sp"},
		{name: "unsafe name checked before type", entries: one(special("../link", tar.TypeSymlink)),
			wantErr: "unsafe path in archive: ../link"},
		{name: "good files then bad entry", entries: one(file("ok1", "1"), file("ok2", "2"), special("link", tar.TypeSymlink)),
			wantErr: "unsupported tar entry type 2: link",
			// Partial output stays, documented; the marker does not.
			check: wantTree(map[string]string{"ok1": "f600:1", "ok2": "f600:2"})},
		{name: "file then dir of same name", entries: one(file("x", "1"), dir("x/")),
			wantErr: "mkdir <root>/a/b/c/dest/x: file exists"},
		// The worker meets the mkdir failure after the main loop refused the
		// symlink: the earlier entry's failure is still the one reported.
		{name: "earliest failure wins", entries: one(file("x", "1"), dir("x/"), special("link", tar.TypeSymlink)),
			wantErr: "mkdir <root>/a/b/c/dest/x: file exists"},
		{name: "dir then file of same name", entries: one(dir("x/"), file("x", "1")),
			wantErr: "open <root>/a/b/c/dest/x: file exists"},
		// Different paths go to different workers: whichever lands first
		// decides which of the two entries fails.
		{name: "file under a file", entries: one(file("x", "1"), file("x/y", "2")),
			wantErr: "open <root>/a/b/c/dest/x/y: not a directory", altErr: "open <root>/a/b/c/dest/x: file exists"},
		{name: ".synced as a directory", entries: one(dir(".synced/")),
			wantErr: "write .synced: open <root>/a/b/c/dest/.synced: is a directory"},
		{name: "component too long", entries: one(file(strings.Repeat("c", 300), "x")),
			wantErr: "open <root>/a/b/c/dest/" + strings.Repeat("c", 300) + ": file name too long"},
		{name: "truncated tar", entries: func(s sandbox) []entry {
			return []entry{{raw: tarBytes(t, file("x", strings.Repeat("x", 2000)))[:1024]}}
		}, wantErr: "read archive: unexpected EOF"},
		{name: "garbage header", entries: func(s sandbox) []entry { return []entry{{raw: bytes.Repeat([]byte("junk"), 256)}} },
			wantErr: "read archive: archive/tar: invalid tar header"},
		// Benign cases that must not be refused.
		{name: "global header skipped", entries: func(s sandbox) []entry {
			return []entry{{hdr: &tar.Header{Name: "pax_global_header", Typeflag: tar.TypeXGlobalHeader,
				PAXRecords: map[string]string{"comment": "0123abc"}}}, file("f", "x")}
		}, check: wantTree(map[string]string{"f": "f600:x", ".synced": "f600:"})},
		{name: "duplicate file last wins", entries: one(file("f", "first"), file("f", "second")),
			check: wantTree(map[string]string{"f": "f600:second", ".synced": "f600:"})},
		{name: "archive .synced emptied", entries: one(file(".synced", "from archive")),
			check: wantTree(map[string]string{".synced": "f600:"})},
		{name: "legacy regular type", entries: func(s sandbox) []entry { return []entry{rawEntry(t, "old", 0, tar.FormatUSTAR, []byte("o"))} },
			check: wantTree(map[string]string{"old": "f600:o", ".synced": "f600:"})},
		{name: "PAX long name", entries: one(file(strings.Repeat("p/", 150)+"f", "x"))},
		{name: "empty archive", entries: one(), check: wantTree(map[string]string{".synced": "f600:"})},
	}
	for _, tt := range tests {
		for _, o := range allOptions {
			t.Run(tt.name+"/"+o.name, func(t *testing.T) {
				s := newSandbox(t)
				ap := writeArchive(t, s.root, tarGz(t, tt.entries(s)...))
				res, err := extractTar(ap, s.dest, Options{}, o.opt)
				if err != nil {
					t.Fatal(err)
				}
				if res.FileCount == nil {
					t.Fatal("fileCount missing")
				}
				if tt.wantErr != "" {
					want := strings.ReplaceAll(tt.wantErr, "<root>", s.root)
					alt := strings.ReplaceAll(tt.altErr, "<root>", s.root)
					if o.opt.workers == 1 {
						alt = "" // one at a time: only the archive-order failure
					}
					if res.Success || *res.FileCount != 0 || (res.Error != want && (alt == "" || res.Error != alt)) {
						t.Errorf("result = {%v %d %.200q}, want error %.200q", res.Success, *res.FileCount, res.Error, want)
					}
					if exists(filepath.Join(s.dest, ".synced")) && !strings.HasPrefix(tt.wantErr, "write .synced") {
						t.Error(".synced written on failure")
					}
				} else if !res.Success || res.Error != "" {
					t.Errorf("result = %+v, want success", res)
				}
				if exists(ap) {
					t.Error("archive not consumed")
				}
				if out := s.outside(t); len(out) != 0 {
					t.Errorf("written outside destDir: %v", out)
				}
				if exists("/etc/x") || exists("/tmp/escape") {
					t.Error("wrote to an absolute path")
				}
				if tt.check != nil {
					tt.check(t, s)
				}
			})
		}
	}
}

func one(entries ...entry) func(sandbox) []entry {
	return func(sandbox) []entry { return entries }
}

func wantTree(want map[string]string) func(*testing.T, sandbox) {
	return func(t *testing.T, s sandbox) {
		t.Helper()
		if got := tree(t, s.dest); !reflect.DeepEqual(got, want) {
			t.Errorf("tree = %v, want %v", got, want)
		}
	}
}

// An archive inside destDir is read to the end even though wiping destDir
// unlinks it.
func TestExtractTarArchiveInsideDestDir(t *testing.T) {
	s := newSandbox(t)
	big := strings.Repeat("z", 3<<20)
	if err := os.MkdirAll(s.dest, 0o700); err != nil {
		t.Fatal(err)
	}
	ap := writeArchive(t, s.dest, tarGz(t, file("big", big)))
	res, err := ExtractTar(ap, s.dest)
	if err != nil || !res.Success || *res.FileCount != 1 {
		t.Fatalf("extract = %+v, %v", res, err)
	}
	if got := tree(t, s.dest); got["big"] != "f600:"+big || exists(ap) {
		t.Errorf("tree = %v", short(got))
	}
}

// mkdir destDir fails where destDir's parent is a dangling symlink: Lstat
// says destDir does not exist, so nothing needs cleaning, but it cannot be
// created.
func TestExtractTarMkdirFailure(t *testing.T) {
	root := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(root, "dangling", "dest")
	ap := writeArchive(t, root, tarGz(t, file("x", "y")))
	res, err := ExtractTar(ap, dest)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"success":false,"fileCount":0,"error":"mkdir destDir: mkdir ` + filepath.Join(root, "dangling") + `: file exists"}`
	if got := mustJSONT(t, res); got != want {
		t.Errorf("result = %s, want %s", got, want)
	}
	if exists(ap) {
		t.Error("archive not consumed")
	}
}

// clean destDir fails where destDir's parent is a regular file: the rename
// aside fails, and so does the in-place RemoveAll it falls back to.
func TestExtractTarCleanFailure(t *testing.T) {
	root := t.TempDir()
	mustWriteTB(t, filepath.Join(root, "file"), "x")
	dest := filepath.Join(root, "file", "dest")
	ap := writeArchive(t, root, tarGz(t, file("x", "y")))
	res, err := ExtractTar(ap, dest)
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || res.FileCount == nil || *res.FileCount != 0 || !strings.HasPrefix(res.Error, "clean destDir: ") ||
		!strings.HasSuffix(res.Error, "not a directory") {
		t.Errorf("result = %+v", res)
	}
	if exists(ap) {
		t.Error("archive not consumed")
	}
}

// undeletable makes path impossible to delete: its parent read-only for a
// normal user, the immutable attribute for root. It returns a function that
// undoes it at the path's new location.
func undeletable(t *testing.T, path string) (undo func(newPath string)) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(filepath.Dir(path), 0o500); err != nil {
			t.Fatal(err)
		}
		return func(p string) { os.Chmod(filepath.Dir(p), 0o700) }
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s", err, out)
	}
	return func(p string) { exec.Command("chattr", "-i", p).Run() }
}

// In-place wiping reports an undeletable old tree as a clean failure before
// unpacking anything, as the contract's RemoveAll does.
func TestExtractTarCleanFailureInPlace(t *testing.T) {
	s := newSandbox(t)
	stuck := filepath.Join(s.dest, "sub", "stuck")
	mustWriteTB(t, stuck, "x")
	undo := undeletable(t, stuck)
	t.Cleanup(func() { undo(stuck) })
	ap := writeArchive(t, s.root, tarGz(t, file("new", "y")))
	res, _ := extractTar(ap, s.dest, Options{}, extractOptions{wipeInPlace: true})
	if res.Success || !strings.HasPrefix(res.Error, "clean destDir: ") || *res.FileCount != 0 {
		t.Errorf("result = %+v", res)
	}
	if exists(ap) {
		t.Error("archive not consumed")
	}
}

// With the old tree moved aside, an undeletable old tree is found after the
// new one is written: the call still fails with "clean destDir", leaves no
// marker, and leaves the remains in the hidden sibling.
func TestExtractTarCleanFailureMovedAside(t *testing.T) {
	s := newSandbox(t)
	stuck := filepath.Join(s.dest, "sub", "stuck")
	mustWriteTB(t, stuck, "x")
	undo := undeletable(t, stuck)
	parent := filepath.Dir(s.dest)
	t.Cleanup(func() {
		undo(stuck)
		for _, l := range leftovers(t, parent) {
			undo(filepath.Join(parent, l, "dest", "sub", "stuck"))
		}
	})
	ap := writeArchive(t, s.root, tarGz(t, file("new", "y")))
	res, _ := ExtractTar(ap, s.dest)
	if res.Success || !strings.HasPrefix(res.Error, "clean destDir: ") || *res.FileCount != 0 {
		t.Errorf("result = %+v", res)
	}
	if got := tree(t, s.dest); !reflect.DeepEqual(got, map[string]string{"new": "f600:y"}) {
		t.Errorf("tree = %v", got)
	}
	if l := leftovers(t, parent); len(l) != 1 {
		t.Errorf("leftovers = %v, want the one undeletable old tree", l)
	}
}

// A FIFO archive whose writer stalls after a hostile entry: the extraction
// must fail promptly rather than wait for the rest of the stream. Whether the
// read-ahead is then blocked on the FIFO is up to scheduling;
// TestReadaheadStopUnblocksSource pins that case down.
func TestExtractTarStalledFIFO(t *testing.T) {
	s := newSandbox(t)
	ap := filepath.Join(s.root, "archive.fifo")
	if err := syscall.Mkfifo(ap, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	// A hostile first entry, then an incompressible entry cut in the middle:
	// the writer keeps the stream open until the test ends. (The cut must
	// fall well after the hostile entry: a gzip reader holds back the last
	// piece of a stream until it has read the trailer.)
	noise := make([]byte, 512<<10)
	rand.NewChaCha8([32]byte{}).Read(noise)
	data := tarGz(t, special("link", tar.TypeSymlink), file("noise", string(noise)))
	data = data[:len(data)/2]
	release := make(chan struct{})
	go func() {
		w, err := os.OpenFile(ap, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Close()
		w.Write(data)
		<-release
	}()
	defer close(release)
	done := make(chan wire.ExtractResult)
	go func() {
		res, _ := ExtractTar(ap, s.dest)
		done <- res
	}()
	select {
	case res := <-done:
		if res.Error != "unsupported tar entry type 2: link" {
			t.Errorf("result = %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ExtractTar hung on a stalled archive")
	}
}

func TestSafeTarget(t *testing.T) {
	dest := "/srv/dest"
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"a", "/srv/dest/a", true},
		{"a/b/../c", "/srv/dest/a/c", true},
		{"./a", "/srv/dest/a", true},
		{"", "/srv/dest", true},
		{".", "/srv/dest", true},
		{"a/..", "/srv/dest", true},
		{"../dest/a", "/srv/dest/a", true},
		{"..", "", false},
		{"../dest", "/srv/dest", true},
		{"../destx", "", false},
		{"/a", "", false},
		{"a/../../b", "", false},
		{"a\x00b", "", false},
		{strings.Repeat("a", maxNameLen), "/srv/dest/" + strings.Repeat("a", maxNameLen), true},
		{strings.Repeat("a", maxNameLen+1), "", false},
	}
	for _, tt := range tests {
		got, ok := safeTarget(dest, tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("safeTarget(%.20q) = %.30q, %v; want %.30q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestQuoteName(t *testing.T) {
	if got := quoteName("short"); got != "short" {
		t.Errorf("quoteName(short) = %q", got)
	}
	// A multi-byte rune straddling the cut is not split.
	name := strings.Repeat("a", msgNameLen-1) + "é" + strings.Repeat("b", 10)
	got := quoteName(name)
	if want := strings.Repeat("a", msgNameLen-1) + "... (1035 bytes)"; got != want {
		t.Errorf("quoteName = %q, want %q", got, want)
	}
}
