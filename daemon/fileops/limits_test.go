package fileops

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

func TestExtractTarGzipBomb(t *testing.T) {
	const size = 256 << 20
	bomb := testutil.GzipBomb(t, size)
	t.Logf("bomb: %d bytes of archive unpack to %d", len(bomb), size)
	tests := []struct {
		name    string
		lim     Limits
		wantErr string
	}{
		{"bytes", Limits{MaxBytes: 16 << 20},
			"archive unpacks to more than 16 MiB, the daemon's limit (--extract-max-bytes)"},
		// Past the floor, the ratio refuses what the byte limit allows.
		{"ratio", Limits{MaxBytes: 1 << 40, MaxRatio: 20},
			"archive unpacks to more than 20 times its size of " + formatBytes(int64(len(bomb))) + ", the daemon's limit (--extract-max-ratio)"},
	}
	for _, tt := range tests {
		for _, o := range allOptions {
			t.Run(tt.name+"/"+o.name, func(t *testing.T) {
				s := newSandbox(t)
				mustWriteTB(t, filepath.Join(s.dest, "old", "tree"), "old")
				ap := writeArchive(t, s.root, bomb)
				res, err := extractTar(ap, s.dest, Options{Limits: tt.lim}, o.opt)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := mustJSONT(t, res), `{"success":false,"fileCount":0,"error":"`+tt.wantErr+`"}`; got != want {
					t.Fatalf("result = %s\nwant     %s", got, want)
				}
				checkEmptyAfterBomb(t, s, ap)
			})
		}
	}
}

// checkEmptyAfterBomb: destDir is there and empty (wiped, as every call
// wipes it, and nothing of the bomb left), the archive is consumed, and
// nothing else was written.
func checkEmptyAfterBomb(t *testing.T, s sandbox, ap string) {
	t.Helper()
	if got := tree(t, s.dest); len(got) != 0 {
		t.Errorf("destDir holds %v, want it empty", short(got))
	}
	if fi, err := os.Lstat(s.dest); err != nil || !fi.IsDir() {
		t.Errorf("destDir = %v, %v; want a directory", fi, err)
	}
	if exists(ap) {
		t.Error("archive not consumed")
	}
	if out := s.outside(t); len(out) != 0 {
		t.Errorf("written outside destDir: %v", out)
	}
}

// A bomb arriving through a pipe: its size is unknown, so the ratio is
// taken against the bytes read so far.
func TestExtractTarGzipBombFIFO(t *testing.T) {
	bomb := testutil.GzipBomb(t, 256<<20)
	s := newSandbox(t)
	ap := filepath.Join(s.root, "archive.fifo")
	if err := syscall.Mkfifo(ap, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	go func() {
		w, err := os.OpenFile(ap, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Close()
		w.Write(bomb) // EPIPE once the extraction gives up
	}()
	res, err := Extract(ap, s.dest, Options{Limits: Limits{MaxRatio: 20}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || !strings.HasPrefix(res.Error, "archive unpacks to more than 20 times its size of ") {
		t.Fatalf("result = %+v", res)
	}
	checkEmptyAfterBomb(t, s, ap)
}

// Limits refuse bombs, not archives: a source tree, and a small archive
// whose files compress a thousandfold (under RatioFloor), both pass.
func TestExtractTarLimitsAllowOrdinaryArchives(t *testing.T) {
	lim := Limits{MaxBytes: 16 << 30, MaxRatio: 200}
	zeros := strings.Repeat("\x00", 8<<20)
	for _, entries := range [][]entry{
		{file("src/main.go", "package main\n"), file("src/big.txt", strings.Repeat("some text\n", 50000))},
		{file("zeros.img", zeros)},
	} {
		s := newSandbox(t)
		ap := writeArchive(t, s.root, tarGz(t, entries...))
		res, err := Extract(ap, s.dest, Options{Limits: lim})
		if err != nil || !res.Success || *res.FileCount != len(entries) {
			t.Fatalf("extract = %+v, %v", res, err)
		}
	}
}

// limitReader passes exactly MaxBytes and refuses the byte after.
func TestLimitReaderBoundary(t *testing.T) {
	var compressed atomic.Int64
	for _, tt := range []struct {
		stream  int64
		wantErr bool
	}{{1000, false}, {1001, true}} {
		l := &limitReader{r: io.LimitReader(zeroReader{}, tt.stream), lim: Limits{MaxBytes: 1000}, compressed: &compressed}
		n, err := io.Copy(io.Discard, l)
		if tt.wantErr != (err != nil) || n > 1000 {
			t.Errorf("stream of %d: copied %d, %v", tt.stream, n, err)
		}
		if _, ok := err.(*LimitError); tt.wantErr && !ok {
			t.Errorf("stream of %d: error %T, want *LimitError", tt.stream, err)
		}
		// Once tripped, it stays tripped.
		if tt.wantErr {
			if _, err := l.Read(make([]byte, 1)); err == nil {
				t.Error("read after the limit succeeded")
			}
		}
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestFormatBytes(t *testing.T) {
	got := []string{}
	for _, n := range []int64{0, 1023, 1024, 1536, 16 << 20, 16 << 30, 1<<40 + 1<<39} {
		got = append(got, formatBytes(n))
	}
	want := []string{"0 B", "1023 B", "1 KiB", "1.5 KiB", "16 MiB", "16 GiB", "1.5 TiB"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("formatBytes = %q, want %q", got, want)
	}
}
