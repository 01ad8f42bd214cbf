//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A sandboxed child gets a mount namespace of its own where the host
// allows one (the daemon runs as root, or user namespaces are open to its
// user). There the helper, before Landlock:
//
//   - makes every mount read-only, then puts back over each write root a
//     copy of its original mounts: chmod, chown, utimes and setxattr,
//     which Landlock does not cover, then fail with EROFS outside the write
//     roots, whoever owns the file;
//   - mounts /dev/null over each of Policy.Hide (the daemon's sockets):
//     before Landlock ABI 9 nothing else keeps a same-user child from
//     connecting to a pathname socket, and with the network even ABI 9
//     grants it.
//
// Landlock then forbids the child any mount change, so it cannot undo
// either; without root, the child also has no capability left after its
// exec, and a root daemon's child keeps only a few (dropCapabilities).

// probeArg, after HelperArg, runs the helper's mount set-up in a throwaway
// namespace and exits: 0 when it works.
const probeArg = "probe-mounts"

var mountProbe = sync.OnceValue(func() error {
	cmd := &exec.Cmd{Path: Self, Args: []string{Self, HelperArg, probeArg}}
	namespaces(cmd, &Policy{Network: true, Mounts: true})
	out, err := cmd.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return errors.New(msg)
		}
		return fmt.Errorf("cannot start a child in a mount namespace of its own: %w", err)
	}
	return nil
})

// MountIsolation is nil when sandboxed children get a mount namespace of
// their own, so that files outside their write roots are read-only to them
// (chmod, chown, utimes, setxattr included) and the daemon's sockets are out
// of their reach. Otherwise it says why not; sandboxes are then enforced by
// Landlock alone. It is probed once, by starting a child.
func MountIsolation() error {
	if err := Supported(); err != nil {
		return err
	}
	return mountProbe()
}

// namespaces sets the namespaces p's child starts in: a network namespace
// unless p.Network, a mount namespace with p.Mounts. Without root, a user
// namespace that maps the caller's own ids comes with them (creating either
// needs CAP_SYS_ADMIN in the owning user namespace), and the helper keeps
// CAP_SYS_ADMIN in it, as an ambient capability, for its mounts; it drops
// it before the exec of the target.
func namespaces(cmd *exec.Cmd, p *Policy) {
	var flags uintptr
	if !p.Network {
		flags |= syscall.CLONE_NEWNET
	}
	if p.Mounts {
		flags |= syscall.CLONE_NEWNS
	}
	if flags == 0 {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	sp := cmd.SysProcAttr
	sp.Cloneflags |= flags
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		return
	}
	if sp.Cloneflags&syscall.CLONE_NEWUSER == 0 {
		sp.Cloneflags |= syscall.CLONE_NEWUSER
		sp.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		sp.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		sp.GidMappingsEnableSetgroups = false
	}
	if p.Mounts {
		sp.AmbientCaps = append(sp.AmbientCaps, unix.CAP_SYS_ADMIN)
	}
}

// isolateMounts sets up the helper's mount namespace for p (see above).
// The working directory is entered again afterwards, so that the child's
// relative paths see the new mounts rather than the one beneath them.
func isolateMounts(p Policy) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("mount namespace: %w", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("mount namespace: working directory: %w", err)
	}
	if err := readOnlyOutside(p.Write, cwd); err != nil {
		return err
	}
	for _, s := range p.Hide {
		err := unix.Mount("/dev/null", s, "", unix.MS_BIND, "")
		if err != nil && !errors.Is(err, unix.ENOENT) { // a socket that is gone needs no hiding
			return fmt.Errorf("hiding the daemon's socket %s: %w", s, err)
		}
	}
	if err := os.Chdir(cwd); err != nil {
		return fmt.Errorf("mount namespace: working directory: %w", err)
	}
	return nil
}

// readOnlyOutside makes every mount read-only except beneath the write
// roots: each root's mounts are cloned as they are (open_tree), everything
// is made read-only (mount_setattr), and the clones are put over the roots
// (move_mount), shortest path first so that nested roots stay on top.
func readOnlyOutside(write []string, cwd string) error {
	roots := make([]string, 0, len(write))
	for _, w := range write {
		if !filepath.IsAbs(w) {
			w = filepath.Join(cwd, w)
		}
		if real, err := filepath.EvalSymlinks(w); err == nil && real == "/" {
			return nil // everything is writable: nothing to make read-only
		}
		roots = append(roots, filepath.Clean(w))
	}
	slices.SortFunc(roots, func(a, b string) int { return len(a) - len(b) })
	clones := make([]int, 0, len(roots))
	defer func() {
		for _, fd := range clones {
			unix.Close(fd)
		}
	}()
	for _, r := range roots {
		fd, err := unix.OpenTree(unix.AT_FDCWD, r, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("write root %q: %w", r, err)
		}
		clones = append(clones, fd)
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("making the filesystem read-only: %w", err)
	}
	for i, r := range roots {
		if err := unix.MoveMount(clones[i], "", unix.AT_FDCWD, r, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("write root %q: %w", r, err)
		}
	}
	return nil
}

// rootKeeps are the capabilities a root daemon's sandboxed child keeps:
// what root needs to own and share files under its write roots (tar and
// cp -a restore owners and modes), Docker's defaults for a container's root
// less those the sandbox has no use for. Gone are, among others,
// CAP_SYS_ADMIN (mount_setattr could make its mounts writable again),
// CAP_SYS_MODULE, CAP_NET_ADMIN, CAP_SYS_PTRACE, CAP_SYS_RAWIO, CAP_MKNOD (a
// disk's device node made under a write root would be writable) and
// CAP_DAC_READ_SEARCH (open_by_handle_at reaches any file without a path).
var rootKeeps = []uintptr{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID,
	unix.CAP_KILL, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_NET_BIND_SERVICE, unix.CAP_AUDIT_WRITE,
}

// dropCapabilities leaves the thread that execs the target with no
// capabilities to pass on beyond rootKeeps: no ambient or inheritable ones
// (the helper's CAP_SYS_ADMIN in its user namespace is ambient), and for
// root outside a user namespace a bounding set of rootKeeps alone.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	if os.Geteuid() == 0 {
		for c := uintptr(0); ; c++ {
			if slices.Contains(rootKeeps, c) {
				continue
			}
			err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0)
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			if errors.Is(err, unix.EPERM) {
				// Without CAP_SETPCAP (a container's root stripped of
				// it) the set cannot shrink: the child then gets what
				// any program the daemon starts gets.
				break
			}
			if err != nil {
				return fmt.Errorf("dropping capability %d: %w", c, err)
			}
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clearing inheritable capabilities: %w", err)
	}
	return nil
}
