package runlog

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync"
)

// A journal file is a magic line and then frames, one per record:
//
//	length  uint32, little endian: the payload's size in bytes
//	crc     uint32, little endian: CRC-32C (Castagnoli) of the payload
//	payload length bytes (a JSON record)
//
// Frames are only ever appended. A runner that dies while writing leaves
// at most one torn frame at the end: a short header, a short payload, or a
// payload whose checksum does not match. The reader stops at the first
// frame that is not whole and right, and the file is cut back to the end
// of the last good one before anything is appended again, so a torn
// record is dropped, never misread.
//
// A zero length ends the records: a writer makes the file's next bytes
// ahead of its records, in zeros (window.go), and no record is empty.

// magic opens every journal file: the format and its version.
const magic = "sousjnl1"

// frameHeader is the size of a frame's length and checksum.
const frameHeader = 8

// MaxRecord bounds a record's payload: a length beyond it can only be a
// torn or foreign header, and is not allocated.
const MaxRecord = 1 << 30

// castagnoli is the CRC-32C table, made at the first frame rather than at
// every sous start: with SSE 4.2 making it computes combining tables
// (0.18 ms of init, the largest of any package, for a one-line recipe
// that never journals).
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// errTooLarge is a record beyond MaxRecord, refused when written.
var errTooLarge = errors.New("journal: record larger than 1 GiB")

// appendFrame appends payload's frame to dst.
func appendFrame(dst, payload []byte) []byte {
	var h [frameHeader]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(payload, castagnoli()))
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// splitFrames reads the frames of data, a journal file without its magic:
// the payloads of the whole, intact frames from the start, and good, the
// length of data they span. Whatever follows good is a torn frame.
func splitFrames(data []byte) (payloads [][]byte, good int) {
	for {
		rest := data[good:]
		if len(rest) < frameHeader {
			return payloads, good
		}
		n := binary.LittleEndian.Uint32(rest[0:4])
		sum := binary.LittleEndian.Uint32(rest[4:8])
		if n == 0 || n > MaxRecord || uint64(len(rest)-frameHeader) < uint64(n) {
			return payloads, good
		}
		p := rest[frameHeader : frameHeader+int(n)]
		if crc32.Checksum(p, castagnoli()) != sum {
			return payloads, good
		}
		payloads = append(payloads, p)
		good += frameHeader + int(n)
	}
}
