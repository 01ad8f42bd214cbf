package fileops

import (
	"archive/tar"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fuzzCanary is where absolute names in the seed archives point; it must never
// appear.
const fuzzCanary = "/tmp/fileops-fuzz-canary"

func fuzzSeeds(t testing.TB) [][]entry {
	return [][]entry{
		{dir("./"), file("a/b.txt", "hello"), dir("c/"), file("c/d", strings.Repeat("x", 3000))},
		{file("../../escape", "x")},
		{file("../../../../../../escape", "x")},
		{file(fuzzCanary+"/abs", "x")},
		{file("a/../../b", "x")},
		{file("a/../b", "x")},
		{file("../dest/in", "x")},
		{special("link", tar.TypeSymlink), file("link/x", "x")},
		{special("hard", tar.TypeLink)},
		{special("fifo", tar.TypeFifo)},
		{special("null", tar.TypeChar)},
		{file(strings.Repeat("n", 10<<10), "x")},
		{dir(".synced/")},
		{file("f", "1"), file("f", "2"), file("f/g", "3")},
		paxSparse(t, "sp"),
		{rawEntry(t, "old", tar.TypeGNUSparse, tar.FormatGNU, nil)},
		{{hdr: &tar.Header{Name: "pax_global_header", Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "c"}}}, file("g", "")},
	}
}

// FuzzExtractTar feeds arbitrary bytes as the gzip-compressed archive. Most
// mutations break the gzip stream, but entries are unpacked before the
// checksum at the end is checked, so the tar layer is exercised too.
func FuzzExtractTar(f *testing.F) {
	for _, entries := range fuzzSeeds(f) {
		f.Add(tarGz(f, entries...))
	}
	f.Add([]byte{})
	f.Add([]byte("\x1f\x8b\x08\x00garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkExtract(t, data)
	})
}

// FuzzExtractTarRaw feeds arbitrary bytes as the uncompressed tar stream, so
// that mutations reach tar headers instead of dying in the gzip layer.
func FuzzExtractTarRaw(f *testing.F) {
	for _, entries := range fuzzSeeds(f) {
		f.Add(tarBytes(f, entries...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkExtract(t, gz(t, data))
	})
}

// checkExtract extracts data into a deep sandbox and checks the invariants
// that hold for every input: the result is well formed, the archive is
// consumed, nothing exists outside destDir, and destDir holds only 0700
// directories and 0600 regular files. It does it again with the archive's
// modes and tight limits: then no entry has a bit outside 0775, every
// directory is rwx for its owner, and an archive past the limits leaves
// destDir empty.
func checkExtract(t *testing.T, data []byte) {
	base := t.TempDir()
	for i, o := range []Options{{}, {ArchiveModes: true, Limits: Limits{MaxBytes: 256 << 10, MaxRatio: 20}}} {
		root := filepath.Join(base, strconv.Itoa(i))
		if err := os.Mkdir(root, 0o700); err != nil {
			t.Fatal(err)
		}
		checkExtractWith(t, data, o, root)
		// Escapes deeper than the sandbox would land next to it.
		if des, err := os.ReadDir(base); err != nil || len(des) != i+1 {
			t.Fatalf("sandbox parent holds %v, %v", des, err)
		}
	}
}

func checkExtractWith(t *testing.T, data []byte, o Options, root string) {
	s := sandbox{root: root}
	s.dest = filepath.Join(s.root, "1", "2", "3", "4", "5", "6", "7", "dest")
	ap := writeArchive(t, s.root, data)
	res, err := Extract(ap, s.dest, o)
	if err != nil {
		t.Fatalf("ExtractTar error: %v", err)
	}
	if res.FileCount == nil || res.Success == (res.Error != "") || (!res.Success && *res.FileCount != 0) {
		t.Fatalf("malformed result %+v", res)
	}
	if exists(ap) {
		t.Fatal("archive not consumed")
	}
	if res.Success && !exists(filepath.Join(s.dest, markerName)) {
		t.Fatal("success without .synced")
	}
	if out := s.outside(t); len(out) != 0 {
		t.Fatalf("written outside destDir: %v", out)
	}
	if exists(fuzzCanary) {
		t.Fatalf("%s written", fuzzCanary)
	}
	if strings.HasPrefix(res.Error, "archive unpacks to more than") {
		if got := tree(t, s.dest); len(got) != 0 {
			t.Fatalf("a limit's failure left %v", short(got))
		}
	}
	err = filepath.WalkDir(s.dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		switch {
		case o.ArchiveModes && p == filepath.Join(s.dest, markerName) && perm == fileMode:
		case o.ArchiveModes && fi.IsDir() && perm&^archivePermMask == 0 && perm&0o700 == 0o700:
		case o.ArchiveModes && fi.Mode().IsRegular() && perm&^archivePermMask == 0:
		case !o.ArchiveModes && fi.IsDir() && perm == dirMode:
		case !o.ArchiveModes && fi.Mode().IsRegular() && perm == fileMode:
		default:
			t.Errorf("%s: mode %v", p, fi.Mode())
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}
