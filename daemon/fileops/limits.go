package fileops

import (
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
)

// Limits bound what one extraction may unpack, so that a small hostile
// archive (a gzip bomb) cannot fill the disk. An extraction that passes one
// fails with a *LimitError and leaves destDir empty.
type Limits struct {
	// MaxBytes is the most bytes the archive may unpack to. What is
	// counted is the tar stream: every file's content plus at least 512
	// bytes of header per entry, so that the limit also bounds how many
	// entries (inodes) an archive can create. 0: no limit.
	MaxBytes int64
	// MaxRatio is the most bytes the archive may unpack to per byte of
	// archive: its size, or for a pipe the bytes read from it so far. It
	// applies past the first RatioFloor bytes. 0: no limit.
	MaxRatio float64
}

// RatioFloor bytes may always be unpacked whatever MaxRatio says: a small
// archive of very compressible files (64 MiB of zeros gzip to 64 KiB) is
// no threat to any disk, and would otherwise be refused.
const RatioFloor = 64 << 20

// LimitError is an extraction stopped by its Limits.
type LimitError struct{ msg string }

func (e *LimitError) Error() string { return e.msg }

// limitReader passes the tar stream through, counting it, and fails once it
// passes the limits; from then on every read fails, so that nothing more is
// written.
type limitReader struct {
	r           io.Reader
	lim         Limits
	n           int64         // bytes passed so far
	archiveSize int64         // of a regular archive; 0 for a pipe
	compressed  *atomic.Int64 // archive bytes read so far (by the read-ahead goroutine)
	err         *LimitError
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.err = l.check(); l.err != nil {
		return 0, l.err
	}
	return n, err
}

func (l *limitReader) check() *LimitError {
	if l.lim.MaxBytes > 0 && l.n > l.lim.MaxBytes {
		return &LimitError{fmt.Sprintf("archive unpacks to more than %s, the daemon's limit (--extract-max-bytes)",
			formatBytes(l.lim.MaxBytes))}
	}
	if l.lim.MaxRatio > 0 && l.n > RatioFloor {
		size := max(l.archiveSize, l.compressed.Load())
		if float64(l.n) > l.lim.MaxRatio*float64(size) {
			return &LimitError{fmt.Sprintf("archive unpacks to more than %s times its size of %s, the daemon's limit (--extract-max-ratio)",
				strconv.FormatFloat(l.lim.MaxRatio, 'g', -1, 64), formatBytes(size))}
		}
	}
	return nil
}

// tripped reports whether the limits stopped the extraction.
func (l *limitReader) tripped() bool { return l.err != nil }

// countingReader counts the bytes read from the archive itself, for the
// ratio of an archive whose size is unknown (a pipe).
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// formatBytes writes a byte count for people: "16 GiB", "1.5 MiB", "300 B".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	prec := 1
	if n%div == 0 {
		prec = 0
	}
	return strconv.FormatFloat(v, 'f', prec, 64) + " " + "KMGTP"[exp:exp+1] + "iB"
}
