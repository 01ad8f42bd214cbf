package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// BenchmarkRecipeStart measures `sous run` of a one-line recipe (the built
// binary, from exec to exit) against `python3 -c pass` in the same run, and
// reports the ratio. The python3 is the quickest on the machine, as in the
// table of bench/ (testutil.FastestPython): PATH's may be a slow pyenv
// build, which would flatter sous. The recipe touches no process, so no
// daemon starts: this is the cost every recipe pays before its first line.
func BenchmarkRecipeStart(b *testing.B) {
	bin := sousBinary(b)
	dir := b.TempDir()
	star := filepath.Join(dir, "one.star")
	if err := os.WriteFile(star, []byte("x = 1\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	python := testutil.FastestPython(b)
	b.Run("sous-vs-python3", func(b *testing.B) {
		var sous, py time.Duration
		for b.Loop() {
			start := time.Now()
			if out, err := exec.Command(bin, "run", star).CombinedOutput(); err != nil {
				b.Fatalf("sous run: %v\n%s", err, out)
			}
			sous += time.Since(start)
			if python != "" {
				start = time.Now()
				if err := exec.Command(python, "-c", "pass").Run(); err != nil {
					b.Fatalf("python3: %v", err)
				}
				py += time.Since(start)
			}
		}
		b.ReportMetric(float64(sous.Nanoseconds())/float64(b.N), "sous-ns/run")
		if python == "" {
			b.Log("no python3 found: no comparison")
			return
		}
		b.ReportMetric(float64(py.Nanoseconds())/float64(b.N), "python3-ns/run")
		b.ReportMetric(float64(sous)/float64(py), "sous/python3")
	})
}

// BenchmarkJournalCost runs a recipe of 1,000 run("true") calls with and
// without --journal, alternating so that both see the same machine, and
// reports what the journal adds (journal/plain) and its size per call.
func BenchmarkJournalCost(b *testing.B) {
	bin := sousBinary(b)
	dir := b.TempDir()
	star := filepath.Join(dir, "many.star")
	if err := os.WriteFile(star, []byte("for i in range(1000):\n    run(\"true\", echo=False)\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	var plain, journaled time.Duration
	var size int64
	for b.Loop() {
		start := time.Now()
		if out, err := exec.Command(bin, "run", star).CombinedOutput(); err != nil {
			b.Fatalf("sous run: %v\n%s", err, out)
		}
		plain += time.Since(start)
		jdir := filepath.Join(dir, "j")
		os.RemoveAll(jdir)
		start = time.Now()
		if out, err := exec.Command(bin, "run", "--journal", jdir, star).CombinedOutput(); err != nil {
			b.Fatalf("sous run --journal: %v\n%s", err, out)
		}
		journaled += time.Since(start)
		files, _ := filepath.Glob(filepath.Join(jdir, "*.journal"))
		if len(files) == 1 {
			if st, err := os.Stat(files[0]); err == nil {
				size = st.Size()
			}
		}
	}
	b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N)/1000, "plain-ns/call")
	b.ReportMetric(float64(journaled.Nanoseconds())/float64(b.N)/1000, "journal-ns/call")
	b.ReportMetric(float64(journaled)/float64(plain), "journal/plain")
	b.ReportMetric(float64(size)/1000, "journal-bytes/call")
}
