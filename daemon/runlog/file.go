package runlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed5ad92d46/sous/internal/eintr"
)

// ErrBusy says another process (the run's runner) holds the journal.
var ErrBusy = errors.New("its runner is still alive (it holds the journal's lock)")

// ErrNoRun says the directory has no journal of that run.
var ErrNoRun = errors.New("no journal of that run")

// validRunID says whether run may be a run id, which names a file: 1 to
// 64 of A-Z, a-z, 0-9, "_" and "-". (A function, not a regexp: the
// regexp's 64-fold repetition compiled at every sous start cost 0.3 ms.)
func validRunID(run string) bool {
	if len(run) == 0 || len(run) > 64 {
		return false
	}
	for _, c := range []byte(run) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Path is the file of run's journal in dir.
func Path(dir, run string) string { return filepath.Join(dir, run+".journal") }

// Writer appends to one run's journal. It holds an exclusive flock on the
// file for as long as it is open: the lock says the runner is alive, and
// the kernel releases it however the runner ends.
type Writer struct {
	f       *os.File
	win     window // where appends go (window.go)
	buf     []byte
	encoded []json.RawMessage // AppendAll's records, reused: it runs per record of a run
	// CrashAfter, when > 0, kills the process with SIGKILL right after
	// the CrashAfter-th record this Writer appends: a crash at a chosen
	// point, for tests (sous reads it from SOUS_FAULT_JOURNAL). Torn
	// makes that last record half written.
	CrashAfter int
	Torn       bool
	appended   int
	closed     bool

	// dirty says something was written since the last fsync; the
	// background syncer (SyncEvery) fsyncs only then.
	dirty    atomic.Bool
	stopSync chan struct{}
	synced   chan struct{}
}

// Create starts the journal of a new run in dir with its KindRun record,
// synced together with the directory entry.
func Create(dir string, head Record) (*Writer, error) {
	if !validRunID(head.Run) {
		return nil, fmt.Errorf("journal: bad run id %q", head.Run)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	f, err := os.OpenFile(Path(dir, head.Run), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	w := &Writer{f: f, win: window{f: f, end: int64(len(magic))}}
	if err := w.lock(); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Write([]byte(magic)); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := w.Append(head); err != nil {
		f.Close()
		return nil, err
	}
	if err := w.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Open takes over the journal of run in dir to continue it: it locks the
// file (ErrBusy when its runner still holds it), reads its records, cuts
// a torn last record off, and appends after the last good one.
func Open(dir, run string) (*Writer, []Record, error) {
	if !validRunID(run) {
		return nil, nil, fmt.Errorf("bad run id %q", run)
	}
	f, err := os.OpenFile(Path(dir, run), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, ErrNoRun
	}
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	w := &Writer{f: f, win: window{f: f}}
	if err := w.lock(); err != nil {
		f.Close()
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	recs, good, err := Decode(data)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	// What follows the records is cut off when it is a torn record; the
	// zeros a writer made ahead of its records (window.go) are left: a
	// resume that stops before it appends leaves the file as it was, and
	// the next append stores into them.
	if good < len(data) && !allZeros(data[good:]) {
		if err := f.Truncate(int64(good)); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("journal: dropping a torn record: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("journal: %w", err)
		}
	}
	w.win.end = int64(good)
	return w, recs, nil
}

// allZeros reports whether b holds nothing but zero bytes.
func allZeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Decode reads a journal file's bytes: its records, and how many bytes
// of data they span (less than len(data) when the last record is torn).
// A file that does not start with the magic, or an intact frame that is
// not a record, is an error: that is not a tear but another file.
func Decode(data []byte) (recs []Record, good int, err error) {
	if len(data) < len(magic) {
		if bytes.HasPrefix([]byte(magic), data) {
			return nil, 0, errors.New("journal: empty (its run never started)")
		}
		return nil, 0, errors.New("journal: not a sous journal")
	}
	if string(data[:len(magic)]) != magic {
		return nil, 0, errors.New("journal: not a sous journal")
	}
	payloads, n := splitFrames(data[len(magic):])
	for i, p := range payloads {
		var r Record
		if err := json.Unmarshal(p, &r); err != nil {
			return nil, 0, fmt.Errorf("journal: record %d: %w", i+1, err)
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 || recs[0].Kind != KindRun {
		return nil, 0, errors.New("journal: no run record (its run never started)")
	}
	return recs, len(magic) + n, nil
}

func (w *Writer) lock() error {
	err := syscall.Flock(int(w.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrBusy
	}
	if err != nil {
		return fmt.Errorf("journal: lock: %w", err)
	}
	return nil
}

// Append writes r at the end of the journal. It reaches the kernel (a
// runner killed after it returns loses nothing) but not necessarily the
// disk: Sync does that.
func (w *Writer) Append(r Record) error { return w.AppendAll([]Record{r}) }

// AppendAll writes recs at the end of the journal in one store (or one
// write(2): window.go), as Append does one.
func (w *Writer) AppendAll(recs []Record) error {
	w.encoded = w.encoded[:0]
	for _, r := range recs {
		p, err := r.AppendJSON(nil)
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		w.encoded = append(w.encoded, p)
	}
	err := w.AppendEncoded(w.encoded)
	clear(w.encoded) // a large record is not kept alive until the next one
	return err
}

// AppendEncoded is AppendAll of records encoded already (each a JSON
// object, as json.Marshal of a Record makes it): the daemon writes a
// runner's records as they came.
func (w *Writer) AppendEncoded(payloads []json.RawMessage) error {
	w.buf = w.buf[:0]
	crash := false
	for _, p := range payloads {
		if len(p) > MaxRecord {
			return errTooLarge
		}
		start := len(w.buf)
		w.buf = appendFrame(w.buf, p)
		w.appended++
		if w.CrashAfter > 0 && w.appended == w.CrashAfter {
			crash = true
			if w.Torn {
				w.buf = w.buf[:start+(len(w.buf)-start)/2]
			}
			break
		}
	}
	if err := w.win.put(w.buf); err != nil {
		return err
	}
	w.dirty.Store(true)
	if crash {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not handled: nothing after this runs
	}
	return nil
}

// SyncEvery fsyncs the journal in the background, at most every d, when
// something was written since the last fsync: group commit. Close stops
// it (and syncs). Call it once, before appending from other goroutines.
func (w *Writer) SyncEvery(d time.Duration) {
	w.stopSync, w.synced = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.synced)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-w.stopSync:
				return
			case <-t.C:
				if w.dirty.Swap(false) {
					_ = w.datasync() // an error shows at the next Sync or Close
				}
			}
		}
	}()
}

// Sync makes what was appended durable.
func (w *Writer) Sync() error {
	w.dirty.Store(false)
	if err := w.datasync(); err != nil {
		return fmt.Errorf("journal: sync: %w", err)
	}
	return nil
}

// datasync makes the records durable with fdatasync(2): what fsync(2)
// adds is the file's times, which a resume never reads, and on ext4
// each fsync of a file whose times changed commits the filesystem's
// journal. The records' bytes, and the file's size when it changed,
// fdatasync does write.
func (w *Writer) datasync() error {
	return eintr.Retry(func() error { return syscall.Fdatasync(int(w.f.Fd())) })
}

// Close syncs and closes the journal, which releases its lock. Closing
// it again does nothing.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.stopSync != nil {
		close(w.stopSync)
		<-w.synced
	}
	err := w.win.close()
	if serr := w.Sync(); err == nil {
		err = serr
	}
	// Unlock before closing: a flock belongs to the open file description,
	// and a child forked meanwhile (its exec not yet done) shares it, so a
	// close alone left the run locked until that child's exec, and the
	// daemon's next run.open of the run said busy.
	if uerr := syscall.Flock(int(w.f.Fd()), syscall.LOCK_UN); err == nil && uerr != nil {
		err = fmt.Errorf("journal: unlock: %w", uerr)
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("journal: %w", cerr)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("journal: sync %s: %w", dir, err)
	}
	return nil
}
