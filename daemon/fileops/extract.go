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

// extractOptions switch off the two optimisations, so that the benchmark can
// measure what each is worth. The zero value is what ExtractTar uses.
type extractOptions struct {
	wipeInPlace bool // RemoveAll destDir before unpacking, instead of moving it aside
	noReadahead bool // decompress on the unpacking goroutine
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
		ra := startReadahead(src, f)
		defer ra.stop()
		src = ra
	}

	trash, err := clearDest(dest, opt.wipeInPlace)
	if err != nil {
		return 0, fmt.Errorf("clean destDir: %w", err)
	}
	n, err := unpackInto(src, dest)
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

// unpackInto creates dest and unpacks the tar stream src into it, then reads
// src to its end so that the gzip checksum is verified (archive/tar stops at
// the end-of-archive blocks, before the gzip trailer).
func unpackInto(src io.Reader, dest string) (int, error) {
	if err := os.MkdirAll(dest, dirMode); err != nil {
		return 0, fmt.Errorf("mkdir destDir: %w", err)
	}
	u := unpacker{dest: dest, buf: make([]byte, copyBufSize)}
	n, err := u.run(tar.NewReader(src))
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, src); err != nil {
		return 0, readError(err)
	}
	return n, nil
}

type unpacker struct {
	dest string
	buf  []byte
}

func (u *unpacker) run(tr *tar.Reader) (int, error) {
	count := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return count, nil
		}
		// With GODEBUG=tarinsecurepath=0 archive/tar flags names such as
		// "../x" but still returns the header; our own check below decides.
		if err != nil && !(hdr != nil && errors.Is(err, tar.ErrInsecurePath)) {
			return 0, readError(err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // archive-wide metadata, not a file; its name is no path
		}
		target, ok := safeTarget(u.dest, hdr.Name)
		if !ok {
			return 0, fmt.Errorf("unsafe path in archive: %s", quoteName(hdr.Name))
		}
		switch {
		case hdr.Typeflag == tar.TypeDir:
			if target == u.dest {
				continue // "./": destDir itself, which exists
			}
			if err := mkdirEntry(target); err != nil {
				return 0, err
			}
		case (hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeRegA) && !isPAXSparse(hdr):
			if target == u.dest {
				return 0, fmt.Errorf("unsafe path in archive: %s", quoteName(hdr.Name))
			}
			if err := u.writeFile(target, tr, hdr.Size); err != nil {
				return 0, err
			}
			count++
		default:
			flag := hdr.Typeflag
			if isPAXSparse(hdr) {
				flag = tar.TypeGNUSparse
			}
			return 0, fmt.Errorf("unsupported tar entry type %s: %s", typeChar(flag), quoteName(hdr.Name))
		}
	}
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

// mkdirEntry creates a directory entry 0700. The directory may already exist,
// created as the parent of an earlier file.
func mkdirEntry(target string) error {
	err := os.Mkdir(target, dirMode)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		if fi, lerr := os.Lstat(target); lerr == nil && fi.IsDir() {
			return nil
		}
		return err
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(target, dirMode)
	}
	return err
}

// writeFile streams size bytes of r into a new 0600 file at target. It uses
// raw descriptors: os.OpenFile costs three extra syscalls per file trying to
// register a regular file with the poller, which shows when unpacking
// thousands of small files.
func (u *unpacker) writeFile(target string, r io.Reader, size int64) error {
	fd, err := createFile(target)
	if err != nil {
		return err
	}
	for size > 0 {
		chunk := u.buf
		if int64(len(chunk)) > size {
			chunk = chunk[:size]
		}
		if _, err := io.ReadFull(r, chunk); err != nil {
			syscall.Close(fd)
			return readError(err)
		}
		if err := writeAll(fd, chunk); err != nil {
			syscall.Close(fd)
			return &os.PathError{Op: "write", Path: target, Err: err}
		}
		size -= int64(len(chunk))
	}
	if err := syscall.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: target, Err: err}
	}
	return nil
}

// createFile creates target exclusively, without following a symlink. It
// creates missing parents on demand rather than checking for them first, and
// replaces a regular file an earlier entry of the same name wrote.
func createFile(target string) (int, error) {
	fd, err := openExcl(target)
	if err == syscall.ENOENT {
		if err := os.MkdirAll(filepath.Dir(target), dirMode); err != nil {
			return -1, err
		}
		fd, err = openExcl(target)
	}
	if err == syscall.EEXIST {
		if fi, lerr := os.Lstat(target); lerr == nil && fi.Mode().IsRegular() {
			if err := os.Remove(target); err != nil {
				return -1, err
			}
			fd, err = openExcl(target)
		}
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: target, Err: err}
	}
	return fd, nil
}

func openExcl(path string) (int, error) {
	const flags = syscall.O_WRONLY | syscall.O_CREAT | syscall.O_EXCL | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	for {
		fd, err := syscall.Open(path, flags, fileMode)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b = b[n:]
	}
	return nil
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
