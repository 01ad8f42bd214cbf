// Package eintr retries system calls that a signal interrupted.
//
// Go's runtime installs its signal handlers with SA_RESTART, but some
// calls return EINTR all the same (openat on a FUSE or NFS path, waitid,
// fdatasync on some file systems); package os retries them internally,
// and code that makes the raw calls has to do the same.
package eintr

import "syscall"

// Retry calls fn again while it fails with EINTR.
func Retry(fn func() error) error {
	for {
		if err := fn(); err != syscall.EINTR {
			return err
		}
	}
}

// RetryValue is Retry for a call that also returns a value, such as a
// file descriptor.
func RetryValue[T any](fn func() (T, error)) (T, error) {
	for {
		v, err := fn()
		if err != syscall.EINTR {
			return v, err
		}
	}
}
