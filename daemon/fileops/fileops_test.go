package fileops

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

func mustWrite(t *testing.T, p, content string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // past the umask
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestStat(t *testing.T) {
	d := t.TempDir()
	mustWrite(t, filepath.Join(d, "f"), "hello", 0o644)
	if err := os.Symlink("f", filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(d, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"file", "f", `{"exists":true,"isDir":false,"size":5,"mode":"-rw-r--r--"}`},
		{"symlink followed", "link", `{"exists":true,"isDir":false,"size":5,"mode":"-rw-r--r--"}`},
		{"missing", "missing", `{"exists":false,"isDir":false,"size":0,"mode":""}`},
		{"dangling symlink", "dangling", `{"exists":false,"isDir":false,"size":0,"mode":""}`},
		{"file used as dir", "f/x", `{"exists":false,"isDir":false,"size":0,"mode":""}`},
		{"over-long path", strings.Repeat("x", 5000), `{"exists":false,"isDir":false,"size":0,"mode":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustJSON(t, Stat(filepath.Join(d, tt.path))); got != tt.want {
				t.Errorf("Stat = %s, want %s", got, tt.want)
			}
		})
	}
	t.Run("dir", func(t *testing.T) {
		got := Stat(d)
		if !got.Exists || !got.IsDir || got.Mode != "drwxr-xr-x" {
			t.Errorf("Stat(dir) = %+v", got)
		}
	})
}

func TestList(t *testing.T) {
	d := t.TempDir()
	mustWrite(t, filepath.Join(d, "b.txt"), "b", 0o644)
	mustWrite(t, filepath.Join(d, "a.txt"), "a", 0o644)
	mustWrite(t, filepath.Join(d, ".env"), "secret", 0o600)
	mustWrite(t, filepath.Join(d, "sub", "x"), "x", 0o644)
	mustWrite(t, filepath.Join(d, ".git", "HEAD"), "ref", 0o644)
	for link, target := range map[string]string{"tosub": "sub", "dangling": "nowhere", "tofile": "a.txt", ".hiddenlink": "sub"} {
		if err := os.Symlink(target, filepath.Join(d, link)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := List(d)
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.ListEntry{
		{Name: "a.txt", Path: filepath.Join(d, "a.txt")},
		{Name: "b.txt", Path: filepath.Join(d, "b.txt")},
		{Name: "dangling", Path: filepath.Join(d, "dangling")},
		{Name: "sub", Path: filepath.Join(d, "sub"), IsDir: true},
		{Name: "tofile", Path: filepath.Join(d, "tofile")},
		{Name: "tosub", Path: filepath.Join(d, "tosub"), IsDir: true},
	}
	if g, w := mustJSON(t, got), mustJSON(t, wire.ListResult{Entries: want}); g != w {
		t.Errorf("List =\n%s\nwant\n%s", g, w)
	}
}

func TestListEmptyMarshalsArray(t *testing.T) {
	d := t.TempDir()
	mustWrite(t, filepath.Join(d, ".only-hidden"), "", 0o644)
	got, err := List(d)
	if err != nil {
		t.Fatal(err)
	}
	if s := mustJSON(t, got); s != `{"entries":[]}` {
		t.Errorf("List(empty) = %s", s)
	}
}

func TestListErrors(t *testing.T) {
	d := t.TempDir()
	missing := filepath.Join(d, "missing")
	_, err := List(missing)
	if err == nil || err.Error() != "open "+missing+": no such file or directory" {
		t.Errorf("List(missing) error = %v", err)
	}
	var we *wire.Error
	if errors.As(err, &we) {
		t.Errorf("List(missing) returned a wire error %v; want a plain error (-32603)", we)
	}
	mustWrite(t, filepath.Join(d, "f"), "x", 0o644)
	if _, err := List(filepath.Join(d, "f")); err == nil {
		t.Error("List(file) succeeded")
	}
}

func i64(v int64) *int64 { return &v }

func TestRead(t *testing.T) {
	d := t.TempDir()
	content := "line 1\nline 2 \xe2\x9c\x93\n"
	mustWrite(t, filepath.Join(d, "f"), content, 0o644)
	mustWrite(t, filepath.Join(d, "empty"), "", 0o644)
	if err := os.Symlink("f", filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	n := int64(len(content))
	tests := []struct {
		name     string
		path     string
		maxBytes *int64
		want     wire.ReadResult
		wantErr  *wire.Error
	}{
		{name: "file", path: "f", want: wire.ReadResult{Content: content, Exists: true}},
		{name: "through symlink", path: "link", want: wire.ReadResult{Content: content, Exists: true}},
		{name: "empty", path: "empty", want: wire.ReadResult{Exists: true}},
		{name: "missing", path: "missing", want: wire.ReadResult{}},
		{name: "maxBytes equal", path: "f", maxBytes: i64(n), want: wire.ReadResult{Content: content, Exists: true}},
		{name: "maxBytes larger", path: "f", maxBytes: i64(1 << 62), want: wire.ReadResult{Content: content, Exists: true}},
		{name: "maxBytes huge", path: "f", maxBytes: i64(1<<63 - 1), want: wire.ReadResult{Content: content, Exists: true}},
		{name: "maxBytes zero on empty", path: "empty", maxBytes: i64(0), want: wire.ReadResult{Exists: true}},
		{name: "maxBytes exceeded", path: "f", maxBytes: i64(n - 1), wantErr: &wire.Error{Code: -32602, Message: "files.read: file exceeds maxBytes"}},
		{name: "maxBytes zero", path: "f", maxBytes: i64(0), wantErr: &wire.Error{Code: -32602, Message: "files.read: file exceeds maxBytes"}},
		{name: "directory", path: ".", wantErr: &wire.Error{Code: -32602, Message: "files.read: path is a directory"}},
		{name: "directory with maxBytes", path: ".", maxBytes: i64(0), wantErr: &wire.Error{Code: -32602, Message: "files.read: path is a directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := Read(filepath.Join(d, tt.path), tt.maxBytes)
			if tt.wantErr != nil {
				var we *wire.Error
				if !errors.As(err, &we) || *we != *tt.wantErr {
					t.Fatalf("Read error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := decodeRead(t, raw); got != tt.want {
				t.Errorf("Read = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// decodeRead decodes Read's answer as a client would.
func decodeRead(t *testing.T, raw json.RawMessage) wire.ReadResult {
	t.Helper()
	var r wire.ReadResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return r
}

func TestReadPlainErrors(t *testing.T) {
	d := t.TempDir()
	mustWrite(t, filepath.Join(d, "f"), "x", 0o644)
	// A file used as a directory is not "missing": the reference's
	// os.IsNotExist does not match ENOTDIR either.
	_, err := Read(filepath.Join(d, "f", "x"), nil)
	var we *wire.Error
	if err == nil || errors.As(err, &we) {
		t.Errorf("Read(file/x) error = %v, want a plain error", err)
	}
	if os.Geteuid() != 0 {
		mustWrite(t, filepath.Join(d, "secret"), "x", 0o000)
		if _, err := Read(filepath.Join(d, "secret"), nil); err == nil || errors.As(err, &we) {
			t.Errorf("Read(unreadable) error = %v, want a plain error", err)
		}
	}
}

// A device that never ends is read only to maxBytes+1.
func TestReadBoundedByMaxBytes(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	_, err := Read("/dev/zero", i64(1000))
	var we *wire.Error
	if !errors.As(err, &we) || we.Message != "files.read: file exceeds maxBytes" {
		t.Errorf("Read(/dev/zero, 1000) error = %v", err)
	}
}

// A FIFO with no writer must not hang the daemon.
func TestReadFIFODoesNotBlock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		raw, err := Read(p, nil)
		if err != nil || decodeRead(t, raw) != (wire.ReadResult{Exists: true}) {
			t.Errorf("Read(fifo) = %s, %v", raw, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Read(fifo) blocked")
	}
}

func TestValidate(t *testing.T) {
	d := t.TempDir()
	mustWrite(t, filepath.Join(d, "f"), "x", 0o644)
	tests := []struct {
		name, path, want string
	}{
		{"file", filepath.Join(d, "f"), `{"valid":true,"isDir":false}`},
		{"dir", d, `{"valid":true,"isDir":true}`},
		{"missing", filepath.Join(d, "missing"), `{"valid":false,"isDir":false,"error":"Path does not exist"}`},
		{"file used as dir", filepath.Join(d, "f", "x"),
			`{"valid":false,"isDir":false,"error":"stat ` + filepath.Join(d, "f", "x") + `: not a directory"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustJSON(t, Validate(tt.path)); got != tt.want {
				t.Errorf("Validate = %s, want %s", got, tt.want)
			}
		})
	}
}

// A regular file whose stat size is behind its content (it grew between the
// stat and the read) or ahead of it (it shrank) is read as it is, and
// maxBytes holds on what was read, not on the stat: readFrom is given the
// stale size directly, so each branch runs every time.
func TestReadFromAStaleSize(t *testing.T) {
	content := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	n := int64(len(content))
	tests := []struct {
		name     string
		size     int64
		maxBytes *int64
		want     string // "" with wantErr
		wantErr  bool
	}{
		{name: "grew", size: 1000, want: content},
		{name: "grew, maxBytes equal", size: 1000, maxBytes: i64(n), want: content},
		{name: "grew past maxBytes", size: 1000, maxBytes: i64(n - 1), wantErr: true},
		{name: "grew by one byte", size: n - 1, want: content},
		{name: "shrank", size: 2 * n, want: content},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := readFrom(strings.NewReader(content), tt.size, true, tt.maxBytes)
			if tt.wantErr {
				var we *wire.Error
				if !errors.As(err, &we) || we.Message != "files.read: file exceeds maxBytes" {
					t.Fatalf("readFrom = %.40s, %v; want exceeds maxBytes", raw, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := decodeRead(t, raw); got.Content != tt.want || !got.Exists {
				t.Errorf("readFrom read %d bytes, want %d", len(got.Content), len(tt.want))
			}
		})
	}
}

// A file that really grows while it is read comes back as one prefix of
// what was written, at least as long as the file was before the call, and
// never past maxBytes. This checks the answer stays consistent under a real
// writer; whether the bytes past the stat size are kept is
// TestReadFromAStaleSize's to check (a read that dropped them would still
// be a prefix here).
func TestReadWhileFileGrows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	// Each line names its own offset, so any prefix can be checked exactly.
	var pattern []byte
	for len(pattern) < 4<<20 {
		pattern = append(pattern, fmt.Sprintf("%09d ................................\n", len(pattern))...)
	}
	const base = 256 << 10
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// Each round restarts the file at base bytes, then a writer appends
	// while Read runs and stops when it returns.
	limit := int64(base + 64<<10)
	var grew, exceeded int
	for i := 0; i < 60; i++ {
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(pattern[:base], 0); err != nil {
			t.Fatal(err)
		}
		stop, done := make(chan struct{}), make(chan error, 1)
		go func() {
			for at := base; at < len(pattern); at += 4096 {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				if _, err := f.WriteAt(pattern[at:at+4096], int64(at)); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		maxBytes := (*int64)(nil)
		if i%2 == 1 {
			maxBytes = &limit
		}
		raw, err := Read(p, maxBytes)
		close(stop)
		if werr := <-done; werr != nil {
			t.Fatalf("writer: %v", werr)
		}
		if err != nil {
			var we *wire.Error
			if maxBytes != nil && errors.As(err, &we) && we.Message == "files.read: file exceeds maxBytes" {
				exceeded++
				continue
			}
			t.Fatalf("Read #%d: %v", i, err)
		}
		got := decodeRead(t, raw).Content
		switch {
		case len(got) < base:
			t.Fatalf("Read #%d: %d bytes, the file had %d before the call", i, len(got), base)
		case maxBytes != nil && int64(len(got)) > *maxBytes:
			t.Fatalf("Read #%d: %d bytes past maxBytes %d", i, len(got), *maxBytes)
		case got != string(pattern[:len(got)]):
			t.Fatalf("Read #%d: %d bytes that are not a prefix of what was written", i, len(got))
		case len(got) > base:
			grew++
		}
	}
	t.Logf("60 reads: %d saw the file grow during the call, %d exceeded maxBytes", grew, exceeded)
}
