//go:build !linux

package fileops

import "golang.org/x/sys/unix"

// openat2 is Linux's; elsewhere the tree is walked one component at a time.
func openat2(dirfd int, path string, flags int, mode uint32) (int, error) {
	return -1, unix.ENOSYS
}
