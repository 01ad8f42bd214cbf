//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Self is the helper's executable: this very binary, even if its file has
// been replaced or deleted since it started.
const Self = "/proc/self/exe"

// deviceFiles are writable (with ioctl) in every sandbox.
var deviceFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

var probed = sync.OnceValue(func() Info {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 0 {
		return Info{Err: err}
	}
	return Info{ABI: abi}
})

// Probe reports the kernel's Landlock ABI (one syscall, done once).
func Probe() Info {
	if o := abiOverride.Load(); o != 0 {
		if o < 0 {
			return Info{Err: errors.New("disabled by OverrideABI")}
		}
		return Info{ABI: int(o)}
	}
	return probed()
}

// The helper's exec must run on the thread its spawner forked: the parent-
// death signal (proc.Options.DieWithDaemon) belongs to that thread alone
// (threads the Go runtime starts later do not have it, and an exec from
// one of them drops it), and a Go program's main goroutine stays on that
// thread only while it is locked there. Package initialisation runs on it,
// locked. Without this, a stress run (60 sandboxed children of a SIGKILLed
// sous, under CPU load) left 3 alive; TestEmbeddedChildrenDieWithSous
// passes either way, since which thread execs is down to chance.
func init() {
	if len(os.Args) > 1 && os.Args[1] == HelperArg {
		runtime.LockOSThread()
	}
}

// MaybeRunHelper must be the first thing main does (TestMain for test
// binaries that spawn sandboxed children). In the helper form it never
// returns: it execs the sandboxed program or exits 127. Otherwise it records
// that this program can serve as its own helper, and returns.
func MaybeRunHelper() {
	installed.Store(true)
	if len(os.Args) > 1 && os.Args[1] == HelperArg {
		os.Exit(runHelper(os.Args[2:]))
	}
}

// Start starts cmd confined to p, or as is when p is nil. On success the
// target program is running (the helper has exec'd it: cmd.Process is the
// target). On failure nothing runs: a helper that could not confine itself
// or exec the target has been reaped, and the error says why.
//
// cmd.Path must be the resolved program and cmd.Args its argv; cmd.Dir, Env,
// stdio and ExtraFiles are passed through.
func Start(cmd *exec.Cmd, p *Policy) error {
	if p == nil {
		return cmd.Start()
	}
	if err := Supported(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := p.Validate(); err != nil {
		return err
	}
	pol := *p
	pol.ABI = level()
	pol.Mounts = mountProbe() == nil

	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandbox: status pipe: %w", err)
	}
	defer r.Close()
	statusFD := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, w)
	cmd.Path, cmd.Args = Wrap(Self, pol, statusFD, cmd.Path, cmd.Args)
	namespaces(cmd, &pol)
	err = cmd.Start()
	w.Close()
	cmd.ExtraFiles = cmd.ExtraFiles[:len(cmd.ExtraFiles)-1]
	if err != nil {
		if !pol.Network {
			return fmt.Errorf("sandbox: cannot start in a private network namespace (network: false): %w", err)
		}
		return fmt.Errorf("sandbox: cannot start the helper: %w", err)
	}
	// Empty at EOF: the helper's exec closed the pipe. A message: it failed
	// and exits. A read error is treated like a message, to be safe.
	msg, err := io.ReadAll(io.LimitReader(r, 4096))
	if err == nil && len(msg) == 0 {
		return nil
	}
	cmd.Process.Kill() // exiting already; never let it go on
	cmd.Wait()
	if len(msg) == 0 {
		return fmt.Errorf("sandbox: reading the helper's status: %w", err)
	}
	return errors.New(strings.TrimSpace(string(msg)))
}

// runHelper is the helper: args are FD POLICY PATH -- ARGV... It returns
// only on failure, with the exit code.
func runHelper(args []string) int {
	if len(args) == 1 && args[0] == probeArg {
		if err := isolateMounts(Policy{}); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
			return 1
		}
		return 0
	}
	if len(args) < 5 || args[3] != "--" {
		fmt.Fprintf(os.Stderr, "%s: usage: %s FD POLICY PATH -- ARGV... (internal to sous)\n", HelperArg, HelperArg)
		return 127
	}
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "%s: bad status descriptor %q\n", HelperArg, args[0])
		return 127
	}
	// The target must not inherit the status pipe: its close at exec is
	// what tells the spawner that all went well.
	unix.CloseOnExec(fd)
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if _, err := unix.Write(fd, []byte(msg)); err != nil {
			fmt.Fprintln(os.Stderr, msg)
		}
		return 127
	}
	var p Policy
	if err := json.Unmarshal([]byte(args[1]), &p); err != nil {
		return fail("sandbox: bad policy: %v", err)
	}
	path, argv := args[2], args[4:]
	if err := checkRoots(p.Write); err != nil {
		return fail("sandbox: %v", err)
	}
	if p.Mounts {
		if err := isolateMounts(p); err != nil {
			return fail("sandbox: %v", err)
		}
	}
	if err := restrict(p); err != nil {
		return fail("sandbox: %v", err)
	}
	if err := dropCapabilities(); err != nil {
		return fail("sandbox: %v", err)
	}
	err = syscall.Exec(path, argv, os.Environ())
	return fail("exec %s: %v", path, err)
}

// checkRoots fails on a write root that does not exist, with the error
// the spawner reports.
func checkRoots(write []string) error {
	for _, root := range write {
		if _, err := os.Stat(root); err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("write root %q: %v", root, err)
		}
	}
	return nil
}

// restrict applies p to this process with Landlock, strictly at p.ABI:
// file access, and from ABI 6 the IPC scopes (signals and abstract Unix
// sockets reach only the sandbox's own processes). Landlock's network
// rights stay unhandled: the network namespace is what confines it.
func restrict(p Policy) error {
	cfg, err := config(p.ABI)
	if err != nil {
		return err
	}
	read := landlock.RODirs("/")
	if p.Network {
		// Pathname Unix sockets are network too (Landlock ABI 9+).
		read = read.WithResolveUnix()
	}
	rules := []landlock.Rule{read, landlock.RWFiles(deviceFiles...).WithIoctlDev().IgnoreIfMissing()}
	for _, root := range p.Write {
		fi, err := os.Stat(root)
		if err != nil {
			return fmt.Errorf("write root %q: %w", root, err)
		}
		if fi.IsDir() {
			rules = append(rules, landlock.RWDirs(root).WithRefer())
		} else {
			rules = append(rules, landlock.RWFiles(root))
		}
	}
	if err := cfg.Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// config is go-landlock's strict preset for an ABI level.
func config(abi int) (landlock.Config, error) {
	presets := []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
		landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}
	if abi < MinABI || abi > len(presets) {
		return landlock.Config{}, fmt.Errorf("cannot enforce at Landlock ABI %d (this build knows %d to %d)", abi, MinABI, len(presets))
	}
	preset := presets[abi-1]
	return landlock.Config{HandledAccessFS: preset.HandledAccessFS, Scoped: preset.Scoped}, nil
}
