// Package mirror describes the descriptors a spawner passes with
// process.spawn (docs/PROTOCOL.md, process.spawn.mirror and its .stdin and
// .direct extensions): what the client asks for and the daemon's process
// registry carries out. It is a package of its own so that the client
// names it without importing the daemon's supervisor (daemon/proc), and
// the supervisor without importing the client.
package mirror

import (
	"os"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Spec names pipes and files that a child's output is written to as the
// daemon reads it, ahead of its frames, which are logged and delivered as
// always but marked Frame.Mirrored. It is how `sous exec` streams a child
// to its own stdout (process.spawn.mirror): tee(2) shares the pipe's pages
// with the mirror, so the bytes are not copied on the way, and there is no
// hand-over between goroutines. A regular file or the null device the
// daemon writes to itself (process.spawn.mirror.files): one copy, where
// frames and the spawner's write would make three more. Output that
// cannot be mirrored (a terminal's, after the mirror's reader went away,
// or past a write to a file that fell short) simply arrives unmarked, for
// the caller to write as usual.
//
// Stdin is not a mirror but rides along with one: a pipe or file the
// spawner passed to be the child's stdin itself, as a shell's redirection
// would make it, so that `sous exec` does not relay its own stdin through
// process.stdin. Nothing can be written to such a process's stdin then.
//
// Direct goes further for Stdout and Stderr: they are the child's own
// stdout and stderr (pipes or regular files), which the daemon never
// reads, so those streams have no frames and no replay. It is for a
// spawner that is the only one who could ever follow the process, as
// `sous exec` on its embedded daemon is: the bytes then go from the child
// to their reader as they would from a shell.
type Spec struct {
	Stdout, Stderr *os.File // nil: that stream is not mirrored
	Stdin          *os.File // nil: the daemon's pipe, fed by process.stdin
	Direct         bool     // Stdout and Stderr are the child's own (see above)
}

// ChildOwn lists the passed descriptors that become the child's own (see
// Stdin and Direct), rather than pipes the daemon tees to.
func (m Spec) ChildOwn() []*os.File {
	own := []*os.File{m.Stdin}
	if m.Direct {
		own = append(own, m.Stdout, m.Stderr)
	}
	return slices.DeleteFunc(own, func(f *os.File) bool { return f == nil })
}

// Tees reports whether any output is teed to a pipe of the spawner's: the
// daemon holds those until the output is read (the descriptors that are
// the child's own it closes as soon as the child has them).
func (m Spec) Tees() bool { return m.TeeOf(wire.Stdout) != nil || m.TeeOf(wire.Stderr) != nil }

// TeeOf is the pipe stream s is teed to, or the file it is written to, if
// any.
func (m Spec) TeeOf(s wire.Stream) *os.File {
	if m.Direct {
		return nil
	}
	switch s {
	case wire.Stdout:
		return m.Stdout
	case wire.Stderr:
		return m.Stderr
	}
	return nil
}

// IsPipe reports whether f is a pipe: what output can be teed to. (Stat,
// unlike Fd, leaves a non-blocking file as it is: the description is the
// spawner's too.)
func IsPipe(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

// IsFileOrNull reports whether f is what a daemon writes a stream to itself
// (process.spawn.mirror.files): a regular file, or the null device.
func IsFileOrNull(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && (fi.Mode().IsRegular() || isNullDevice(fi))
}

// isNullDevice reports whether fi is the null device's (/dev/null,
// character device 1:3), wherever it was opened from.
func isNullDevice(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode()&os.ModeCharDevice != 0 && unix.Major(st.Rdev) == 1 && unix.Minor(st.Rdev) == 3
}

// IsPipeOrRegular reports whether f can be a child's stdio as it is, a
// stdin or a Direct output: a pipe or a regular file. A terminal cannot:
// the child runs in a process group of its own, which the terminal would
// stop (SIGTTIN) as it reads, and it would find a terminal where sous
// otherwise gives a pipe.
func IsPipeOrRegular(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && (fi.Mode()&os.ModeNamedPipe != 0 || fi.Mode().IsRegular())
}
