package client_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// fileMirrorRun spawns `cat FILE; cat FILE >&2` through c with stdout
// passed as out and stderr as errOut, and returns the bytes of each stream
// that arrived in frames marked mirrored, how many frames were marked, and
// the bytes that came unmarked.
func fileMirrorRun(t *testing.T, c *client.Client, id, file string, out, errOut *os.File) (marked [2]int, unmarked [2][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := func(f *wire.Frame) {
		if f.Stream != wire.Stdout && f.Stream != wire.Stderr {
			return
		}
		i := int(f.Stream - wire.Stdout)
		if f.Mirrored {
			if len(f.Data) != 0 {
				t.Errorf("a frame marked mirrored carries %d bytes to its spawner", len(f.Data))
			}
			marked[i]++
			return
		}
		unmarked[i] = append(unmarked[i], f.Data...)
	}
	p, err := c.Spawn(ctx, client.SpawnSpec{
		ID: id, Command: "sh", Args: []string{"-c", `cat "$0"; cat "$0" >&2`, file},
		Mirror: mirror.Spec{Stdout: out, Stderr: errOut},
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
	return marked, unmarked
}

// A daemon on a Unix socket writes output to a regular file and to the
// null device passed with the spawn (process.spawn.mirror.files): the file
// gets the output exactly, after what it held when opened to append, and
// the spawner's frames come marked without data. A client that follows
// the process without having spawned it gets the frames whole.
func TestSocketSpawnWritesFiles(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	c := dialProxy(t, sock)
	file, want := randomFile(t, 4<<20+17)
	path := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(path, []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()

	marked, unmarked := fileMirrorRun(t, c, "f", file, out, null)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, append([]byte("before\n"), want...)) {
		t.Errorf("the file holds %d bytes, want the 7 before it and the %d written once", len(got), len(want))
	}
	for i, name := range []string{"stdout", "stderr"} {
		if marked[i] == 0 || len(unmarked[i]) != 0 {
			t.Errorf("%s: %d frames marked, %d bytes unmarked; want only marked ones", name, marked[i], len(unmarked[i]))
		}
	}

	reattachedWhole(t, sock, "f", want)
}

// A daemon without process.spawn.mirror.files is not passed a file: the
// frames carry its output, and the file is the spawner's to write.
func TestSocketSpawnFilesNeedTheFeature(t *testing.T) {
	c := dialProxy(t, startDaemon(t, daemon.Config{DisableFeatures: []string{wire.FeatureSpawnMirrorFiles}}))
	file, want := randomFile(t, 1<<20)
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	marked, unmarked := fileMirrorRun(t, c, "f", file, out, nil)
	if fi, _ := out.Stat(); fi.Size() != 0 || marked[0] != 0 || !bytes.Equal(unmarked[0], want) {
		t.Errorf("the file holds %d bytes, %d frames marked, %d bytes unmarked of %d", fi.Size(), marked[0], len(unmarked[0]), len(want))
	}
	if !client.PassesMirrors(c) {
		t.Error("the client gave up passing mirrors")
	}
}

// A write to the file that falls short (here the file size limit, as a full
// disk would) ends the mirror at the byte it reached: the file holds what
// was written, and exactly the rest arrives in frames with data, for the
// spawner to write (and fail to) as it would without a mirror. Not
// parallel: the limit is the test process's, the daemon's included.
func TestSocketSpawnFileWriteFallsShort(t *testing.T) {
	c := dialProxy(t, startDaemon(t, daemon.Config{}))
	file, want := randomFile(t, 4<<20+17)
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var was unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	const limit = 1<<20 + 12345 // within a frame, not at a read's end
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: was.Max}); err != nil {
		t.Skipf("cannot limit file sizes here: %v", err)
	}
	marked, unmarked := fileMirrorRun(t, c, "short", file, out, nil)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out.Name())
	if !bytes.Equal(got, want[:limit]) {
		t.Fatalf("the file holds %d bytes, want the first %d", len(got), limit)
	}
	if marked[0] == 0 || !bytes.Equal(unmarked[0], want[limit:]) {
		t.Errorf("%d frames marked, then %d bytes unmarked: want the %d the file did not take", marked[0], len(unmarked[0]), len(want)-limit)
	}
}
