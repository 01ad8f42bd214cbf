// Package fileops implements claustrum's files.* methods (docs/PROTOCOL.md) as plain
// Go functions: Stat, List, Read, Validate and ExtractTar. The daemon's
// dispatcher decodes params, calls these and encodes the results; nothing here
// knows about JSON-RPC. A *wire.Error return is sent as that error object; any
// other error becomes -32603 carrying its text.
//
// # files.stat, files.list, files.read, files.validate
//
// Stat follows symlinks and reports any stat failure (missing path, over-long
// path, permission) as the empty {exists:false} result, as claustrum does.
//
// List skips hidden names (leading "."), sorts by name and resolves isDir by
// following symlinks: a symlink to a directory is a directory, a dangling one
// is not. Only symlinks cost an extra stat; other entries use the type the
// directory read already returned.
//
// Read returns {exists:false} only for a path that does not exist; a
// directory or a file larger than maxBytes is -32602 and other failures are
// plain errors. The file is opened non-blocking so that a FIFO without a
// writer reads as empty instead of hanging the daemon, and when maxBytes is
// given at most maxBytes+1 bytes are ever read, so a file that grows after
// the size check (or a device such as /dev/zero) cannot exhaust memory.
// Without maxBytes the whole file is read, as the contract says.
//
// Validate reports a missing path as "Path does not exist" and any other stat
// failure (permission, a file used as a directory) as valid:false with the
// stat error's text.
//
// # files.extract_tar
//
// ExtractTar unpacks a gzip-compressed tar archive into destDir with every
// side effect of the contract, in this order:
//
//  1. archivePath and destDir are required (-32602); destDir must be absolute
//     and not "/" ({success:false}, archive untouched, no fileCount).
//  2. The archive is opened and immediately unlinked: from here on it is
//     consumed whatever the outcome, and every result carries fileCount. An
//     archive that cannot be opened gives {success:false, error:<open error>}
//     without fileCount.
//  3. The gzip header is read before destDir is touched, so an archive that is
//     not gzip at all ("gzip: invalid header", or "gzip: EOF" for an empty
//     file) fails without destroying anything. Every error of the gzip layer,
//     at the header or mid-stream, starts with "gzip: ".
//  4. destDir is wiped and recreated 0700. The old tree is first renamed to a
//     fresh hidden sibling (".<name>.old-*") and deleted after the new tree is
//     written, because on ext4 creating thousands of files right after
//     deleting thousands costs several times more kernel time. The sibling is
//     deleted before ExtractTar returns, whatever the outcome: after the call
//     the old content is gone, as with a plain RemoveAll. Where the rename is
//     impossible (destDir is a mount point, or its parent is not writable)
//     destDir is removed in place instead. A failure to delete the old tree
//     is reported as "clean destDir: …" (no .synced marker), and its remains
//     are left in the sibling, as they are if the daemon dies mid-call.
//  5. Entries are unpacked: directories 0700, regular files 0600 whatever the
//     header mode (subject to the process umask, like any create), owners and
//     times are not restored. destDir is opened once and every entry is
//     created relative to it, never through a symlink: files with openat2
//     (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) and O_CREAT|O_EXCL|O_NOFOLLOW,
//     directories with mkdirat in a parent opened the same way (or, without
//     openat2, a walk of openat(O_NOFOLLOW) per component; tree.go). So a
//     process that swaps a directory for a symlink while the archive is
//     extracted cannot make it write outside destDir: the entry fails. A
//     regular file repeated later in the archive replaces the earlier one, as
//     tar does. The archive is read and every entry checked in order on one
//     goroutine; directories and files up to 64 KiB are then created by a
//     few worker goroutines, because unpacking a source tree is bound by the
//     kernel's inode allocation. Entries of one path always go to the same
//     worker, so their archive order holds.
//  6. On success an empty ".synced" marker is written at destDir's root.
//
// fileCount counts the regular-file entries written (a file repeated in the
// archive counts each time); directories and the marker do not count. Every
// failure reports fileCount 0, because the tree is then incomplete.
//
// Extract adds what the daemon's extension (files.extract_tar.options) and
// its limits ask for; ExtractTar is Extract with none of it:
//   - ArchiveModes keeps the archive's permission bits as `tar x` without -p
//     does (modes.go): masked by the umask, without set-user-ID, set-group-ID
//     or sticky bits, never writable by others; directories keep rwx for
//     their owner so that the next call can wipe them.
//   - KeepArchive skips the unlink of step 2 (an archive inside destDir is
//     still wiped with it in step 4).
//   - Limits bound the bytes the archive unpacks to and their ratio to the
//     archive's size (limits.go). An archive that passes one fails with
//     "archive unpacks to more than …" and, unlike other failures, leaves
//     destDir empty: what a bomb wrote so far is deleted.
//
// Entries are refused, failing the whole extraction, when:
//   - the name is absolute, longer than 4096 bytes (PATH_MAX), contains NUL,
//     or resolves outside destDir: "unsafe path in archive: <name>". A "../"
//     that resolves back inside destDir is allowed. A non-directory whose name
//     resolves to destDir itself ("", ".") is unsafe too. The name is checked
//     before the type, so a symlink named "../x" is reported as unsafe. Names
//     longer than 1024 bytes are shortened in the message to keep the
//     response small.
//   - the type is anything but a regular file or a directory: hardlink ('1'),
//     symlink ('2'), devices ('3', '4'), FIFO ('6'), contiguous file ('7'),
//     GNU sparse ('S', also PAX-format sparse files, which would otherwise let
//     a few bytes of archive expand into an arbitrarily large file of holes)
//     and unknown types: "unsupported tar entry type <c>: <name>", with <c>
//     written as \xNN when it is not printable ASCII. PAX extended headers and
//     GNU long names are consumed by archive/tar and never surface; PAX global
//     headers ('g', which git archive writes first) carry no file and are
//     skipped.
//
// A failure after unpacking started (other than a limit) leaves what was
// already written in destDir (as the reference does) but never writes the
// .synced marker, so a reader can tell a complete tree from a partial one.
// A limit's failure leaves destDir empty instead. Workers finish the
// entries before the failed one and skip those after it, and the error
// reported is that of the earliest failed entry, as a one-at-a-time
// extraction would report. The one exception is two entries that collide
// through different paths (a file "x", then "x/y"): the extraction fails
// either way, but which of the two is named depends on which landed first.
//
// Memory is bounded whatever the archive: large files are streamed through
// one fixed buffer, at most a few MiB of small files wait for the workers,
// decompression runs one goroutine ahead through a few fixed chunks (so
// inflating and writing overlap, as `tar xzf` overlaps with its gzip
// child), and no per-entry state is kept. Disk is bounded by Limits: a small
// gzip can expand about a thousandfold.
package fileops

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Stat implements files.stat.
func Stat(path string) wire.StatResult {
	fi, err := os.Stat(path)
	if err != nil {
		return wire.StatResult{}
	}
	return wire.StatResult{Exists: true, IsDir: fi.IsDir(), Size: fi.Size(), Mode: fi.Mode().String()}
}

// List implements files.list.
func List(path string) (wire.ListResult, error) {
	des, err := os.ReadDir(path)
	if err != nil {
		return wire.ListResult{}, err
	}
	// Non-nil so that an empty directory marshals as [] rather than null.
	entries := make([]wire.ListEntry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		full := filepath.Join(path, name)
		isDir := de.IsDir()
		if de.Type()&fs.ModeSymlink != 0 {
			fi, err := os.Stat(full)
			isDir = err == nil && fi.IsDir()
		}
		entries = append(entries, wire.ListEntry{Name: name, Path: full, IsDir: isDir})
	}
	return wire.ListResult{Entries: entries}, nil
}

// Read implements files.read. Its result comes encoded: a regular file is
// read straight into the answer's buffer and escaped there
// (wire.ReadAnswer), so that the daemon holds the file once, not the file
// and its answer.
func Read(path string, maxBytes *int64) (json.RawMessage, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return wire.AppendReadResult(nil, nil, false), nil
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, wire.InvalidParams("files.read: path is a directory")
	}
	return readFrom(f, fi.Size(), fi.Mode().IsRegular(), maxBytes)
}

// readFrom is Read once the file is open: size is what its stat said,
// which a regular file may have outgrown (or shrunk from) since.
func readFrom(f io.Reader, size int64, regular bool, maxBytes *int64) (json.RawMessage, error) {
	if maxBytes != nil && size > *maxBytes {
		return nil, errExceeds()
	}

	var r io.Reader = f
	if maxBytes != nil && *maxBytes >= 0 && *maxBytes < 1<<62 {
		// One byte past the limit tells a file that grew since the stat
		// from one that is exactly maxBytes long.
		r = io.LimitReader(f, *maxBytes+1)
	}
	var buf []byte
	if regular && size > 0 && size < 1<<40 {
		a := wire.NewReadAnswer(int(size))
		n, err := io.ReadFull(r, a.Content())
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return a.Encode(n), nil // it shrank since the stat
		case err != nil:
			return nil, err
		}
		// Full: unless the file grew since the stat, the next read ends.
		var one [1]byte
		if m, err := io.ReadFull(r, one[:]); m == 0 {
			if !errors.Is(err, io.EOF) {
				return nil, err
			}
			return a.Encode(n), nil
		}
		rest, err := readAll(r, 0)
		if err != nil {
			return nil, err
		}
		buf = append(append(append(make([]byte, 0, n+1+len(rest)), a.Content()...), one[0]), rest...)
	} else {
		var err error
		if buf, err = readAll(r, size); err != nil {
			return nil, err
		}
	}
	if maxBytes != nil && int64(len(buf)) > *maxBytes {
		return nil, errExceeds()
	}
	return wire.AppendReadResult(nil, buf, true), nil
}

func errExceeds() *wire.Error { return wire.InvalidParams("files.read: file exceeds maxBytes") }

// readAll reads r to EOF into a buffer sized from the stat size, so that a
// regular file is read without regrowing; size is only a hint (files under
// /proc report 0 and devices have no size).
func readAll(r io.Reader, size int64) ([]byte, error) {
	const minCap = 512
	c := int64(minCap)
	if size > 0 && size < 1<<40 {
		c = size + 1 // +1 so the EOF read does not force a regrow
	}
	buf := make([]byte, 0, c)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Validate implements files.validate.
func Validate(path string) wire.ValidateResult {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return wire.ValidateResult{Error: "Path does not exist"}
	}
	if err != nil {
		return wire.ValidateResult{Error: err.Error()}
	}
	return wire.ValidateResult{Valid: true, IsDir: fi.IsDir()}
}
