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
	"syscall"
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

	fileMode = 0o600
	dirMode  = 0o700
)

// ExtractTar implements files.extract_tar. See the package comment for the
// order of its side effects and the entries it refuses.
func ExtractTar(archivePath, destDir string) (wire.ExtractResult, error) {
	return extractTar(archivePath, destDir, extractOptions{})
}

// extractOptions switch off the optimisations one at a time, so that the
// benchmark can measure what each is worth and the tests can cover every
// path. The zero value is what ExtractTar uses.
type extractOptions struct {
	wipeInPlace bool // RemoveAll destDir before unpacking, instead of moving it aside
	noReadahead bool // decompress on the unpacking goroutine
	workers     int  // file-creating goroutines; 0 means defaultWorkers, 1 writes inline
}

func extractTar(archivePath, destDir string, opt extractOptions) (wire.ExtractResult, error) {
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
	// Unlinking the open archive right away consumes it on every outcome
	// from here on, even a panic, while the descriptor still reads it. A
	// failed unlink (read-only parent) has no place in the result and does
	// not change what the extraction did, so it is not reported.
	_ = os.Remove(archivePath)

	n, err := extract(f, dest, opt)
	if err != nil {
		zero := 0
		return wire.ExtractResult{FileCount: &zero, Error: err.Error()}, nil
	}
	return wire.ExtractResult{Success: true, FileCount: &n}, nil
}

// extract runs steps 3 to 6 of the package comment on the opened archive and
// returns the number of regular files written.
func extract(f *os.File, dest string, opt extractOptions) (int, error) {
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return 0, gzipError{err}
	}
	defer zr.Close()
	var src io.Reader = gzipReader{zr}
	if !opt.noReadahead {
		// Closing f unblocks the read-ahead goroutine if the archive is a
		// FIFO whose writer stalls; stop runs before zr.Close (defers are
		// LIFO), so the reader is never used by two goroutines at once.
		fi, err := f.Stat()
		ra := startReadahead(src, f, err == nil && fi.Mode().IsRegular())
		defer ra.stop()
		src = ra
	}

	trash, err := clearDest(dest, opt.wipeInPlace)
	if err != nil {
		return 0, fmt.Errorf("clean destDir: %w", err)
	}
	n, err := unpackInto(src, dest, opt.workers)
	if trash != "" {
		// Deleted whatever the outcome: the old tree must not survive the call.
		if rmErr := os.RemoveAll(trash); rmErr != nil && err == nil {
			err = fmt.Errorf("clean destDir: %w", rmErr)
		}
	}
	if err != nil {
		return 0, err
	}
	if err := writeMarker(filepath.Join(dest, markerName)); err != nil {
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

func writeMarker(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, fileMode)
	if err != nil {
		return err
	}
	return f.Close()
}

// safeTarget resolves an entry name under dest. It is lexical, which is
// enough because dest was just created empty and no entry can create a
// symlink; files are still opened O_NOFOLLOW in case one appears anyway.
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
