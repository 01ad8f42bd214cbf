//go:build linux

package sandbox_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.MaybeRunHelper() // this test binary is the helper of its sandboxed children
	if len(os.Args) > 1 && os.Args[1] == tryArg {
		os.Exit(runTry(os.Args[2:])) // a sandboxed child of the tests (try_test.go)
	}
	os.Exit(m.Run())
}

func requireSandbox(t *testing.T) {
	t.Helper()
	if err := sandbox.Supported(); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
}

// run runs sh -c script confined to p and returns its exit code and output.
func run(t *testing.T, p *sandbox.Policy, dir, script string) (int, string, error) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := &exec.Cmd{Path: sh, Args: []string{"sh", "-c", script}, Dir: dir, Stdout: &out, Stderr: &out}
	if err := sandbox.Start(cmd, p); err != nil {
		return 0, "", err
	}
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), nil
}

func mustRun(t *testing.T, p *sandbox.Policy, dir, script string) (int, string) {
	t.Helper()
	code, out, err := run(t, p, dir, script)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return code, out
}

func TestWritesOnlyUnderTheRoots(t *testing.T) {
	requireSandbox(t)
	base := t.TempDir()
	in, out := filepath.Join(base, "in"), filepath.Join(base, "out")
	for _, d := range []string{in, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(out, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	single := filepath.Join(out, "single")
	os.WriteFile(single, []byte("x"), 0o644)

	p := &sandbox.Policy{Write: []string{in, single}}
	code, text := mustRun(t, p, base, `
		touch in/a && mkdir -p in/d/e && echo hi > in/d/e/f && mv in/d/e/f in/g && rm in/a || exit 10
		echo more >> out/single || exit 11
		echo ok > /dev/null || exit 12
		touch out/new 2>/dev/null && exit 20
		(echo x > out/victim) 2>/dev/null && exit 21
		(: > out/victim) 2>/dev/null && exit 22
		truncate -s 0 out/victim 2>/dev/null && exit 23
		rm out/victim 2>/dev/null && exit 24
		mv in/g out/g 2>/dev/null && exit 25
		touch out/new 2>&1
		exit 0`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, text)
	}
	if !strings.Contains(text, "Permission denied") && !strings.Contains(text, "Operation not permitted") && !strings.Contains(text, "Read-only file system") {
		t.Errorf("touch outside the roots said %q, want EACCES, EPERM or EROFS", text)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(in, "g")); string(b) != "hi\n" {
		t.Errorf("in/g = %q", b)
	}
	if b, _ := os.ReadFile(single); string(b) != "xmore\n" {
		t.Errorf("single = %q", b)
	}
}

func TestRelativeRootIsTheChildsCwd(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	code, text := mustRun(t, &sandbox.Policy{Write: []string{"."}}, dir, `touch made && touch /tmp/sous-sandbox-nope-$$ 2>/dev/null && exit 1; exit 0`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, text)
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); err != nil {
		t.Fatal(err)
	}
}

func TestReadOnly(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "r"), []byte("readable"), 0o644)
	code, text := mustRun(t, &sandbox.Policy{}, dir, `
		cat r || exit 10
		echo gone > /dev/null || exit 11
		head -c 4 /dev/zero > /dev/null || exit 12
		touch new 2>/dev/null && exit 20
		touch /tmp/sous-ro-$$ 2>/dev/null && exit 21
		mkdir d 2>/dev/null && exit 22
		(echo x >> r) 2>/dev/null && exit 23
		exit 0`)
	if code != 0 || text != "readable" {
		t.Fatalf("exit %d: %q", code, text)
	}
}

// dialScript connects to addr with bash's /dev/tcp: exit 0 when connected.
func dialScript(t *testing.T, addr string) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	host, port, _ := net.SplitHostPort(addr)
	return "exec bash -c 'exec 3<>/dev/tcp/" + host + "/" + port + "' 2>&1"
}

func TestNetwork(t *testing.T) {
	requireSandbox(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	script := dialScript(t, ln.Addr().String())

	code, text := mustRun(t, &sandbox.Policy{}, "", script)
	if code == 0 {
		t.Fatalf("network false: connected to the host's loopback: %s", text)
	}
	select {
	case <-accepted:
		t.Fatal("network false: the server accepted a connection")
	default:
	}

	code, text = mustRun(t, &sandbox.Policy{Network: true}, "", script)
	if code != 0 {
		t.Fatalf("network true: exit %d: %s", code, text)
	}
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("network true: no connection accepted")
	}
}

func TestUnenforceableNeverRuns(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	script := "touch " + marker

	// The kernel claims more than it has: the helper's strict restriction
	// fails, and the target never starts.
	if sandbox.Probe().ABI >= sandbox.MaxABI {
		t.Skip("the kernel has the newest Landlock ABI")
	}
	restore := sandbox.OverrideABI(sandbox.MaxABI)
	_, _, err := run(t, &sandbox.Policy{Write: []string{dir}}, dir, script)
	restore()
	if err == nil || !strings.Contains(err.Error(), "sandbox: landlock: missing kernel Landlock support") {
		t.Fatalf("err = %v, want a landlock error", err)
	}
	t.Logf("newer ABI than the kernel's: %v", err)
	// Too old a kernel, or none: refused before anything starts.
	for _, abi := range []int{2, -1} {
		restore := sandbox.OverrideABI(abi)
		_, _, err := run(t, &sandbox.Policy{Write: []string{dir}}, dir, script)
		restore()
		if err == nil || !strings.Contains(err.Error(), "this kernel cannot enforce a sandbox") {
			t.Fatalf("abi %d: err = %v", abi, err)
		}
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the child ran: %v", err)
	}
}

func TestHelperFailuresReachTheSpawner(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	_, _, err := run(t, &sandbox.Policy{Write: []string{filepath.Join(dir, "missing")}}, dir, "true")
	if err == nil || err.Error() != `sandbox: write root "`+filepath.Join(dir, "missing")+`": no such file or directory` {
		t.Fatalf("missing root: %v", err)
	}

	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	cmd := &exec.Cmd{Path: noexec, Args: []string{"noexec"}}
	err = sandbox.Start(cmd, &sandbox.Policy{})
	if err == nil || err.Error() != "exec "+noexec+": permission denied" {
		t.Fatalf("not executable: %v", err)
	}
}

// The target inherits what an unsandboxed child would: its stdio and no
// other descriptor (not the status pipe, nothing of the helper's), the same
// signal mask and ignored signals.
func TestNothingOfTheHelperLeaks(t *testing.T) {
	requireSandbox(t)
	script := `exec sh -c 'ls /proc/self/fd; exec grep -E "^Sig(Blk|Ign)" /proc/self/status'`
	code, text := mustRun(t, &sandbox.Policy{}, "", script)
	want, _ := exec.Command("sh", "-c", script).Output()
	if code != 0 || text != string(want) {
		t.Fatalf("sandboxed:\n%s\nunsandboxed:\n%s", text, want)
	}
}

// The helper execs the target in place: the pid the spawner holds is the
// target's.
func TestSamePid(t *testing.T) {
	requireSandbox(t)
	code, text := mustRun(t, &sandbox.Policy{}, "", `echo $$ $PPID`)
	f := strings.Fields(text)
	if code != 0 || len(f) != 2 || f[1] != strconv.Itoa(os.Getpid()) {
		t.Fatalf("exit %d, child says pid and ppid %q, want ppid %d", code, text, os.Getpid())
	}
}

func TestWrap(t *testing.T) {
	path, args := sandbox.Wrap("/self", sandbox.Policy{Write: []string{"/w"}, ABI: 7}, 4, "/bin/echo", []string{"echo", "hi"})
	want := []string{"/self", sandbox.HelperArg, "4", `{"write":["/w"],"abi":7}`, "/bin/echo", "--", "echo", "hi"}
	if path != "/self" || strings.Join(args, "|") != strings.Join(want, "|") {
		t.Fatalf("Wrap = %q %q", path, args)
	}
	if err := (&sandbox.Policy{Write: []string{""}}).Validate(); err == nil {
		t.Fatal("empty write path accepted")
	}
}

// BenchmarkStart compares starting /bin/true plain, sandboxed with the host
// network, and sandboxed in a private network namespace.
func BenchmarkStart(b *testing.B) {
	if err := sandbox.Supported(); err != nil {
		b.Skip(err)
	}
	path, err := exec.LookPath("true")
	if err != nil {
		b.Skip(err)
	}
	for _, bc := range []struct {
		name string
		p    *sandbox.Policy
	}{{"plain", nil}, {"network", &sandbox.Policy{Network: true}}, {"private-network", &sandbox.Policy{}}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				cmd := &exec.Cmd{Path: path, Args: []string{"true"}}
				if err := sandbox.Start(cmd, bc.p); err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
