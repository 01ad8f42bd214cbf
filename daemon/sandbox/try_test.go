//go:build linux

package sandbox_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tryArg is argv[1] of this test binary run as a sandboxed child that
// tries system calls: `sandbox.test __try OP ARG [OP ARG]...`. It prints one
// line per operation, "OP ARG: ok" or "OP ARG: <errno name>", and exits 0.
// A shell cannot make these calls precisely (setxattr, connect to an
// abstract socket), and each answer is the kernel's own.
const tryArg = "__try"

func runTry(args []string) int {
	for len(args) >= 2 {
		op, arg := args[0], args[1]
		args = args[2:]
		fmt.Printf("%s %s: %s\n", op, arg, errName(try(op, arg)))
	}
	return 0
}

func try(op, arg string) error {
	switch op {
	case "chmod":
		return unix.Chmod(arg, 0o777)
	case "utimes":
		t := time.Unix(1e9, 0)
		return os.Chtimes(arg, t, t)
	case "setxattr":
		return unix.Setxattr(arg, "user.sous", []byte("x"), 0)
	case "chown":
		return unix.Chown(arg, 65534, 65534)
	case "write":
		return os.WriteFile(arg, []byte("x"), 0o644)
	case "dial":
		c, err := net.DialTimeout("unix", arg, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	case "stop", "cont", "zero":
		pid, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		sig := map[string]syscall.Signal{"stop": syscall.SIGSTOP, "cont": syscall.SIGCONT, "zero": 0}[op]
		return unix.Kill(pid, sig)
	case "umount":
		return unix.Unmount(arg, unix.MNT_DETACH)
	case "remount-rw":
		// mount_setattr(2), which Landlock does not cover: what a
		// privileged child would use to undo a read-only mount. Only the
		// mount of arg, never recursively: should a broken sandbox let it
		// through to the host's mounts, it must change nothing there (arg
		// is on a writable mount, the test's temporary directory).
		return unix.MountSetattr(unix.AT_FDCWD, arg, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY})
	}
	return fmt.Errorf("unknown operation %q", op)
}

// errName is "ok", or the errno's name (EPERM) when err wraps one.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}
