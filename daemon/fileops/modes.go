package fileops

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Permission bits of extracted entries. By default (claustrum's contract)
// every file is 0600 and every directory 0700, whatever the archive says.
// With the archive's modes (files.extract_tar.options, modes "archive") an
// entry keeps its header's permission bits as `tar x` without -p gives
// them: masked by the daemon's umask (the kernel applies it to every
// create), without set-user-ID, set-group-ID or sticky bits, and never
// writable by others whatever the umask. Directories always keep rwx for
// their owner, so that the next extraction can wipe the tree (a read-only
// directory could not be emptied) and entries can be created inside them.
const (
	fileMode = 0o600
	dirMode  = 0o700

	// archivePermMask keeps the rwx bits of owner and group and the
	// read and execute bits of others.
	archivePermMask = 0o775
	// implicitArchiveDir is a directory the archive does not list, created
	// as the parent of an entry: 0777 minus others' write, as tar makes it
	// (minus the umask).
	implicitArchiveDir = 0o775
)

// fileModeOf is the mode a regular file entry is created with.
func (t *destTree) fileModeOf(header int64) uint32 {
	if !t.archive {
		return fileMode
	}
	return uint32(header) & archivePermMask
}

// dirModeOf is the mode a directory entry gets.
func (t *destTree) dirModeOf(header int64) uint32 {
	if !t.archive {
		return dirMode
	}
	return uint32(header)&archivePermMask | 0o700
}

// implicitDirMode is the mode of a parent directory the archive does not
// list.
func (t *destTree) implicitDirMode() uint32 {
	if !t.archive {
		return dirMode
	}
	return implicitArchiveDir
}

// currentUmask reads the process's umask from /proc/self/status (Linux 4.7
// and later), which leaves it untouched. Elsewhere it has to be set to be
// read: it is set to 077 for that instant, so that a file another
// goroutine creates meanwhile gets fewer permissions, never more.
func currentUmask() uint32 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Umask:")); ok {
				if m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32); err == nil {
					return uint32(m)
				}
			}
		}
	}
	old := unix.Umask(0o077)
	unix.Umask(old)
	return uint32(old)
}
