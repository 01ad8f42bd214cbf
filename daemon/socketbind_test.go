package daemon

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// TestLongSocketPathIsNeverBoundInPlace: a socket is bound in a private
// directory, made 0600 and only then renamed into place, so that no other
// user can connect before the chmod. A path too long for the private
// directory's name to fit in sun_path was bound at its final path under the
// process umask instead: with umask 000, another user connected in that
// window 13 times in 20. inotify on the socket's directory shows how the
// final name appears: created in place (the race) or moved in (no race).
// Not parallel: it sets the process umask.
func TestLongSocketPathIsNeverBoundInPlace(t *testing.T) {
	base := testutil.ShortTempDir(t)
	// 100 bytes: under sun_path's 107, too long with /.sous-NNNNNNNNN/s.
	name := "s.sock"
	dir := filepath.Join(base, strings.Repeat("d", 100-len(base)-2-len(name)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if len(path) != 100 {
		t.Fatalf("path is %d bytes", len(path))
	}

	ino, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("no inotify: %v", err)
	}
	defer unix.Close(ino)
	if _, err := unix.InotifyAddWatch(ino, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ATTRIB); err != nil {
		t.Fatal(err)
	}

	old := unix.Umask(0) // the worst case: a socket bound in place is 0777
	ln, err := ListenUnix(path)
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	var created, moved bool
	buf := make([]byte, 64<<10)
	n, err := unix.Read(ino, buf)
	if err != nil {
		t.Fatalf("reading inotify: %v", err)
	}
	for b := buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
		mask := binary.NativeEndian.Uint32(b[4:8])
		nlen := binary.NativeEndian.Uint32(b[12:16])
		ev := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+nlen], "\x00"))
		b = b[unix.SizeofInotifyEvent+nlen:]
		if ev != name {
			continue
		}
		created = created || mask&unix.IN_CREATE != 0
		moved = moved || mask&unix.IN_MOVED_TO != 0
	}
	if created {
		t.Error("the socket was bound at its final path, where others may connect before its chmod")
	}
	if !moved {
		t.Error("the socket was not renamed into place")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want a 0600 socket", fi.Mode())
	}
	// It serves, and its Addr is the path, not where it was bound.
	if got := ln.Addr().String(); got != path {
		t.Errorf("Addr = %q, want %q", got, path)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the socket's directory holds %d entries, want the socket alone", len(ents))
	}
}

// A path no client could dial is refused, not served.
func TestSocketPathTooLong(t *testing.T) {
	t.Parallel()
	path := filepath.Join(testutil.ShortTempDir(t), strings.Repeat("x", 120))
	ln, err := ListenUnix(path)
	if err == nil {
		ln.Close()
		t.Fatal("a socket path over 107 bytes was served")
	}
	if want := "a Unix socket's may be 107 at most"; !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}
