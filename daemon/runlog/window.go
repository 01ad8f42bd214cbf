package runlog

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// A journal is written through a shared mapping of the file, not with a
// write(2) per append. On ext4 every append by write(2) changes the
// file's size and times, which the filesystem logs, and a durable run
// pays it on the path of every effect: appends a millisecond apart took
// 7-10 µs that way against 3 µs through the mapping
// (BenchmarkAppendEncoded). A store into a shared mapping is in the page
// cache as soon as it is made, as a write(2) is: it survives the
// writer's SIGKILL the same way, and a sync makes it durable the same way.
//
// The writer maps a window of the file at the end of its records, which
// it made part of the file ahead of them by writing zeros there. So the
// blocks are the filesystem's before anything is stored: a store into a
// hole on a full disk would raise SIGBUS, where the write of zeros says
// ENOSPC. And they are written blocks, not fallocate(2)'s unwritten
// ones: the group commit's fdatasync(2) (file.go) then writes the pages
// the records changed and commits no metadata, where unwritten extents,
// or a size and times changed by every append, make each sync commit the
// filesystem's journal too. A zero length ends the records (frame.go).
// Close cuts the file back to its records; Open leaves the zeros that a
// writer killed before its Close left, and appends into them. A record
// too large for a window, and any append on a filesystem without shared
// mappings, is written with pwrite(2) at the records' end.

// windowSize is the length of the mapped window: about 600 records of a
// run("true"), so it moves rarely, and small enough that a daemon with
// many runs open keeps little of their journals mapped.
const windowSize = 256 << 10

// maxMapped is the largest frame stored through the window; larger ones
// are written with pwrite(2).
const maxMapped = windowSize / 4

// window is a Writer's view of its file's end.
type window struct {
	f     *os.File
	end   int64  // where the records end: the next frame goes here
	m     []byte // the mapping, of the file from at
	at    int64
	noMap bool   // the filesystem refused mmap: pwrite(2) only
	wrote bool   // something was appended: close cuts the file back to the records
	zeros []byte // what zero writes, kept for the next window
}

// put appends one or more whole frames at the end of the records.
func (w *window) put(b []byte) error {
	w.wrote = true
	if w.m != nil && w.end+int64(len(b)) <= w.at+int64(len(w.m)) {
		copy(w.m[w.end-w.at:], b)
		w.end += int64(len(b))
		return nil
	}
	if !w.noMap && len(b) <= maxMapped {
		err := w.move()
		if err == nil {
			copy(w.m[w.end-w.at:], b)
			w.end += int64(len(b))
			return nil
		}
		// Without a window (no room for one, say), the frame may still
		// fit: pwrite(2) says.
		w.noMap = errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENODEV)
	}
	if _, err := w.f.WriteAt(b, w.end); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	w.end += int64(len(b))
	return nil
}

// move maps the window at the page that holds the records' end, after
// making that part of the file in zeros (zero).
func (w *window) move() error {
	if err := w.unmap(); err != nil {
		return err
	}
	at := w.end &^ int64(os.Getpagesize()-1)
	if err := w.zero(at + windowSize); err != nil {
		return err
	}
	m, err := syscall.Mmap(int(w.f.Fd()), at, windowSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("journal: mmap: %w", err)
	}
	w.m, w.at = m, at
	return nil
}

// zero writes zeros from the records' end to upto, the file's new end
// (nothing when the file reaches that far already).
func (w *window) zero(upto int64) error {
	st, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	from := max(st.Size(), w.end)
	if from >= upto {
		return nil
	}
	if w.zeros == nil {
		w.zeros = make([]byte, 64<<10)
	}
	for from < upto {
		n, err := w.f.WriteAt(w.zeros[:min(int64(len(w.zeros)), upto-from)], from)
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		from += int64(n)
	}
	return nil
}

func (w *window) unmap() error {
	if w.m == nil {
		return nil
	}
	m := w.m
	w.m = nil
	if err := syscall.Munmap(m); err != nil {
		return fmt.Errorf("journal: munmap: %w", err)
	}
	return nil
}

// close unmaps the window and cuts the file back to its records, when
// this writer appended to it: one that appended nothing leaves the file
// as it found it.
func (w *window) close() error {
	err := w.unmap()
	if !w.wrote {
		return err
	}
	if terr := w.f.Truncate(w.end); err == nil && terr != nil {
		err = fmt.Errorf("journal: %w", terr)
	}
	return err
}
