package runlog

import (
	"os/exec"
	"testing"
)

// TestJournalCloseReleasesTheLockAtOnce: a child that holds a copy of the
// journal's descriptor (one forked while the daemon had it open, still
// before its exec) must not keep the run locked once the Writer closed:
// the next run.open on the daemon came back busy (a flake of
// TestRunJournalTornTailOnTheDaemon, whose parallel tests spawn children).
// Here the copy is passed on purpose and outlives the exec.
func TestJournalCloseReleasesTheLockAtOnce(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, sample()[0])
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "30")
	child.ExtraFiles = append(child.ExtraFiles, w.f)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2, recs, err := Open(dir, sample()[0].Run)
	if err != nil {
		t.Fatalf("open after close, with the descriptor still held by a child: %v", err)
	}
	defer w2.Close()
	if len(recs) != 1 {
		t.Errorf("records: %d, want 1", len(recs))
	}
}
