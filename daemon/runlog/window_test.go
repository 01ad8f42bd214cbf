package runlog

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// windowRecords is a run whose records cross several windows, with one
// record too large for a window (written by pwrite(2)) among them.
func windowRecords() []Record {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	recs := []Record{{Kind: KindRun, Run: "win", Recipe: "/r/x.star", At: at}}
	for i := 1; len(recs) < 3000; i++ {
		recs = append(recs, Record{Kind: KindCall, Seq: i, Fn: "run", Line: i, Show: strconv.Quote(strings.Repeat("x", i%300)), Call: CallEffect, At: at})
		v := `{"t":"str","v":"ok"}`
		if i == 700 {
			v = `{"t":"str","v":"` + strings.Repeat("y", 3*windowSize) + `"}`
		}
		recs = append(recs, Record{Kind: KindAnswer, Seq: i, Value: json.RawMessage(v)})
	}
	return recs
}

// closeAndDecode closes w, the writer of run "win" in dir, and reads the
// file back: its records, and how many bytes follow them.
func closeAndDecode(t *testing.T, w *Writer, dir string) ([]Record, int, error) {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(Path(dir, "win"))
	if err != nil {
		t.Fatal(err)
	}
	recs, good, err := Decode(data)
	return recs, len(data) - good, err
}

// TestWindowWriterKilled runs a writer in a child process that SIGKILLs
// itself right after its last append (CrashAfter), so that nothing of
// Close ran: the file keeps its zeros beyond the records. Every record
// appended reads back, and appending after Open reads back too. Torn:
// the last record is half stored, and dropped.
func TestWindowWriterKilled(t *testing.T) {
	if dir := os.Getenv("RUNLOG_WINDOW_CHILD"); dir != "" {
		recs := windowRecords()
		w, err := Create(dir, recs[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		w.CrashAfter, w.Torn = len(recs), os.Getenv("RUNLOG_WINDOW_TORN") != ""
		for _, r := range recs[1:] {
			if err := w.Append(r); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
		}
		os.Exit(4) // not reached: the last Append kills the process
	}
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestWindowWriterKilled$")
			cmd.Env = append(os.Environ(), "RUNLOG_WINDOW_CHILD="+dir)
			if torn {
				cmd.Env = append(cmd.Env, "RUNLOG_WINDOW_TORN=1")
			}
			out, err := cmd.CombinedOutput()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the writer was not killed: %v\n%s", err, out)
			}
			want := windowRecords()
			if torn {
				want = want[:len(want)-1]
			}
			st, err := os.Stat(Path(dir, "win"))
			if err != nil {
				t.Fatal(err)
			}
			w, got, err := Open(dir, "win")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read back %d records, want %d", len(got), len(want))
			}
			// Open cuts a torn record off, and leaves the zeros after
			// whole ones: a resume that stops there changes nothing.
			after, _ := w.f.Stat()
			if torn && after.Size() >= st.Size() {
				t.Fatalf("Open left the file at %d bytes of %d: the torn record stays", after.Size(), st.Size())
			}
			if !torn && after.Size() != st.Size() {
				t.Fatalf("Open changed the file from %d to %d bytes", st.Size(), after.Size())
			}
			end := Record{Kind: KindEnd, Status: "ok"}
			if err := w.Append(end); err != nil {
				t.Fatal(err)
			}
			again, beyond, err := closeAndDecode(t, w, dir)
			if err != nil || !reflect.DeepEqual(again, append(want, end)) {
				t.Fatalf("after the append: %v, %d records", err, len(again))
			}
			if beyond != 0 {
				t.Fatalf("Close left %d bytes beyond the records", beyond)
			}
		})
	}
}

// TestJournalReadWhileWritten: a journal being written reads whole, its
// zeros ahead of the records and all, and List says it is running.
func TestJournalReadWhileWritten(t *testing.T) {
	dir := t.TempDir()
	recs := windowRecords()[:200]
	w, err := Create(dir, recs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.AppendAll(recs[1:]); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(Path(dir, "win"))
	if err != nil {
		t.Fatal(err)
	}
	got, good, err := Decode(data)
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("read %d records: %v", len(got), err)
	}
	if good == len(data) {
		t.Fatalf("no zeros ahead of the records (%d bytes): the window was not used", len(data))
	}
	list, err := List(dir)
	if err != nil || len(list) != 1 || list[0].State != StateRunning || list[0].Steps != 100 {
		t.Fatalf("List: %+v, %v", list, err)
	}
}

// TestWindowlessWriter is the writer on a filesystem that refuses
// fallocate or mmap: every append a pwrite(2), the same file.
func TestWindowlessWriter(t *testing.T) {
	dir := t.TempDir()
	recs := windowRecords()
	w, err := Create(dir, recs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Create stored the run's record through a window already: take it
	// away, with the zeros it made, as a filesystem that refuses mmap
	// would never have had them.
	if err := w.win.unmap(); err != nil {
		t.Fatal(err)
	}
	if err := w.f.Truncate(w.win.end); err != nil {
		t.Fatal(err)
	}
	w.win.noMap = true
	for _, r := range recs[1:] {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing was mapped, so nothing was made ahead of the records: the
	// file ends where they do while it is still open.
	if w.win.m != nil {
		t.Fatal("a window was mapped")
	}
	if st, err := w.f.Stat(); err != nil || st.Size() != w.win.end {
		t.Fatalf("the open file holds %d bytes, its records %d (%v)", st.Size(), w.win.end, err)
	}
	got, beyond, err := closeAndDecode(t, w, dir)
	if err != nil || !reflect.DeepEqual(got, recs) || beyond != 0 {
		t.Fatalf("read %d records, %d bytes beyond them: %v", len(got), beyond, err)
	}
}
