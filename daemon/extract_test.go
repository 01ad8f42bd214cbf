package daemon

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// releaseTarGz is a release with an executable, as `tar czf` makes one.
func releaseTarGz(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, e := range []struct {
		name string
		mode int64
		body string
	}{
		{"bin/", 0o755, ""},
		{"bin/run", 0o755, "#!/bin/sh\necho ran\n"},
		{"README", 0o644, "read me\n"},
	} {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		if strings.HasSuffix(e.name, "/") {
			hdr.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeFileT(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func perm(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// umask reads the process's umask without changing it (tests run in
// parallel: setting it, even briefly, would race their creates).
func umask(t *testing.T) os.FileMode {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			var m uint32
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%o", &m); err == nil {
				return os.FileMode(m)
			}
		}
	}
	t.Skip("no Umask line in /proc/self/status")
	return 0
}

func TestExtractTarOptions(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	dir := t.TempDir()
	ap := writeFileT(t, filepath.Join(dir, "release.tgz"), releaseTarGz(t))
	dest := filepath.Join(dir, "out")

	c.wantResult("files.extract_tar", mustJSON(map[string]any{"archivePath": ap, "destDir": dest, "modes": "archive", "keepArchive": true}),
		`{"success":true,"fileCount":2}`)
	if _, err := os.Stat(ap); err != nil {
		t.Errorf("archive consumed with keepArchive: %v", err)
	}
	um := umask(t)
	if got, want := perm(t, filepath.Join(dest, "bin", "run")), 0o755&^um; got != want {
		t.Errorf("bin/run mode = %v, want %v", got, want)
	}
	if got, want := perm(t, filepath.Join(dest, "README")), 0o644&^um; got != want {
		t.Errorf("README mode = %v, want %v", got, want)
	}
	if out, err := exec.Command(filepath.Join(dest, "bin", "run")).Output(); err != nil || string(out) != "ran\n" {
		t.Errorf("bin/run = %q, %v", out, err)
	}

	// "owner" is the default, spelled out.
	c.wantResult("files.extract_tar", mustJSON(map[string]any{"archivePath": ap, "destDir": dest, "modes": "owner"}),
		`{"success":true,"fileCount":2}`)
	if got := perm(t, filepath.Join(dest, "bin", "run")); got != 0o600 {
		t.Errorf("bin/run mode with modes=owner = %v, want 0600", got)
	}
	if _, err := os.Stat(ap); err == nil {
		t.Error("archive kept without keepArchive")
	}
}

// Without the extension's params the call is claustrum's, byte for byte:
// the same answer, owner-only modes, the archive consumed.
func TestExtractTarDefaultUnchanged(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	dir := t.TempDir()
	ap := writeFileT(t, filepath.Join(dir, "release.tgz"), releaseTarGz(t))
	dest := filepath.Join(dir, "out")
	c.wantResult("files.extract_tar", mustJSON(map[string]any{"archivePath": ap, "destDir": dest}), `{"success":true,"fileCount":2}`)
	for p, want := range map[string]os.FileMode{"bin": 0o700, "bin/run": 0o600, "README": 0o600, ".synced": 0o600} {
		if got := perm(t, filepath.Join(dest, p)); got != want {
			t.Errorf("%s mode = %v, want %v", p, got, want)
		}
	}
	if _, err := os.Stat(ap); err == nil {
		t.Error("archive not consumed")
	}
}

func TestExtractTarOptionsInvalid(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	dir := t.TempDir()
	ap := writeFileT(t, filepath.Join(dir, "release.tgz"), releaseTarGz(t))
	dest := filepath.Join(dir, "out")
	c.wantError("files.extract_tar", mustJSON(map[string]any{"archivePath": ap, "destDir": dest, "modes": "all"}),
		wire.CodeInvalidParams, `modes: want "owner" or "archive", got "all"`)
	c.wantError("files.extract_tar", mustJSON(map[string]any{"archivePath": ap, "destDir": dest, "keepArchive": "yes"}),
		wire.CodeInvalidParams, wire.MsgInvalidParams)
	c.wantError("files.extract_tar", mustJSON(map[string]any{"archivePath": ap, "destDir": dest, "modes": 7}),
		wire.CodeInvalidParams, wire.MsgInvalidParams)
	// The required params are still checked first.
	c.wantError("files.extract_tar", `{"modes":"all"}`, wire.CodeInvalidParams, "archivePath and destDir are required")
	if _, err := os.Stat(ap); err != nil {
		t.Errorf("archive consumed by a refused call: %v", err)
	}
	// The other files.* methods ignore the extension's params, as
	// claustrum ignores keys it does not know.
	c.wantResult("files.stat", mustJSON(map[string]any{"path": ap, "modes": 7, "keepArchive": "x"}),
		fmt.Sprintf(`{"exists":true,"isDir":false,"size":%d,"mode":"-rw-r--r--"}`, len(releaseTarGz(t))))
}

// A daemon without the extension neither advertises it nor honours its
// params (a client must check the feature first).
func TestExtractTarOptionsDisabled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureExtractOptions}})
	c := d.dial()
	if caps := c.result("server.capabilities", ""); strings.Contains(caps, wire.FeatureExtractOptions) {
		t.Errorf("disabled feature advertised: %s", caps)
	}
	dir := t.TempDir()
	ap := writeFileT(t, filepath.Join(dir, "release.tgz"), releaseTarGz(t))
	dest := filepath.Join(dir, "out")
	c.wantResult("files.extract_tar", mustJSON(map[string]any{"archivePath": ap, "destDir": dest, "modes": "archive", "keepArchive": true}),
		`{"success":true,"fileCount":2}`)
	if got := perm(t, filepath.Join(dest, "bin", "run")); got != 0o600 {
		t.Errorf("bin/run mode = %v, want 0600", got)
	}
	if _, err := os.Stat(ap); err == nil {
		t.Error("archive kept by a daemon without the extension")
	}
}

func TestExtractTarOptionsAdvertised(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	var caps wire.CapabilitiesResult
	if err := json.Unmarshal([]byte(d.dial().result("server.capabilities", "")), &caps); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(caps.Features, wire.FeatureExtractOptions) {
		t.Errorf("features = %v, want %s", caps.Features, wire.FeatureExtractOptions)
	}
}

// A real gzip bomb: 1 GiB of zeros in a 1 MiB archive. The daemon's default
// limits refuse it (before them it was unpacked whole), leave destDir
// empty and consume the archive, as every extraction does.
func TestExtractTarGzipBombDefaultLimits(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	dir := t.TempDir()
	bomb := testutil.GzipBomb(t, 1<<30)
	ap := writeFileT(t, filepath.Join(dir, "bomb.tgz"), bomb)
	dest := filepath.Join(dir, "out")
	got := c.result("files.extract_tar", mustJSON(map[string]any{"archivePath": ap, "destDir": dest}))
	// The archive's size is written for people ("1019.7 KiB").
	prefix := `{"success":false,"fileCount":0,"error":"archive unpacks to more than 200 times its size of `
	suffix := ` KiB, the daemon's limit (--extract-max-ratio)"}`
	if !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, suffix) {
		t.Errorf("result = %s\nwant     %s...%s", got, prefix, suffix)
	}
	if des, err := os.ReadDir(dest); err != nil || len(des) != 0 {
		t.Errorf("destDir holds %v, %v; want it empty", des, err)
	}
	if _, err := os.Stat(ap); err == nil {
		t.Error("archive not consumed")
	}
}

func TestExtractTarLimitsConfig(t *testing.T) {
	t.Parallel()
	bomb := testutil.GzipBomb(t, 96<<20)
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" = success
	}{
		{"max bytes", Config{ExtractMaxBytes: 8 << 20},
			"archive unpacks to more than 8 MiB, the daemon's limit (--extract-max-bytes)"},
		{"max ratio", Config{ExtractMaxRatio: 50},
			"archive unpacks to more than 50 times its size of "},
		{"disabled", Config{ExtractMaxBytes: -1, ExtractMaxRatio: -1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t, tt.cfg)
			dir := t.TempDir()
			ap := writeFileT(t, filepath.Join(dir, "bomb.tgz"), bomb)
			var res wire.ExtractResult
			if err := json.Unmarshal([]byte(d.dial().result("files.extract_tar", mustJSON(map[string]any{"archivePath": ap, "destDir": filepath.Join(dir, "out")}))), &res); err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantErr == "" && !res.Success:
				t.Errorf("result = %+v, want success", res)
			case tt.wantErr != "" && (res.Success || !strings.HasPrefix(res.Error, tt.wantErr)):
				t.Errorf("result = %+v, want error %q", res, tt.wantErr)
			}
		})
	}
}
