package fileops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every way the tree creates something refuses a symlink that is already
// in place, as the intermediate directory or as the entry itself, in both
// resolutions (openat2, and the walk used without it). The race test
// swaps symlinks in at random; this puts one in every position.
func TestTreeRefusesSymlinks(t *testing.T) {
	for _, walk := range []bool{false, true} {
		for _, archive := range []bool{false, true} {
			name := map[bool]string{false: "openat2", true: "walk"}[walk] + map[bool]string{false: "", true: "/archive"}[archive]
			t.Run(name, func(t *testing.T) {
				root := t.TempDir()
				outside := filepath.Join(root, "outside")
				mustWriteTB(t, filepath.Join(outside, "file"), "precious")
				before, err := os.Stat(outside)
				if err != nil {
					t.Fatal(err)
				}
				dest := filepath.Join(root, "dest")
				tr, err := openTree(dest, archive, walk)
				if err != nil {
					t.Fatal(err)
				}
				defer tr.close()
				for _, l := range []string{"dirlink", "filelink"} {
					target := outside
					if l == "filelink" {
						target = filepath.Join(outside, "file")
					}
					if err := os.Symlink(target, filepath.Join(dest, l)); err != nil {
						t.Fatal(err)
					}
				}
				steps := []struct {
					what string
					do   func() error
				}{
					{"create through a symlinked directory", func() error {
						fd, err := tr.create("dirlink/new", 0o600)
						if err == nil {
							closeFD(fd)
						}
						return err
					}},
					{"create deeper through it", func() error {
						fd, err := tr.create("dirlink/a/b/new", 0o600)
						if err == nil {
							closeFD(fd)
						}
						return err
					}},
					{"create over a symlink", func() error {
						fd, err := tr.create("filelink", 0o600)
						if err == nil {
							closeFD(fd)
						}
						return err
					}},
					{"mkdir through a symlinked directory", func() error { return tr.mkdir("dirlink/d", 0o700) }},
					{"mkdir over a symlink", func() error { return tr.mkdir("dirlink", 0o755) }},
					{"mkdirAll through it", func() error { return tr.mkdirAll("dirlink/x/y") }},
				}
				for _, s := range steps {
					if err := s.do(); err == nil {
						t.Errorf("%s: succeeded", s.what)
					}
				}
				if got := tree(t, outside); len(got) != 1 || !strings.HasSuffix(got["file"], ":precious") {
					t.Errorf("outside changed: %v", got)
				}
				if fi, err := os.Stat(outside); err != nil || fi.Mode() != before.Mode() {
					t.Errorf("outside's mode changed: %v, %v; was %v", fi, err, before.Mode())
				}
			})
		}
	}
}

func closeFD(fd int) { os.NewFile(uintptr(fd), "").Close() }
