package fileops

import "golang.org/x/sys/unix"

// openat2 opens path beneath dirfd without following any symlink on the
// way: RESOLVE_BENEATH refuses a path that would leave dirfd (an absolute
// path, "..", a magic link), RESOLVE_NO_SYMLINKS refuses every symlink, in
// the last component as in the ones before it. The kernel checks this in the
// same walk that opens the file, so no rename or symlink swapped in by
// another process between two of our calls can redirect it.
func openat2(dirfd int, path string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	}
	return unix.Openat2(dirfd, path, &how)
}
