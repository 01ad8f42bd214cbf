//go:build linux

package sandbox_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
)

// tryIn runs this test binary's __try program confined to p (unconfined
// when p is nil) in dir, and returns its answers by "OP ARG".
func tryIn(t *testing.T, p *sandbox.Policy, dir string, ops ...string) map[string]string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := &exec.Cmd{Path: self, Args: append([]string{"sandbox.test", tryArg}, ops...), Dir: dir, Stdout: &out, Stderr: &out}
	if err := sandbox.Start(cmd, p); err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("bad line %q in:\n%s", line, out.String())
		}
		got[k] = v
	}
	return got
}

func requireMounts(t *testing.T) {
	t.Helper()
	requireSandbox(t)
	if err := sandbox.MountIsolation(); err != nil {
		t.Skipf("this host gives sandboxed commands no mount namespace, so the sandbox cannot do this: %v", err)
	}
}

func requireScopes(t *testing.T) {
	t.Helper()
	requireSandbox(t)
	if abi := sandbox.Probe().ABI; abi < 6 {
		t.Skipf("Landlock ABI %d: signal and abstract socket scoping need ABI 6 (Linux 6.12)", abi)
	}
}

// Landlock does not cover chmod, utimes, setxattr or chown: the sandbox
// makes every mount outside the write roots read-only in the child's own
// mount namespace, so they fail there (EROFS) and work under the roots.
func TestMetadataOnlyUnderTheRoots(t *testing.T) {
	requireMounts(t)
	base := t.TempDir()
	for _, d := range []string{"in", "out", "cwd"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"in/f", "out/f", "out/single", "cwd/f"} {
		if err := os.WriteFile(filepath.Join(base, f), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ops := []string{"chmod", "utimes", "setxattr"}
	if os.Geteuid() == 0 {
		ops = append(ops, "chown") // others may not chown at all
	}
	// The filesystem must support each operation for the test to mean
	// anything: try them unconfined on a scratch file first.
	scratch := filepath.Join(base, "scratch")
	os.WriteFile(scratch, nil, 0o644)
	var args []string
	for _, op := range ops {
		args = append(args, op, scratch)
	}
	for k, v := range tryIn(t, nil, base, args...) {
		if v != "ok" {
			t.Skipf("unconfined %s: %s: this filesystem cannot show the difference", k, v)
		}
	}

	// Roots: a directory, a single file, and the working directory given
	// as "." (the child's cwd must see the writable mount, not the one
	// made read-only beneath it). "f" is the cwd's, relative.
	in, out, cwd := filepath.Join(base, "in"), filepath.Join(base, "out"), filepath.Join(base, "cwd")
	p := &sandbox.Policy{Write: []string{in, filepath.Join(out, "single"), "."}}
	writable := map[string]bool{filepath.Join(in, "f"): true, filepath.Join(out, "single"): true, "f": true, filepath.Join(cwd, "f"): true,
		filepath.Join(out, "f"): false}
	args = nil
	for _, op := range ops {
		for f := range writable {
			args = append(args, op, f)
		}
	}
	got := tryIn(t, p, cwd, args...)
	for _, op := range ops {
		for f, ok := range writable {
			k := op + " " + f
			switch {
			case ok && got[k] != "ok":
				t.Errorf("%s under a write root: %s, want ok", k, got[k])
			case !ok && got[k] == "ok":
				t.Errorf("%s outside the write roots: ok, want a refusal", k)
			}
		}
	}
	fi, err := os.Stat(filepath.Join(base, "out/f"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 || fi.ModTime().Year() < 2020 {
		t.Errorf("out/f changed: mode %v, mtime %v", fi.Mode(), fi.ModTime())
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
		t.Errorf("out/f changed owner to %d", st.Uid)
	}
}

// The child cannot undo its mounts: unmounting or making a mount writable
// again is refused (Landlock forbids mount changes; an unprivileged child
// has no capability for them, and a root daemon's child loses them).
func TestMountsCannotBeUndone(t *testing.T) {
	requireMounts(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "daemon.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := tryIn(t, &sandbox.Policy{Hide: []string{sock}, Network: true}, dir,
		"umount", sock, "remount-rw", dir, "dial", sock, "write", filepath.Join(dir, "x"))
	for k, v := range got {
		if v == "ok" {
			t.Errorf("%s: ok, want a refusal", k)
		}
	}
}

// The daemon's socket (Policy.Hide) is out of reach, with the network or
// without it, even under a write root; other sockets stay reachable with
// the network.
func TestHiddenSocketsAreUnreachable(t *testing.T) {
	requireMounts(t)
	dir := t.TempDir()
	hidden, open := filepath.Join(dir, "daemon.sock"), filepath.Join(dir, "other.sock")
	for _, s := range []string{hidden, open} {
		ln, err := net.Listen("unix", s)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	if got := tryIn(t, nil, dir, "dial", hidden); got["dial "+hidden] != "ok" {
		t.Fatalf("unconfined dial: %v", got)
	}
	for _, p := range []*sandbox.Policy{
		{Hide: []string{hidden}, Network: true},
		{Hide: []string{hidden}},
		{Hide: []string{hidden}, Network: true, Write: []string{dir}},
	} {
		got := tryIn(t, p, dir, "dial", hidden, "dial", open)
		if v := got["dial "+hidden]; v == "ok" {
			t.Errorf("%+v: reached the hidden socket", *p)
		}
		if v := got["dial "+open]; p.Network && v != "ok" && sandbox.Probe().ABI < 9 {
			t.Errorf("%+v: dial another socket: %s, want ok", *p, v)
		}
	}
	// The hidden path is the daemon's only: a missing one is no error.
	tryIn(t, &sandbox.Policy{Hide: []string{filepath.Join(dir, "gone.sock")}}, dir, "dial", hidden)
}

// A sandboxed command may signal its own processes, and no other: not the
// daemon (a SIGSTOP would hang it), not the user's other processes.
func TestSignalsStayInTheSandbox(t *testing.T) {
	requireScopes(t)
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	vpid := strconv.Itoa(victim.Process.Pid)
	self := strconv.Itoa(os.Getpid())
	// Stopping the test's own process would hang it, were the sandbox to
	// let it: a zero signal is enough to see it is out of reach.
	got := tryIn(t, &sandbox.Policy{Network: true}, "", "stop", vpid, "zero", self)
	for k, v := range got {
		if v != "EPERM" {
			t.Errorf("%s: %s, want EPERM", k, v)
		}
	}
	if state := procState(t, victim.Process.Pid); state == "T" {
		syscall.Kill(victim.Process.Pid, syscall.SIGCONT)
		t.Fatal("the sandboxed command stopped a process outside the sandbox")
	}
	// Its own children it may signal.
	code, out := mustRun(t, &sandbox.Policy{}, "", `sleep 30 & kill $! && wait $!; echo "status $?"`)
	if code != 0 || !strings.HasSuffix(out, "status 143\n") {
		t.Errorf("killing its own child: exit %d, %q", code, out)
	}
}

// procState is the state letter of pid (R, S, T...).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return f[0]
}

// Abstract Unix sockets (no file to protect them) are out of reach, with
// the network too.
func TestAbstractSocketsAreUnreachable(t *testing.T) {
	requireScopes(t)
	name := fmt.Sprintf("@sous-sandbox-test-%d", os.Getpid())
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	if got := tryIn(t, nil, "", "dial", name); got["dial "+name] != "ok" {
		t.Fatalf("unconfined: %v", got)
	}
	for _, network := range []bool{true, false} {
		got := tryIn(t, &sandbox.Policy{Network: network}, "", "dial", name)
		if v := got["dial "+name]; v == "ok" {
			t.Errorf("network %v: reached an abstract socket outside the sandbox", network)
		}
	}
}

// TestConfinementAsAnUnprivilegedUser runs the tests above as nobody when
// the tests run as root: a daemon run by a user gets its mount namespace
// through a user namespace, and must confine as well.
func TestConfinementAsAnUnprivilegedUser(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the tests above cover it")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy nobody may run, in a directory nobody may enter.
	dir, err := os.MkdirTemp("", "sous-sandbox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "sandbox.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.v", "-test.count=1",
		"-test.run", "^(TestMetadataOnlyUnderTheRoots|TestMountsCannotBeUndone|TestHiddenSocketsAreUnreachable|TestSignalsStayInTheSandbox|TestAbstractSocketsAreUnreachable|TestCapabilities|TestWritesOnlyUnderTheRoots|TestNetwork)$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR=/tmp", "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("timed out:\n%s", out)
	}
	t.Logf("as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("as nobody: %v", err)
	}
	if bytes.Contains(out, []byte("--- SKIP")) && !bytes.Contains(out, []byte("--- PASS")) {
		t.Skip("every test skipped as nobody")
	}
}

// A sandboxed command keeps no capability it could pass on or use to leave
// its confinement: none without root (the helper's CAP_SYS_ADMIN in its
// user namespace is gone at the exec), and for a root daemon only those of
// file ownership (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID,
// CAP_KILL, CAP_SETGID, CAP_SETUID, CAP_NET_BIND_SERVICE, CAP_AUDIT_WRITE).
func TestCapabilities(t *testing.T) {
	requireSandbox(t)
	code, out := mustRun(t, &sandbox.Policy{}, "", `grep ^Cap /proc/self/status`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	caps := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		caps[k] = n
	}
	const rootKeeps = 1<<0 | 1<<1 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<10 | 1<<29
	want := map[string]uint64{"CapInh": 0, "CapAmb": 0, "CapEff": 0, "CapPrm": 0}
	if os.Geteuid() == 0 {
		want = map[string]uint64{"CapInh": 0, "CapAmb": 0, "CapEff": rootKeeps, "CapPrm": rootKeeps, "CapBnd": rootKeeps}
	}
	for k, v := range want {
		if caps[k] != v {
			t.Errorf("%s = %016x, want %016x", k, caps[k], v)
		}
	}
}

// What the daemon's process holds is out of a sandboxed command's reach
// through /proc: its environment (where SOUS_TOKEN may be), its
// descriptors, its memory. Landlock denies ptrace-mode access to
// processes outside the sandbox, for any kernel that runs a sandbox.
func TestDaemonProcessIsOutOfReach(t *testing.T) {
	requireSandbox(t)
	self := strconv.Itoa(os.Getpid())
	if _, err := os.ReadFile("/proc/" + self + "/environ"); err != nil {
		t.Skipf("cannot read our own environ: %v", err)
	}
	code, out := mustRun(t, &sandbox.Policy{Network: true}, "", `
		for f in environ mem; do head -c 1 /proc/`+self+`/$f >/dev/null 2>&1 && echo "read $f"; done
		readlink /proc/`+self+`/fd/0 >/dev/null 2>&1 && echo "read fd 0"
		readlink /proc/`+self+`/cwd >/dev/null 2>&1 && echo "read cwd"
		exit 0`)
	if code != 0 || out != "" {
		t.Errorf("exit %d: %s", code, out)
	}
}
