package fileops

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// A process that can write into destDir while it is extracted (a build
// step, an agent) swaps the directories the extraction creates for
// symlinks to somewhere else, racing it. Whatever the result, nothing may
// land outside destDir: every entry is created relative to destDir's
// descriptor and no symlink is followed (tree.go).
//
// Before the fix, which created files by path, nearly every iteration wrote
// into the symlinks' target.
func TestExtractTarSymlinkSwapRace(t *testing.T) {
	const dirs, filesPerDir = 150, 20
	var entries []entry
	body := strings.Repeat("x", 700)
	for d := range dirs {
		entries = append(entries, dir(fmt.Sprintf("d%03d/", d)))
		for f := range filesPerDir {
			entries = append(entries, file(fmt.Sprintf("d%03d/sub/f%02d", d, f), body))
		}
	}
	archive := tarGz(t, entries...)
	iterations := 12
	if testing.Short() {
		iterations = 3
	}
	for _, o := range allOptions {
		t.Run(o.name, func(t *testing.T) {
			swaps := 0
			for i := range iterations {
				swaps += swapRace(t, archive, o.opt, dirs)
				if t.Failed() {
					t.Fatalf("iteration %d wrote outside destDir", i)
				}
			}
			if swaps == 0 {
				t.Fatal("the swapper never replaced a directory: the test proved nothing")
			}
		})
	}
}

// swapRace extracts archive once while a goroutine replaces each dNNN
// directory the extraction makes (and the sub directory inside it) with a
// symlink to a directory outside destDir. It returns how many swaps were
// made.
func swapRace(t *testing.T, archive []byte, opt extractOptions, dirs int) int {
	s := newSandbox(t)
	outside := filepath.Join(s.root, "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	ap := writeArchive(t, s.root, archive)
	moved := filepath.Join(s.dest, "moved")

	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; !stop.Load(); n++ {
			// Made again on every pass: destDir is wiped when the
			// extraction starts.
			os.Mkdir(moved, 0o700)
			for d := range dirs {
				for _, p := range []string{fmt.Sprintf("d%03d/sub", d), fmt.Sprintf("d%03d", d)} {
					target := filepath.Join(s.dest, p)
					// Only real directories: a symlink already there stays.
					if fi, err := os.Lstat(target); err != nil || !fi.IsDir() {
						continue
					}
					if os.Rename(target, filepath.Join(moved, fmt.Sprintf("%d-%d", n, d))) != nil {
						continue
					}
					if os.Symlink(outside, target) == nil {
						swaps.Add(1)
					}
				}
			}
		}
	}()
	res, err := extractTar(ap, s.dest, Options{}, opt)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.FileCount == nil || (!res.Success && res.Error == "") {
		t.Fatalf("malformed result %+v", res)
	}
	if got := tree(t, outside); len(got) != 0 {
		t.Errorf("written outside destDir through a swapped-in symlink (result %+v): %d entries, e.g. %v",
			res, len(got), firstKeys(got, 3))
	}
	if out := s.outside(t); len(out) != 1 || out[0] != "outside" {
		t.Errorf("sandbox outside destDir holds %v, want only the empty outside", out)
	}
	return int(swaps.Load())
}

func firstKeys(m map[string]string, n int) []string {
	var out []string
	for k := range m {
		if len(out) == n {
			break
		}
		out = append(out, k)
	}
	return out
}
