package fileops

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

const (
	// maxNameLen is PATH_MAX: no longer name could be created anyway, so it
	// is refused as unsafe before any filesystem call sees it.
	maxNameLen = 4096
	// msgNameLen bounds how much of an entry name an error message quotes,
	// so that a hostile name cannot inflate the response.
	msgNameLen = 1024
	// copyBufSize is the entry copy buffer: most source files fit in one
	// read and one write, and large files move in few syscalls.
	copyBufSize = 256 << 10
	// markerName is written at destDir's root after a complete extraction.
	markerName = ".synced"
)

// Options are what a caller may ask of an extraction beyond claustrum's
// files.extract_tar. The zero value is claustrum's behaviour, unbounded.
type Options struct {
	// ArchiveModes keeps the archive's permission bits (see modes.go)
	// instead of 0600 for files and 0700 for directories.
	ArchiveModes bool
	// KeepArchive leaves archivePath in place instead of consuming it.
	KeepArchive bool
	Limits      Limits
}

// ExtractTar implements files.extract_tar as claustrum does. See the
// package comment for the order of its side effects and the entries it
// refuses.
func ExtractTar(archivePath, destDir string) (wire.ExtractResult, error) {
	return Extract(archivePath, destDir, Options{})
}

// Extract is ExtractTar with the daemon's extensions and limits.
func Extract(archivePath, destDir string, o Options) (wire.ExtractResult, error) {
	return extractTar(archivePath, destDir, o, extractOptions{})
}

// extractOptions switch off the optimisations one at a time, so that the
// benchmark can measure what each is worth and the tests can cover every
// path. The zero value is what Extract uses.
type extractOptions struct {
	wipeInPlace bool // RemoveAll destDir before unpacking, instead of moving it aside
	noReadahead bool // decompress on the unpacking goroutine
	workers     int  // file-creating goroutines; 0 means defaultWorkers, 1 writes inline
	noOpenat2   bool // resolve entries by walking openat(O_NOFOLLOW), as where openat2 is missing
}

func extractTar(archivePath, destDir string, o Options, opt extractOptions) (wire.ExtractResult, error) {
	if archivePath == "" || destDir == "" {
		return wire.ExtractResult{}, wire.InvalidParams("archivePath and destDir are required")
	}
	dest := filepath.Clean(destDir)
	if !filepath.IsAbs(dest) || dest == string(filepath.Separator) {
		return wire.ExtractResult{Error: "destDir must be an absolute, non-root path: " + destDir}, nil
	}
	f, err := os.Open(archivePath)
	if err != nil {
		return wire.ExtractResult{Error: err.Error()}, nil
	}
	if !o.KeepArchive {
		// Unlinking the open archive right away consumes it on every
		// outcome from here on, even a panic, while the descriptor still
		// reads it. A failed unlink (read-only parent) has no place in the
		// result and does not change what the extraction did, so it is
		// not reported.
		_ = os.Remove(archivePath)
	}

	n, err := extract(f, dest, o, opt)
	if err != nil {
		zero := 0
		return wire.ExtractResult{FileCount: &zero, Error: err.Error()}, nil
	}
	return wire.ExtractResult{Success: true, FileCount: &n}, nil
}

// extract runs steps 3 to 6 of the package comment on the opened archive and
// returns the number of regular files written.
func extract(f *os.File, dest string, o Options, opt extractOptions) (int, error) {
	defer f.Close()
	var size int64
	fi, err := f.Stat()
	regular := err == nil && fi.Mode().IsRegular()
	if regular {
		size = fi.Size()
	}
	archive := &countingReader{r: f}
	zr, err := gzip.NewReader(archive)
	if err != nil {
		return 0, gzipError{err}
	}
	defer zr.Close()
	var src io.Reader = gzipReader{zr}
	if !opt.noReadahead {
		// Closing f unblocks the read-ahead goroutine if the archive is a
		// FIFO whose writer stalls; stop runs before zr.Close (defers are
		// LIFO), so the reader is never used by two goroutines at once.
		ra := startReadahead(src, f, regular)
		defer ra.stop()
		src = ra
	}
	lim := &limitReader{r: src, lim: o.Limits, archiveSize: size, compressed: &archive.n}

	trash, err := clearDest(dest, opt.wipeInPlace)
	if err != nil {
		return 0, fmt.Errorf("clean destDir: %w", err)
	}
	t, err := openTree(dest, o.ArchiveModes, opt.noOpenat2)
	if err != nil {
		err = fmt.Errorf("mkdir destDir: %w", err)
	} else {
		defer t.close()
	}
	var n int
	if err == nil {
		n, err = unpackInto(lim, t, opt.workers)
	}
	if lim.tripped() {
		// A bomb's partial tree is what it wanted to write: none of it
		// stays. The error is the limit's whichever entry failed first.
		err = lim.err
		if rmErr := t.empty(); rmErr != nil {
			err = fmt.Errorf("%w; clean destDir: %v", err, rmErr)
		}
	}
	if trash != "" {
		// Deleted whatever the outcome: the old tree must not survive the call.
		if rmErr := os.RemoveAll(trash); rmErr != nil && err == nil {
			err = fmt.Errorf("clean destDir: %w", rmErr)
		}
	}
	if err != nil {
		return 0, err
	}
	if err := t.writeMarker(); err != nil {
		return 0, fmt.Errorf("write %s: %w", markerName, err)
	}
	return n, nil
}

// clearDest gets destDir out of the way. It returns the hidden sibling the old
// tree was renamed to, which the caller deletes once the new tree is written,
// or "" when there was nothing to move or the tree was removed in place.
func clearDest(dest string, inPlace bool) (string, error) {
	if _, err := os.Lstat(dest); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if !inPlace {
		if trash, err := moveAside(dest); err == nil {
			return trash, nil
		}
		// A mount point, a read-only parent or a name too long for the
		// sibling: fall back to what the contract literally says.
	}
	return "", os.RemoveAll(dest)
}

// moveAside renames dest into a fresh hidden directory next to it, so that the
// rename can never clobber anything, and returns that directory.
func moveAside(dest string) (string, error) {
	dir, base := filepath.Split(dest)
	trash, err := os.MkdirTemp(dir, "."+base+".old-")
	if err != nil {
		return "", err
	}
	if err := os.Rename(dest, filepath.Join(trash, base)); err != nil {
		_ = os.Remove(trash) // empty: we just made it
		return "", err
	}
	return trash, nil
}

// safeTarget resolves an entry name under dest. It is lexical: no entry can
// create a symlink, and a symlink another process puts in destDir while it
// is extracted is never followed (tree.go).
func safeTarget(dest, name string) (string, bool) {
	if len(name) > maxNameLen || strings.IndexByte(name, 0) >= 0 || filepath.IsAbs(name) {
		return "", false
	}
	target := filepath.Join(dest, name)
	if target != dest && !strings.HasPrefix(target, dest+string(filepath.Separator)) {
		return "", false
	}
	return target, true
}

// entryPath is an entry's path relative to dest ("" for dest itself), or
// false when safeTarget refuses the name.
func entryPath(dest, name string) (string, bool) {
	target, ok := safeTarget(dest, name)
	if !ok || target == dest {
		return "", ok
	}
	return target[len(dest)+1:], true
}

// isPAXSparse reports a PAX-format GNU sparse file, which archive/tar presents
// as a regular file whose holes read as zeros.
func isPAXSparse(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// readError gives a failure to read the archive its message: errors of the
// gzip layer keep their own "gzip: …" text, which archive/tar passes through
// unchanged, and anything else is a malformed tar stream.
func readError(err error) error {
	var le *LimitError
	if errors.As(err, &le) {
		return le
	}
	var gz gzipError
	if errors.As(err, &gz) {
		return gz
	}
	return fmt.Errorf("read archive: %w", err)
}

// gzipError marks an error of the gzip layer; its text always starts with
// "gzip: " as the contract's bad-gzip result requires, including the bare
// io errors (EOF on an empty file, unexpected EOF on a truncated one) and
// the "flate: …" errors of corrupt data.
type gzipError struct{ err error }

func (e gzipError) Error() string {
	msg := e.err.Error()
	if strings.HasPrefix(msg, "gzip: ") {
		return msg
	}
	return "gzip: " + msg
}

func (e gzipError) Unwrap() error { return e.err }

// gzipReader tags every error of the decompressor except io.EOF as a gzipError.
type gzipReader struct{ r io.Reader }

func (g gzipReader) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err != nil && err != io.EOF {
		err = gzipError{err}
	}
	return n, err
}

// typeChar renders a typeflag for a message: the character itself when it is
// printable ASCII, else \xNN.
func typeChar(t byte) string {
	if t > ' ' && t < 0x7f {
		return string(rune(t))
	}
	return fmt.Sprintf(`\x%02x`, t)
}

// quoteName shortens an over-long entry name for an error message, cutting at
// a rune boundary and saying how long the whole name was.
func quoteName(name string) string {
	if len(name) <= msgNameLen {
		return name
	}
	cut := msgNameLen
	for cut > msgNameLen-utf8.UTFMax && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", name[:cut], len(name))
}
