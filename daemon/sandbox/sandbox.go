// Package sandbox confines a daemon child: its filesystem writes (Landlock)
// and its network (a private network namespace). It backs the
// process.spawn.sandbox extension.
//
// # What a sandboxed child may do
//
//   - Read and execute anything the user running the daemon may read and
//     execute: the whole filesystem, "/" and everything beneath it.
//   - Write (create, modify, truncate, remove, rename and link within) only
//     beneath its write roots. A root may be a directory (everything beneath
//     it) or a single file. Relative roots are resolved against the child's
//     working directory. A missing root fails the spawn.
//   - Write to a handful of device files every process may expect:
//     /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom and
//     /dev/tty (with ioctl on them, for terminal programs). Nothing else under
//     /dev, and not /tmp: add "/tmp" to the write roots for temporary files.
//     With no write roots (read-only), these device files are the only
//     writable paths.
//   - File descriptors it inherits (its stdio pipes or terminal) work as
//     usual: Landlock checks paths when they are opened.
//   - Network false (the default): the child starts in a new, empty network
//     namespace. Its only interface is a loopback that is down, so nothing
//     is reachable, not even the host's 127.0.0.1, and abstract Unix sockets
//     are the namespace's own. Network true keeps the host's network.
//   - Signal and reach over abstract Unix sockets only its own processes
//     (Landlock ABI 6 scopes; on older kernels it may signal any process of
//     its user, the daemon included).
//   - Change metadata (chmod, chown, utimes, setxattr) only beneath its
//     write roots, and not connect to the daemon's own sockets
//     (Policy.Hide): both need a mount namespace of its own (see
//     MountIsolation and mounts_linux.go), which root always gets and other
//     users get where user namespaces are open to them. Without one,
//     Landlock alone does not cover either. Writes outside the roots fail
//     with EACCES (Landlock) or EROFS (the read-only mounts).
//   - Use no capability beyond file ownership: without root none survives
//     its exec; a root daemon's child keeps those of file ownership
//     (rootKeeps) and loses the rest (CAP_SYS_ADMIN, CAP_SYS_MODULE,
//     CAP_NET_ADMIN...).
//
// Landlock must be in force before the target program starts, and Go cannot
// run code between fork and exec. So the daemon starts its own executable
// (/proc/self/exe) as a helper: `<self> __sous-sandbox FD POLICY PATH --
// ARGV...`. The helper sets up its mount namespace, restricts itself with
// go-landlock, strictly (no best effort: a kernel that cannot enforce every
// right of the chosen ABI is an error), drops its capabilities, then execs
// the target in place (same pid, same process group). It
// reports failures on the status pipe FD (close-on-exec, so a successful
// exec closes it empty), and Start turns a message there into the spawn's
// error: the target never runs unsandboxed. Every program that can serve a
// sandboxed spawn must call MaybeRunHelper first thing in main (test
// binaries: in TestMain).
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// HelperArg is argv[1] of the helper form of a program that calls
// MaybeRunHelper.
const HelperArg = "__sous-sandbox"

// MinABI is the oldest Landlock ABI that can enforce a sandbox: ABI 3 is the
// first to restrict truncate(2), without which a file outside the write roots
// could still be emptied.
const MinABI = 3

// MaxABI is the newest Landlock ABI this build knows (go-landlock's V11).
// A newer kernel is used at this level.
const MaxABI = 11

// Policy is what a sandboxed child may do.
type Policy struct {
	// Write lists the write roots (files or directories). Empty means
	// read-only. Relative roots are resolved against the child's
	// working directory.
	Write []string `json:"write,omitempty"`
	// Network keeps the host's network; false gives the child a private,
	// empty network namespace.
	Network bool `json:"network,omitempty"`
	// Hide lists pathname Unix sockets the child must not reach: the
	// daemon's own, through which it could have commands run outside its
	// sandbox. Where the child has a mount namespace (see MountIsolation),
	// /dev/null is mounted over each.
	Hide []string `json:"hide,omitempty"`
	// ABI is the Landlock ABI level the helper enforces, strictly. Start
	// sets it from Probe.
	ABI int `json:"abi"`
	// Mounts says that the child starts in a mount namespace of its own,
	// where the helper makes the filesystem read-only outside the write
	// roots and hides Hide. Start sets it from MountIsolation.
	Mounts bool `json:"mounts,omitempty"`
}

// Validate checks the policy's shape (not whether its roots exist).
func (p *Policy) Validate() error {
	for _, w := range p.Write {
		if w == "" {
			return errors.New("sandbox: empty write path")
		}
		if strings.IndexByte(w, 0) >= 0 {
			return fmt.Errorf("sandbox: write path %q contains a NUL byte", w)
		}
	}
	for _, h := range p.Hide {
		if !filepath.IsAbs(h) || strings.IndexByte(h, 0) >= 0 {
			return fmt.Errorf("sandbox: socket to hide %q: want an absolute path", h)
		}
	}
	return nil
}

// Wrap turns the exec of path with argv into the exec of the helper self
// that will restrict itself to p and then exec path with argv. statusFD is
// the descriptor number, in the helper, of the status pipe's write end.
func Wrap(self string, p Policy, statusFD int, path string, argv []string) (string, []string) {
	js, _ := json.Marshal(p) // a struct of strings, bools and ints: cannot fail
	args := make([]string, 0, 6+len(argv))
	args = append(args, self, HelperArg, strconv.Itoa(statusFD), string(js), path, "--")
	return self, append(args, argv...)
}

// installed records that this program's main calls MaybeRunHelper: only
// then can the program re-executed as the helper serve as one.
var installed atomic.Bool

// abiOverride, when non-zero, replaces the probed ABI (tests). -1 means "no
// Landlock".
var abiOverride atomic.Int64

// OverrideABI makes Probe report abi (-1 for no Landlock at all) until the
// returned function is called. For tests: a level above the kernel's makes
// the helper's strict restriction fail, as on an older kernel.
func OverrideABI(abi int) (restore func()) {
	old := abiOverride.Swap(int64(abi))
	return func() { abiOverride.Store(old) }
}

// Info is what Probe found.
type Info struct {
	ABI int   // the kernel's Landlock ABI level; 0 when Landlock is unavailable
	Err error // why Landlock is unavailable, when it is
}

// Supported is nil when this process can run sandboxed children: the kernel
// enforces Landlock at MinABI or above and the helper is installed. Otherwise
// it says why not.
func Supported() error {
	if !installed.Load() {
		return errors.New("this program cannot sandbox: its main does not install the sandbox helper (sandbox.MaybeRunHelper)")
	}
	info := Probe()
	switch {
	case info.ABI <= 0:
		why := "Landlock is unavailable"
		if info.Err != nil {
			why += ": " + info.Err.Error()
		}
		return fmt.Errorf("this kernel cannot enforce a sandbox (%s)", why)
	case info.ABI < MinABI:
		return fmt.Errorf("this kernel cannot enforce a sandbox (Landlock ABI %d; at least %d is needed to restrict truncation)", info.ABI, MinABI)
	}
	return nil
}

// level is the ABI level a policy is enforced at on this kernel.
func level() int { return min(Probe().ABI, MaxABI) }
