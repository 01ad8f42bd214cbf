package fileops

import (
	"archive/tar"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// withUmask runs the test under umask m (the package's tests do not run in
// parallel, so no other test creates files meanwhile).
func withUmask(t *testing.T, m int) {
	old := syscall.Umask(m)
	t.Cleanup(func() { syscall.Umask(old) })
}

func moded(name string, flag byte, mode int64, body string) entry {
	return entry{hdr: &tar.Header{Name: name, Typeflag: flag, Mode: mode, Size: int64(len(body))}, body: body}
}

// modesArchive is an archive whose entries carry every kind of mode bit.
func modesArchive(t *testing.T) []byte {
	return tarGz(t,
		moded("./", tar.TypeDir, 0o750, ""),
		moded("bin/", tar.TypeDir, 0o755, ""),
		moded("bin/run", tar.TypeReg, 0o755, "#!/bin/sh\necho ran\n"),
		moded("bin/setuid", tar.TypeReg, 0o4755, "s"),
		moded("bin/setgid", tar.TypeReg, 0o2755, "g"),
		moded("share/doc/README", tar.TypeReg, 0o644, "doc"), // implicit parents
		moded("share/world-writable", tar.TypeReg, 0o666, "w"),
		moded("readonly", tar.TypeReg, 0o444, "r"),
		moded("private", tar.TypeReg, 0o600, "p"),
		moded("sticky/", tar.TypeDir, 0o1777, ""),
		moded("ro/", tar.TypeDir, 0o555, ""),
		moded("ro/file", tar.TypeReg, 0o644, "inside a read-only directory"),
		moded("late/x", tar.TypeReg, 0o644, "x"), // late/ exists before its own entry
		moded("late/", tar.TypeDir, 0o751, ""),
	)
}

func TestExtractTarArchiveModes(t *testing.T) {
	tests := []struct {
		umask int
		want  map[string]string
	}{
		{0o022, map[string]string{
			"bin": "d755", "bin/run": "f755", "bin/setuid": "f755", "bin/setgid": "f755",
			"share": "d755", "share/doc": "d755", "share/doc/README": "f644", "share/world-writable": "f644",
			"readonly": "f444", "private": "f600", "sticky": "d755", "ro": "d755", "ro/file": "f644",
			"late": "d751", "late/x": "f644", ".synced": "f600", ".": "d750",
		}},
		// The umask takes what it takes, from the entries the kernel
		// creates and from the directories chmod'ed after (".", late).
		{0o077, map[string]string{
			"bin": "d700", "bin/run": "f700", "bin/setuid": "f700", "bin/setgid": "f700",
			"share": "d700", "share/doc": "d700", "share/doc/README": "f600", "share/world-writable": "f600",
			"readonly": "f400", "private": "f600", "sticky": "d700", "ro": "d700", "ro/file": "f600",
			"late": "d700", "late/x": "f600", ".synced": "f600", ".": "d700",
		}},
		// Others never get write, even with a umask that would allow it.
		{0, map[string]string{
			"bin": "d755", "bin/run": "f755", "bin/setuid": "f755", "bin/setgid": "f755",
			"share": "d775", "share/doc": "d775", "share/doc/README": "f644", "share/world-writable": "f664",
			"readonly": "f444", "private": "f600", "sticky": "d775", "ro": "d755", "ro/file": "f644",
			"late": "d751", "late/x": "f644", ".synced": "f600", ".": "d750",
		}},
	}
	archive := modesArchive(t)
	for _, tt := range tests {
		for _, o := range allOptions {
			t.Run(o.name+"/umask="+itoa8(tt.umask), func(t *testing.T) {
				withUmask(t, tt.umask)
				s := newSandbox(t)
				ap := writeArchive(t, s.root, archive)
				res, err := extractTar(ap, s.dest, Options{ArchiveModes: true}, o.opt)
				if err != nil || !res.Success || *res.FileCount != 9 {
					t.Fatalf("extract = %+v, %v", res, err)
				}
				if got := modes(t, s.dest); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("modes = %v\nwant    %v", got, tt.want)
				}
			})
		}
	}
}

// The binary an archive marks executable runs once extracted.
func TestExtractTarArchiveModesExecutable(t *testing.T) {
	s := newSandbox(t)
	ap := writeArchive(t, s.root, modesArchive(t))
	if res, err := Extract(ap, s.dest, Options{ArchiveModes: true}); err != nil || !res.Success {
		t.Fatalf("extract = %+v, %v", res, err)
	}
	out, err := exec.Command(filepath.Join(s.dest, "bin", "run")).Output()
	if err != nil || string(out) != "ran\n" {
		t.Fatalf("bin/run = %q, %v", out, err)
	}
}

// A tree extracted with the archive's modes, read-only directories
// included, is wiped by the next extraction as the contract says.
func TestExtractTarArchiveModesRewipe(t *testing.T) {
	for _, o := range allOptions {
		t.Run(o.name, func(t *testing.T) {
			s := newSandbox(t)
			for range 2 {
				ap := writeArchive(t, s.root, modesArchive(t))
				if res, err := extractTar(ap, s.dest, Options{ArchiveModes: true}, o.opt); err != nil || !res.Success {
					t.Fatalf("extract = %+v, %v", res, err)
				}
			}
			ap := writeArchive(t, s.root, tarGz(t, file("only", "1")))
			if res, err := extractTar(ap, s.dest, Options{}, o.opt); err != nil || !res.Success {
				t.Fatalf("extract = %+v, %v", res, err)
			}
			if got := tree(t, s.dest); !reflect.DeepEqual(got, map[string]string{"only": "f600:1", ".synced": "f600:"}) {
				t.Errorf("tree = %v", got)
			}
		})
	}
}

func TestExtractTarKeepArchive(t *testing.T) {
	s := newSandbox(t)
	ap := writeArchive(t, s.root, tarGz(t, file("a", "1")))
	res, err := Extract(ap, s.dest, Options{KeepArchive: true})
	if err != nil || !res.Success {
		t.Fatalf("extract = %+v, %v", res, err)
	}
	if !exists(ap) {
		t.Error("archive consumed with KeepArchive")
	}
	// Kept on failure too.
	if err := os.WriteFile(ap, []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, _ := Extract(ap, s.dest, Options{KeepArchive: true}); res.Success || !exists(ap) {
		t.Errorf("extract = %+v, archive kept: %v", res, exists(ap))
	}
}

// modes maps every path under root (and "." for root) to "d755" or "f644".
func modes(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p, d := range tree(t, root) {
		out[p], _, _ = strings.Cut(d, ":")
	}
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	out["."] = "d" + itoa8(int(fi.Mode().Perm()))
	return out
}

func itoa8(m int) string {
	s := ""
	for ; m > 0; m /= 8 {
		s = string(rune('0'+m%8)) + s
	}
	if len(s) < 3 {
		s = strings.Repeat("0", 3-len(s)) + s
	}
	return s
}
