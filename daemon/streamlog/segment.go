package streamlog

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// A segment is an append-only spill file of consecutive frames.
//
// Record layout: stream (1 byte), exit code (4 bytes, big endian), data
// length (4 bytes), data. Seqs are implicit: a segment's frames are
// consecutive from first. The extension members ride in space the frame
// does not otherwise use: an output frame's Stage in the exit code's place;
// an exit frame's StageCodes as its data (4 bytes each) and TimedOut as the
// stream byte's high bit.
type segment struct {
	f       *os.File
	first   int64
	last    int64 // first-1 while empty
	size    int64 // bytes appended, including pending
	flushed int64 // bytes on the file
	pending []byte
	index   []indexEntry // sparse seq -> offset, one entry per indexEvery bytes
}

type indexEntry struct {
	seq int64
	off int64
}

const (
	timedOutBit  = 0x80
	recordHeader = 9
	indexEvery   = 256 << 10
	flushEvery   = 256 << 10
)

func newSegment(dir string, first int64) (*segment, error) {
	f, err := os.CreateTemp(dir, fmt.Sprintf("seg-%d-*", first))
	if err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	// The name is not needed once open: unlinking now means a crashed daemon
	// leaves nothing behind on disk.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("spill: %w", err)
	}
	return &segment{f: f, first: first, last: first - 1}, nil
}

func (s *segment) append(fr *wire.Frame) error {
	if len(s.index) == 0 || s.size-s.index[len(s.index)-1].off >= indexEvery {
		s.index = append(s.index, indexEntry{seq: fr.Seq, off: s.size})
	}
	var h [recordHeader]byte
	h[0] = byte(fr.Stream)
	data := fr.Data
	if fr.Stream == wire.Exit {
		binary.BigEndian.PutUint32(h[1:5], uint32(int32(fr.ExitCode)))
		data = nil
		for _, c := range fr.StageCodes {
			data = binary.BigEndian.AppendUint32(data, uint32(int32(c)))
		}
		if fr.TimedOut {
			h[0] |= timedOutBit
		}
	} else {
		binary.BigEndian.PutUint32(h[1:5], uint32(int32(fr.Stage)))
	}
	binary.BigEndian.PutUint32(h[5:9], uint32(len(data)))
	s.pending = append(s.pending, h[:]...)
	s.pending = append(s.pending, data...)
	s.size += int64(recordHeader + len(data))
	s.last = fr.Seq
	if len(s.pending) >= flushEvery {
		return s.flush()
	}
	return nil
}

func (s *segment) flush() error {
	if len(s.pending) == 0 {
		return nil
	}
	if _, err := s.f.WriteAt(s.pending, s.flushed); err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	s.flushed += int64(len(s.pending))
	s.pending = s.pending[:0]
	return nil
}

// locate returns the nearest indexed seq at or before seq and its offset.
func (s *segment) locate(seq int64) (int64, int64) {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].seq > seq }) - 1
	if i < 0 {
		return s.first, 0
	}
	return s.index[i].seq, s.index[i].off
}

// read scans records from (seq, off), skips those before want, and appends
// frames up to about maxBytes of data, stopping at end.
func (s *segment) read(buf []wire.Frame, seq, off, end, want int64, maxBytes int) ([]wire.Frame, error) {
	r := io.NewSectionReader(s.f, off, end-off)
	var h [recordHeader]byte
	size := 0
	for off < end && (size == 0 || size < maxBytes) {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return buf, fmt.Errorf("spill read: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(h[5:9]))
		if seq < want {
			if _, err := r.Seek(n, io.SeekCurrent); err != nil {
				return buf, fmt.Errorf("spill read: %w", err)
			}
		} else {
			data := make([]byte, n)
			if _, err := io.ReadFull(r, data); err != nil {
				return buf, fmt.Errorf("spill read: %w", err)
			}
			fr := wire.Frame{Seq: seq, Stream: wire.Stream(h[0] &^ timedOutBit)}
			code := int(int32(binary.BigEndian.Uint32(h[1:5])))
			if fr.Stream == wire.Exit {
				fr.ExitCode, fr.TimedOut = code, h[0]&timedOutBit != 0
				for i := 0; i+4 <= len(data); i += 4 {
					fr.StageCodes = append(fr.StageCodes, int(int32(binary.BigEndian.Uint32(data[i:]))))
				}
			} else {
				fr.Stage, fr.Data = code, data
			}
			buf = append(buf, fr)
			size += int(n) + frameOverhead
		}
		off += recordHeader + n
		seq++
	}
	return buf, nil
}

func (s *segment) remove() {
	s.f.Close()
}
