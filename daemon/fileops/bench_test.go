package fileops

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkExtractTar compares ExtractTar with `tar xzf` on the same archive
// in the same loop and reports sous/tar, the ratio of their times (below 1 is
// faster than tar), plus each side's time per extraction.
//
//   - fresh: each extraction gets a new destDir, on both sides, and nothing
//     is deleted until the benchmark ends. On ext4 this matters more than
//     anything in user space: creating files soon after thousands were
//     deleted costs several times more kernel time.
//   - resync: destDir holds the previous extraction. ExtractTar wipes it as
//     the contract says; tar's side is timed as `rm -rf` plus `tar xzf`.
//
// The two sides alternate which goes first. The variants switch off one
// optimisation each: sequential (no file-creating workers), noReadahead,
// wipeInPlace, noOpenat2 (each entry's path walked one openat at a time, as
// on a kernel without openat2). SOUS_BENCH_GOSRC=1 adds Go's own src tree (about 11k files;
// building its archive takes a few seconds).
func BenchmarkExtractTar(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		b.Skip("no tar on PATH")
	}
	// One directory for every tree of every sub-benchmark: removing trees
	// between sub-benchmarks would slow down the next one.
	dir := b.TempDir()
	archives := []struct{ name, path string }{
		{"files=2", filepath.Join(dir, "tiny.tgz")}, // per-call overhead
		{"files=2000", filepath.Join(dir, "small.tgz")},
	}
	writeBenchArchive(b, archives[0].path, func(w *tar.Writer) error {
		for _, name := range []string{"a/b.txt", "c.txt"} {
			if err := w.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 5}); err != nil {
				return err
			}
			if _, err := io.WriteString(w, "hello"); err != nil {
				return err
			}
		}
		return nil
	})
	writeBenchArchive(b, archives[1].path, smallTree)
	if src := "/usr/local/go/src"; os.Getenv("SOUS_BENCH_GOSRC") != "" {
		if _, err := os.Stat(src); err == nil {
			p := filepath.Join(dir, "gosrc.tgz")
			writeBenchArchive(b, p, func(w *tar.Writer) error { return addTree(w, src) })
			archives = append(archives, struct{ name, path string }{"gosrc", p})
		}
	}
	variants := []struct {
		name   string
		resync bool
		opt    extractOptions
	}{
		{"fresh", false, extractOptions{}},
		{"fresh/sequential", false, extractOptions{workers: 1}},
		{"fresh/noReadahead", false, extractOptions{noReadahead: true}},
		{"fresh/noOpenat2", false, extractOptions{noOpenat2: true}},
		{"resync", true, extractOptions{}},
		{"resync/wipeInPlace", true, extractOptions{wipeInPlace: true}},
	}
	run := 0
	for _, a := range archives {
		for _, v := range variants {
			b.Run(a.name+"/"+v.name, func(b *testing.B) {
				run++
				benchAgainstTar(b, filepath.Join(dir, fmt.Sprint(run)), a.path, v.resync, v.opt)
			})
		}
	}
}

func benchAgainstTar(b *testing.B, dir, archive string, resync bool, opt extractOptions) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(archive)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	in := filepath.Join(dir, "in.tgz")
	ours := func(i int) time.Duration {
		dest := filepath.Join(dir, "sous")
		if !resync {
			dest += fmt.Sprint(i)
		}
		// A fresh link each time: ExtractTar consumes its archive.
		if err := os.Link(archive, in); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		res, err := extractTar(in, dest, Options{}, opt)
		d := time.Since(start)
		if err != nil || !res.Success {
			b.Fatalf("ExtractTar = %+v, %v", res, err)
		}
		return d
	}
	theirs := func(i int) time.Duration {
		dest := filepath.Join(dir, "tar")
		if !resync {
			dest += fmt.Sprint(i)
		}
		start := time.Now()
		if err := os.RemoveAll(dest); err != nil {
			b.Fatal(err)
		}
		if err := os.Mkdir(dest, 0o700); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command("tar", "xzf", archive, "-C", dest).CombinedOutput(); err != nil {
			b.Fatalf("tar: %v %s", err, out)
		}
		return time.Since(start)
	}
	var oursTime, tarTime time.Duration
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			oursTime += ours(i)
			tarTime += theirs(i)
		} else {
			tarTime += theirs(i)
			oursTime += ours(i)
		}
	}
	b.ReportMetric(float64(oursTime.Nanoseconds())/float64(b.N), "sous-ns/op")
	b.ReportMetric(float64(tarTime.Nanoseconds())/float64(b.N), "tar-ns/op")
	b.ReportMetric(float64(oursTime)/float64(tarTime), "sous/tar")
}

func writeBenchArchive(b *testing.B, path string, fill func(*tar.Writer) error) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	if err := fill(tw); err != nil {
		b.Fatal(err)
	}
	for _, c := range []io.Closer{tw, zw, f} {
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// smallTree is 2000 source-like files of 200 B to 6 KB in 100 directories:
// the shape of a repository checkout, where per-file cost dominates.
func smallTree(w *tar.Writer) error {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("func return if err != nil { } package import var const type struct for range string int byte error ctx := = ( ) , . // the a to of")
	var sb strings.Builder
	for d := range 100 {
		if err := w.WriteHeader(&tar.Header{Name: fmt.Sprintf("pkg%03d/", d), Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return err
		}
		for f := range 20 {
			sb.Reset()
			for size := 200 + rng.IntN(5800); sb.Len() < size; {
				sb.WriteString(words[rng.IntN(len(words))])
				if rng.IntN(8) == 0 {
					sb.WriteByte('\n')
				} else {
					sb.WriteByte(' ')
				}
			}
			body := sb.String()
			hdr := &tar.Header{Name: fmt.Sprintf("pkg%03d/file%02d.go", d, f), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}
			if err := w.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := io.WriteString(w, body); err != nil {
				return err
			}
		}
	}
	return nil
}

// addTree archives the directories and regular files under root as "src/…",
// skipping anything else (ExtractTar would refuse it).
func addTree(w *tar.Writer, root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(filepath.Dir(root), p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return w.WriteHeader(&tar.Header{Name: rel + "/", Typeflag: tar.TypeDir, Mode: 0o755})
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if err := w.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, Size: fi.Size()}); err != nil {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		}
		return nil
	})
}
