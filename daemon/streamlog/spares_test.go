package streamlog

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// inode is the inode number of the file behind f.
func inode(t *testing.T, f *os.File) uint64 {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// newestInode is the inode of the segment l writes now.
func newestInode(t *testing.T, l *Log) uint64 {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	return inode(t, l.segs[len(l.segs)-1].f)
}

// A stream over its disk limit drops its oldest segments as it goes, and
// with Spares its new segments write over their files: a handful of files
// for dozens of segments, and a replay from the first frame kept is exact,
// although each file still holds an older segment's records past what the
// new one wrote.
func TestSparesWrittenOverByTheNextSegments(t *testing.T) {
	spares := NewSpares(4, time.Minute)
	defer spares.Close()
	l := New(Options{MemLimit: 16 << 10, SpillDir: t.TempDir(), SegmentSize: 64 << 10, DiskLimit: 192 << 10, Spares: spares})
	defer l.Close()
	files := map[uint64]bool{}
	segments := map[int64]bool{}
	for range 3000 {
		appendN(t, l, 1, 1000)
		l.mu.Lock()
		if n := len(l.segs); n > 0 {
			segments[l.segs[n-1].first] = true
		}
		l.mu.Unlock()
		if len(segments) > 0 {
			files[newestInode(t, l)] = true
		}
	}
	appendExit(t, l, 0)
	if len(segments) < 40 || len(files) > 6 {
		t.Fatalf("%d segments in %d files; want dozens in at most 6", len(segments), len(files))
	}
	st := l.Stats()
	all := readAll(t, l.NewCursor(0), 64<<10) // checks every frame's data
	if all[0].Seq != st.FirstSeq || len(all) != int(st.LastSeq-st.FirstSeq+1) {
		t.Fatalf("replay from %d, %d frames; stats %+v", all[0].Seq, len(all), st)
	}
	for _, f := range all[:len(all)-1] {
		if len(f.Data) != 1000 {
			t.Fatalf("frame %d: %d bytes, want 1000", f.Seq, len(f.Data))
		}
	}
}

// The reclaim across processes: an exited process's oldest segment,
// dropped to make room (DropSpill), is the file the next segment of
// another log writes over; both replay exactly. A log that is closed
// closes its files instead, since a reader may be in one.
func TestSparesPassFromOneLogToAnother(t *testing.T) {
	dir := t.TempDir()
	spares := NewSpares(4, time.Minute)
	defer spares.Close()
	exited := New(Options{MemLimit: 16 << 10, SpillDir: dir, SegmentSize: 64 << 10, Spares: spares})
	appendN(t, exited, 300, 1000)
	appendExit(t, exited, 0)
	exited.mu.Lock()
	dropped := inode(t, exited.segs[0].f)
	exited.mu.Unlock()
	if freed := exited.DropSpill(1); freed <= 0 || spares.held() != 1 {
		t.Fatalf("freed %d, %d spares; want one segment freed and kept", freed, spares.held())
	}
	if fs := readAll(t, exited.NewCursor(0), 64<<10); fs[0].Seq != exited.Stats().FirstSeq || fs[0].Seq == 1 {
		t.Fatalf("replay after the drop starts at %d, FirstSeq %d", fs[0].Seq, exited.Stats().FirstSeq)
	}

	running := New(Options{MemLimit: 16 << 10, SpillDir: dir, SegmentSize: 64 << 10, Spares: spares})
	appendN(t, running, 40, 700) // 28 KB: past the memory window, into a first segment
	if got := newestInode(t, running); got != dropped || spares.held() != 0 {
		t.Fatalf("the new segment is inode %d, the dropped one %d; %d spares left", got, dropped, spares.held())
	}
	appendExit(t, running, 0)
	// Exactly its own frames: none of the old segment's records past what
	// this one wrote (1000 bytes each) is read as one of its frames.
	fs := readAll(t, running.NewCursor(0), 64<<10)
	if len(fs) != 41 {
		t.Fatalf("replay of the running log: %d frames, want 41", len(fs))
	}
	for _, f := range fs[:40] {
		if len(f.Data) != 700 {
			t.Fatalf("frame %d: %d bytes, want 700", f.Seq, len(f.Data))
		}
	}

	running.Close()
	exited.Close()
	if spares.held() != 0 {
		t.Fatalf("closed logs left %d files in the spares", spares.held())
	}
}

// Spares keep at most max files, close each after idle, and close what
// they hold, and anything put later, once closed.
func TestSparesBounded(t *testing.T) {
	open := func() (*os.File, *os.File) {
		w, err := os.CreateTemp(t.TempDir(), "w")
		if err != nil {
			t.Fatal(err)
		}
		r, err := os.Open(w.Name())
		if err != nil {
			t.Fatal(err)
		}
		return w, r
	}
	closed := func(f *os.File) bool { _, err := f.Stat(); return err != nil }

	sp := NewSpares(2, 100*time.Millisecond)
	var ws, rs []*os.File
	for range 3 {
		w, r := open()
		ws, rs = append(ws, w), append(rs, r)
		sp.put(w, r)
	}
	if sp.held() != 2 || closed(ws[0]) || closed(ws[1]) || !closed(ws[2]) || !closed(rs[2]) {
		t.Fatalf("%d kept; closed: %v %v %v", sp.held(), closed(ws[0]), closed(ws[1]), closed(ws[2]))
	}
	if w, _, ok := sp.take(); !ok || w != ws[1] {
		t.Fatal("take did not give the file put last")
	}
	deadline := time.Now().Add(5 * time.Second)
	for sp.held() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if sp.held() != 0 || !closed(ws[0]) || !closed(rs[0]) || closed(ws[1]) {
		t.Fatalf("after idle: %d kept, the idle one closed %v, the taken one closed %v", sp.held(), closed(ws[0]), closed(ws[1]))
	}

	w, r := open()
	sp.put(w, r)
	sp.Close()
	if sp.held() != 0 || !closed(w) || !closed(r) {
		t.Fatal("Close left a file open")
	}
	w, r = open()
	sp.put(w, r)
	if !closed(w) || !closed(r) {
		t.Fatal("a file put after Close stayed open")
	}
	var none *Spares
	w, r = open()
	none.put(w, r)
	if _, _, ok := none.take(); ok || !closed(w) || none.held() != 0 {
		t.Fatal("nil Spares kept a file")
	}
}
