package fileops

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/internal/eintr"
)

// destTree is destDir, opened once: every entry is created relative to its
// descriptor and never through a symlink, so that a process racing the
// extraction (replacing a directory it made with a symlink to somewhere
// else) cannot make it write outside destDir.
//
// Paths handed to its methods are relative to destDir, clean, without "."
// or ".." components and not empty (safeTarget and entryPath make them).
// With openat2 the kernel resolves a whole path in one call, refusing any
// symlink and any escape (openat2_linux.go). Where openat2 is missing
// (ENOSYS: Linux before 5.6, or a seccomp filter that hides it) the tree is
// walked one component at a time with openat(O_NOFOLLOW), each directory
// opened relative to the one before: slower, as safe.
type destTree struct {
	fd   int    // destDir, O_DIRECTORY
	path string // destDir, for error messages
	walk bool   // no openat2: resolve component by component
	// archive applies the archive's permission bits (modes="archive");
	// umask is then the daemon's, for the chmod of a directory that
	// already exists (the kernel applies it to the others).
	archive bool
	umask   uint32
}

// openTree creates destDir 0700 if need be and opens it. noOpenat2 forces
// the walk, for tests and the benchmark.
func openTree(dest string, archive, noOpenat2 bool) (*destTree, error) {
	if err := os.MkdirAll(dest, dirMode); err != nil {
		return nil, err
	}
	// O_NOFOLLOW: a symlink swapped in for destDir since the MkdirAll is
	// refused rather than followed.
	fd, err := eintr.RetryValue(func() (int, error) {
		return unix.Open(dest, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dest, Err: err}
	}
	t := &destTree{fd: fd, path: dest, walk: noOpenat2, archive: archive}
	if !t.walk {
		// ENOSYS where the kernel lacks it; EPERM where a seccomp filter
		// refuses unknown calls that way (opening "." as a path cannot be
		// refused for any other reason).
		probe, err := openat2(fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		switch {
		case err == nil:
			unix.Close(probe)
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			t.walk = true
		}
	}
	if archive {
		t.umask = currentUmask()
	}
	return t, nil
}

func (t *destTree) close() { unix.Close(t.fd) }

// full is rel's path, for messages.
func (t *destTree) full(rel string) string { return t.path + string(filepath.Separator) + rel }

// release closes a directory descriptor from openDir, unless it is destDir's.
func (t *destTree) release(fd int) {
	if fd != t.fd {
		unix.Close(fd)
	}
}

// open opens rel beneath destDir with flags (O_NOFOLLOW and O_CLOEXEC
// added), following no symlink on the way.
func (t *destTree) open(rel string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !t.walk {
		for {
			fd, err := openat2(t.fd, rel, flags, mode)
			// EAGAIN: the kernel saw a rename race while resolving and
			// wants the call repeated.
			if err != unix.EINTR && err != unix.EAGAIN {
				return fd, err
			}
		}
	}
	dir, base := splitRel(rel)
	pfd, err := t.openDir(dir)
	if err != nil {
		return -1, err
	}
	defer t.release(pfd)
	return eintr.RetryValue(func() (int, error) { return unix.Openat(pfd, base, flags, mode) })
}

// openDir opens directory rel ("" is destDir itself, returned as is) as an
// O_PATH descriptor for the *at calls; release it after.
func (t *destTree) openDir(rel string) (int, error) {
	if rel == "" {
		return t.fd, nil
	}
	if !t.walk {
		return t.open(rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	}
	fd := t.fd
	for _, name := range strings.Split(rel, "/") {
		next, err := eintr.RetryValue(func() (int, error) {
			return unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		})
		t.release(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// mkdirAll creates directory rel and its missing parents, as directories
// the archive does not list. The usual case is one missing level (a file
// raced ahead of its directory's entry, which went to another worker), so
// rel's parent is tried first; when that is missing too, the path is made
// from the top, one component at a time, each opened relative to the one
// before it: never more calls than components, however deep the path.
// Something other than a directory in the way (a file, a symlink) fails
// the open of the component, or of the entry beneath it, which follows no
// symlink.
func (t *destTree) mkdirAll(rel string) error {
	dir, base := splitRel(rel)
	pfd, err := t.openDir(dir)
	if err == nil {
		defer t.release(pfd)
		if err := unix.Mkdirat(pfd, base, t.implicitDirMode()); err != nil && err != unix.EEXIST {
			return &os.PathError{Op: "mkdir", Path: t.full(rel), Err: err}
		}
		return nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "mkdir", Path: t.full(dir), Err: err}
	}
	fd := t.fd
	defer func() { t.release(fd) }()
	done := 0 // bytes of rel made so far, for messages
	for _, name := range strings.Split(rel, "/") {
		done += len(name) + 1
		at := t.full(rel[:min(done, len(rel))])
		if err := unix.Mkdirat(fd, name, t.implicitDirMode()); err != nil && err != unix.EEXIST {
			return &os.PathError{Op: "mkdir", Path: at, Err: err}
		}
		next, err := eintr.RetryValue(func() (int, error) {
			return unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return &os.PathError{Op: "mkdir", Path: at, Err: err}
		}
		t.release(fd)
		fd = next
	}
	return nil
}

// mkdir creates the directory entry rel with mode. The directory may exist
// already, made as the parent of an earlier file: with the archive's modes
// it then gets the entry's, as tar gives it.
func (t *destTree) mkdir(rel string, mode uint32) error {
	dir, base := splitRel(rel)
	pfd, err := t.openDir(dir)
	if errors.Is(err, unix.ENOENT) {
		if err := t.mkdirAll(dir); err != nil {
			return err
		}
		pfd, err = t.openDir(dir)
	}
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: t.full(rel), Err: err}
	}
	defer t.release(pfd)
	err = unix.Mkdirat(pfd, base, mode)
	if err == unix.EEXIST {
		var st unix.Stat_t
		if unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if !t.archive {
				return nil
			}
			err = t.chmodDir(pfd, base, mode)
		}
	}
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: t.full(rel), Err: err}
	}
	return nil
}

// chmodDir gives the existing directory base in pfd mode, minus the umask
// that creating it would have applied. It is opened first (O_NOFOLLOW): a
// chmod by name would follow a symlink swapped in for it.
func (t *destTree) chmodDir(pfd int, base string, mode uint32) error {
	fd, err := eintr.RetryValue(func() (int, error) {
		return unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, mode&^t.umask)
}

// chmodRoot gives destDir itself the mode of a "./" entry (archive modes).
func (t *destTree) chmodRoot(mode uint32) error {
	if err := unix.Fchmod(t.fd, mode&^t.umask); err != nil {
		return &os.PathError{Op: "chmod", Path: t.path, Err: err}
	}
	return nil
}

// create creates the regular file rel exclusively and returns it open for
// writing as a raw descriptor: os.OpenFile spends three more syscalls per
// file registering it with the poller, which shows over thousands of small
// files. Missing parents are created on demand rather than checked for
// first, and a regular file an earlier entry of the same name wrote is
// replaced.
func (t *destTree) create(rel string, mode uint32) (int, error) {
	const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL
	fd, err := t.open(rel, flags, mode)
	if err == unix.ENOENT {
		if dir, _ := splitRel(rel); dir != "" {
			if err := t.mkdirAll(dir); err != nil {
				return -1, err
			}
		}
		fd, err = t.open(rel, flags, mode)
	}
	if err == unix.EEXIST {
		fd, err = t.replace(rel, flags, mode)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: t.full(rel), Err: err}
	}
	return fd, nil
}

// replace unlinks the regular file rel and creates it again; anything else
// of that name stays, and the EEXIST stands.
func (t *destTree) replace(rel string, flags int, mode uint32) (int, error) {
	dir, base := splitRel(rel)
	pfd, err := t.openDir(dir)
	if err != nil {
		return -1, err
	}
	defer t.release(pfd)
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, unix.EEXIST
	}
	if err := unix.Unlinkat(pfd, base, 0); err != nil {
		return -1, err
	}
	return eintr.RetryValue(func() (int, error) {
		return unix.Openat(pfd, base, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	})
}

// writeMarker writes the empty marker at destDir's root, 0600.
func (t *destTree) writeMarker() error {
	fd, err := eintr.RetryValue(func() (int, error) {
		return unix.Openat(t.fd, markerName, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, fileMode)
	})
	if err != nil {
		return &os.PathError{Op: "open", Path: t.full(markerName), Err: err}
	}
	return unix.Close(fd)
}

// empty deletes everything in destDir, leaving it empty: what a failed
// extraction that must not leave a partial tree does.
func (t *destTree) empty() error {
	if err := removeContents(t.fd); err != nil {
		return &os.PathError{Op: "unlinkat", Path: t.path, Err: err}
	}
	return nil
}

// removeContents deletes what directory fd holds, without following any
// symlink: each name is unlinked, and a directory is emptied through its
// own descriptor first.
func removeContents(fd int) error {
	// A descriptor of its own, so that reading names does not move fd's
	// offset.
	rd, err := eintr.RetryValue(func() (int, error) {
		return unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(rd), ".")
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		err := unix.Unlinkat(fd, name, 0)
		if err != unix.EISDIR && err != unix.EPERM {
			if err != nil && err != unix.ENOENT {
				return err
			}
			continue
		}
		sub, err := eintr.RetryValue(func() (int, error) {
			return unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return err
		}
		err = removeContents(sub)
		unix.Close(sub)
		if err != nil {
			return err
		}
		if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
			return err
		}
	}
	return nil
}

// splitRel splits a relative path into its directory ("" at the top) and
// its last component.
func splitRel(rel string) (dir, base string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "", rel
	}
	return rel[:i], rel[i+1:]
}
