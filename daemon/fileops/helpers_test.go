package fileops

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// entry is one member of a test archive: a header and body written by
// archive/tar, or raw blocks for what tar.Writer refuses to write.
type entry struct {
	hdr  *tar.Header
	body string
	raw  []byte
}

func file(name, body string) entry {
	// Mode 0755 on purpose: extraction must ignore it.
	return entry{hdr: &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(body))}, body: body}
}

func dir(name string) entry {
	return entry{hdr: &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
}

func special(name string, flag byte) entry {
	h := &tar.Header{Name: name, Typeflag: flag, Mode: 0o644}
	switch flag {
	case tar.TypeSymlink, tar.TypeLink:
		h.Linkname = "/etc/passwd"
	case tar.TypeChar, tar.TypeBlock:
		h.Devmajor, h.Devminor = 1, 3
	}
	return entry{hdr: h}
}

// rawEntry is one entry whose typeflag is forced after archive/tar wrote it,
// with the header checksum recomputed.
func rawEntry(t testing.TB, name string, flag byte, format tar.Format, data []byte) entry {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	if err := w.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), Format: format}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	raw := b.Bytes()
	raw[156] = flag
	copy(raw[148:156], "        ")
	sum := 0
	for _, c := range raw[:512] {
		sum += int(c)
	}
	copy(raw[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return entry{raw: raw}
}

// paxSparse is a PAX 1.0 GNU sparse file claiming a 100 MB size made of holes.
func paxSparse(t testing.TB, name string) []entry {
	rec := func(k, v string) string {
		s := " " + k + "=" + v + "\n"
		for n := len(s); ; {
			full := strconv.Itoa(n) + s
			if len(full) == n {
				return full
			}
			n = len(full)
		}
	}
	recs := rec("GNU.sparse.major", "1") + rec("GNU.sparse.minor", "0") +
		rec("GNU.sparse.name", name) + rec("GNU.sparse.realsize", "100000000")
	sparseMap := make([]byte, 512)
	copy(sparseMap, "1\n100000000\n0\n") // one empty data region at the end: all hole
	return []entry{
		rawEntry(t, "PaxHeaders/"+name, tar.TypeXHeader, tar.FormatUSTAR, []byte(recs)),
		{hdr: &tar.Header{Name: "GNUSparseFile.0/" + name, Typeflag: tar.TypeReg, Size: 512, Format: tar.FormatUSTAR}, body: string(sparseMap)},
	}
}

// tarBytes builds an uncompressed tar stream.
func tarBytes(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, e := range entries {
		if e.raw != nil {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			b.Write(e.raw)
			continue
		}
		if err := w.WriteHeader(e.hdr); err != nil {
			t.Fatalf("header %q: %v", e.hdr.Name, err)
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gz(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writeArchive writes data as dir/archive.tgz and returns its path.
func writeArchive(t testing.TB, dir string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, "archive.tgz")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func tarGz(t testing.TB, entries ...entry) []byte { return gz(t, tarBytes(t, entries...)) }

// tree lists every path under root (relative, "/"-separated) with a short
// description: "d700", "f600:<content>" or "l" for a symlink.
func tree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			out[rel] = "l"
		case d.IsDir():
			out[rel] = fmt.Sprintf("d%o", info.Mode().Perm())
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("f%o:%s", info.Mode().Perm(), data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// leftovers lists the hidden ".<name>.old-*" siblings ExtractTar may create.
func leftovers(t testing.TB, parent string) []string {
	t.Helper()
	des, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if strings.Contains(de.Name(), ".old-") {
			out = append(out, de.Name())
		}
	}
	return out
}

// mustWriteTB writes a 0644 file, creating its parents.
func mustWriteTB(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
