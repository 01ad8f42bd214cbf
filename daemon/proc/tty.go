package proc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	// creack/pty opens the pseudo-terminal pair portably (posix_openpt,
	// grantpt/unlockpt and ptsname differ between Linux, the BSDs and
	// macOS); it is the library Docker, containerd and most Go terminal
	// tools use. Everything after opening (sizes, the child's session and
	// controlling terminal, non-blocking reads) is done here.
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/envlist"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// defaultTerm is TERM for a child with a terminal whose environment names
// none: full-screen programs refuse to run without one.
const defaultTerm = "xterm-256color"

// startTTY starts spec's command with a new pseudo-terminal of spec.TTY's
// size as its stdin, stdout, stderr and controlling terminal. The child
// leads a new session (and so a new process group, whose id is its pid,
// which is what signals reach). It returns the master side, made pollable
// so reads honour deadlines, and a writer for the child's input.
func (r *Registry) startTTY(spec Spec, env []string, dir string) (cmd *exec.Cmd, master *os.File, stdin io.WriteCloser, err error) {
	size := *spec.TTY
	if size.Rows < 1 || size.Cols < 1 || size.Rows > 0xffff || size.Cols > 0xffff {
		return nil, nil, nil, fmt.Errorf("spawn %s: terminal size %dx%d out of range", spec.Command, size.Rows, size.Cols)
	}
	path, err := lookPath(spec.Command, env, dir)
	if err != nil {
		return nil, nil, nil, err
	}
	_, asked := spec.Env["TERM"] // set or unset by the spawn: as it asked
	if _, inherited := envlist.Lookup(env, "TERM"); !asked && !inherited {
		env = append(env[:len(env):len(env)], "TERM="+defaultTerm)
	}
	ptm, pts, err := pty.Open()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("spawn %s: open a pseudo-terminal: %w", spec.Command, err)
	}
	defer pts.Close() // the child has its own copy once started
	if err := pty.Setsize(pts, &pty.Winsize{Rows: uint16(size.Rows), Cols: uint16(size.Cols)}); err != nil {
		ptm.Close()
		return nil, nil, nil, fmt.Errorf("spawn %s: set the terminal size: %w", spec.Command, err)
	}
	// pty.Open leaves the master in blocking mode (it asked for its Fd),
	// where reads ignore deadlines: continue on a non-blocking duplicate.
	master, err = PollableDup(ptm)
	ptm.Close()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("spawn %s: %w", spec.Command, err)
	}
	in, err := PollableDup(master)
	if err != nil {
		master.Close()
		return nil, nil, nil, fmt.Errorf("spawn %s: %w", spec.Command, err)
	}
	cmd = &exec.Cmd{
		Path:   path,
		Args:   append([]string{spec.Command}, spec.Args...),
		Env:    env,
		Dir:    dir,
		Stdin:  pts,
		Stdout: pts,
		Stderr: pts,
		// Setsid makes the child a session and group leader; Setctty makes
		// its stdin (fd 0 in the child) its controlling terminal.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0},
	}
	if err := r.start(cmd, spec.Sandbox); err != nil {
		master.Close()
		in.Close()
		return nil, nil, nil, fmt.Errorf("spawn %s: %w", spec.Command, err)
	}
	return cmd, master, &ttyInput{f: in}, nil
}

// PollableDup duplicates f's descriptor, close-on-exec and non-blocking,
// so that the runtime's poller serves it: reads and writes honour
// deadlines, and one blocked on it ends when it is closed. (A descriptor
// passed over a socket arrives blocking, and os.NewFile keeps it so.)
func PollableDup(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(old uintptr) {
		fd, derr = unix.FcntlInt(old, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("dup %s: %w", f.Name(), derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dup %s: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// setWinsize sets the terminal size through its master side, without
// making the descriptor blocking (pty.Setsize would).
func setWinsize(master *os.File, size wire.TermSize) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(size.Rows), Col: uint16(size.Cols)})
	}); err != nil {
		return err
	}
	return ierr
}

// ttyInput is the child's input through the terminal. Closing it sends the
// terminal's end-of-file character (^D), which a child reading a line reads
// as the end of its input, since a terminal cannot be closed for one side.
type ttyInput struct{ f *os.File }

func (t *ttyInput) Write(b []byte) (int, error)        { return t.f.Write(b) }
func (t *ttyInput) SetWriteDeadline(d time.Time) error { return t.f.SetWriteDeadline(d) }

func (t *ttyInput) Close() error {
	t.f.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	t.f.Write([]byte{4})
	return t.f.Close()
}
