package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// releaseArchive writes a .tar.gz holding an executable bin/run, as
// `tar czf` archives it, and returns its path.
func releaseArchive(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	if err := os.Mkdir(filepath.Join(src, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "run"), []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "release.tar.gz")
	if out, err := exec.Command("tar", "czf", archive, "-C", src, "bin").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	return archive
}

func TestFilesExtractTarModesAndKeep(t *testing.T) {
	t.Parallel()
	archive := releaseArchive(t)
	dest := filepath.Join(t.TempDir(), "out")
	o := sous(t, "files", "extract-tar", "--modes", "archive", "--keep-archive", archive, dest)
	if o.code != 0 || o.stdout != "extracted 1 file\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if _, err := os.Stat(archive); err != nil {
		t.Errorf("--keep-archive consumed the archive: %v", err)
	}
	if out, err := exec.Command(filepath.Join(dest, "bin", "run")).Output(); err != nil || string(out) != "ran\n" {
		t.Errorf("bin/run = %q, %v; want it executable", out, err)
	}
	// Without the flags: claustrum's extraction.
	o = sous(t, "files", "extract-tar", archive, dest)
	if o.code != 0 || o.stdout != "extracted 1 file\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if fi, err := os.Stat(filepath.Join(dest, "bin", "run")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("bin/run = %v, %v; want 0600", fi, err)
	}
	if _, err := os.Stat(archive); err == nil {
		t.Error("the archive was not consumed")
	}

	o = sous(t, "files", "extract-tar", "--modes", "exec", archive, dest)
	o.expect(t, 2, `--modes: want owner or archive, got "exec"`)
}

// A daemon without files.extract_tar.options is not asked: it would ignore
// the params, consume the archive and give owner-only modes.
func TestFilesExtractTarOptionsNeedTheFeature(t *testing.T) {
	t.Parallel()
	cfg := daemonConfig(t)
	cfg.DisableFeatures = []string{wire.FeatureExtractOptions}
	sock, _ := socketDaemon(t, "tok", cfg)
	archive := releaseArchive(t)
	dest := filepath.Join(t.TempDir(), "out")
	for _, flag := range [][]string{{"--modes", "archive"}, {"--keep-archive"}} {
		args := append(append([]string{"files", "extract-tar", "--socket", sock, "--token-file", tokenFile(t, "tok")}, flag...), archive, dest)
		o := sous(t, args...)
		o.expect(t, 1, archive+": "+strings.Join(flag, " ")+` needs the daemon extension "files.extract_tar.options", which this daemon does not advertise`)
		if _, err := os.Stat(archive); err != nil {
			t.Fatalf("the refused call consumed the archive: %v", err)
		}
		if _, err := os.Stat(dest); err == nil {
			t.Fatal("the refused call made DEST")
		}
	}
}

// The serve flags reach the daemon; 0 disables a limit; a bad value is a
// usage error.
func TestDaemonServeExtractLimits(t *testing.T) {
	t.Parallel()
	bomb := testutil.GzipBomb(t, 96<<20)
	extract := func(d *serveProc) (string, int) {
		archive := filepath.Join(t.TempDir(), "bomb.tar.gz")
		if err := os.WriteFile(archive, bomb, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := d.sousCmd(t, d.clientEnv(), "files", "extract-tar", "--socket", d.socket, archive, filepath.Join(t.TempDir(), "out")).CombinedOutput()
		return string(out), exitCode(err)
	}
	out, code := extract(startServe(t, "tok", "--extract-max-bytes", "8388608"))
	if code != 1 || !strings.Contains(out, "archive unpacks to more than 8 MiB, the daemon's limit (--extract-max-bytes)") {
		t.Errorf("--extract-max-bytes 8388608: exit %d, %s", code, out)
	}
	out, code = extract(startServe(t, "tok", "--extract-max-ratio", "10"))
	if code != 1 || !strings.Contains(out, "archive unpacks to more than 10 times its size of ") {
		t.Errorf("--extract-max-ratio 10: exit %d, %s", code, out)
	}
	out, code = extract(startServe(t, "tok", "--extract-max-bytes", "0", "--extract-max-ratio", "0"))
	if code != 0 || out != "extracted 1 file\n" {
		t.Errorf("limits disabled: exit %d, %s", code, out)
	}

	for _, bad := range [][]string{{"--extract-max-bytes", "-1"}, {"--extract-max-ratio", "-2"}, {"--extract-max-ratio", "NaN"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a daemon that took the flag would serve on
		defer cancel()
		cmd := exec.CommandContext(ctx, sousBinary(t), append([]string{"daemon", "serve", "--token-fd", "0", "--socket", filepath.Join(testutil.ShortTempDir(t), "d.sock")}, bad...)...)
		cmd.Stdin = strings.NewReader("tok\n")
		out, err := cmd.CombinedOutput()
		if code := exitCode(err); code != 2 || !strings.Contains(string(out), bad[0]) {
			t.Errorf("serve %v: exit %d, %s", bad, code, out)
		}
	}
}

// daemon start hands the limits to the daemon it starts.
func TestDaemonStartExtractLimits(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := testutil.ShortTempDir(t)
	sock := filepath.Join(dir, "d.sock")
	start := exec.Command(bin, "daemon", "start", "--socket", sock, "--token-fd", "0", "--extract-max-bytes", "8388608")
	start.Env, start.Stdin = cleanEnv(), strings.NewReader("tok\n")
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("daemon start: %v\n%s", err, out)
	}
	env := append(cleanEnv(), "SOUS_TOKEN=tok")
	t.Cleanup(func() {
		stop := exec.Command(bin, "daemon", "stop", "--socket", sock)
		stop.Env = env
		stop.Run()
	})
	archive := filepath.Join(dir, "bomb.tar.gz")
	if err := os.WriteFile(archive, testutil.GzipBomb(t, 64<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "files", "extract-tar", "--socket", sock, archive, filepath.Join(dir, "out"))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "archive unpacks to more than 8 MiB") {
		t.Errorf("extract-tar: %v %s", err, out)
	}
}
