package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

func TestHostOverUnixSocket(t *testing.T) {
	t.Parallel()
	const token = "s3cret token"
	sock, srv := socketDaemon(t, token, daemonConfig(t))
	// One Host spawns; a second connection reattaches and sees everything
	// from the first byte, from_seq skips what was seen.
	o, _ := runStar(t, `
h1 = host("unix://`+sock+`", token="`+token+`")
h2 = host("unix://`+sock+`", token="`+token+`")
p = h1.spawn(["sh", "-c", "echo first; sleep 0.2; echo second"], id="shared", echo=False)
q = h2.reattach("shared", echo=False)
r = q.wait()
print(repr(r.stdout), q.pid == p.pid, type(h1))
late = h2.reattach("shared", from_seq=1, echo=False)
print(late.running, late.exit_code, repr(late.wait().stdout))
print(h1.run("echo", ["via h1"], echo=False).stdout.strip(), h1.files.stat("/").is_dir, h1.git.info("/").is_repo)
print(sorted(dir(h1)))
`)
	o.expect(t, 0)
	want := `"first\nsecond\n" True Host
False 0 "second\n"
via h1 True False
["dotenv", "extract_tar", "files", "git", "pipeline", "reattach", "run", "sdk", "sh", "spawn"]
`
	if o.stderr != want {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}
	if srv.Registry().Get("shared") == nil {
		t.Error("the process never reached the socket daemon")
	}
}

func TestHostRefusesAWrongToken(t *testing.T) {
	t.Parallel()
	sock, _ := socketDaemon(t, "right", daemonConfig(t))
	o, _ := runStar(t, `host("unix://`+sock+`", token="wrong")`+"\n")
	o.expect(t, 1, "main.star:1:5", "host: unix://"+sock+": the daemon refused the token (host's token=, else SOUS_TOKEN, else CLAUDE_RPC_TOKEN)")
	// No token at all: the advice is the recipe's ways to give one.
	o, _ = runStar(t, `host("unix://`+sock+`")`+"\n")
	o.expect(t, 1, "host: unix://"+sock+": the daemon requires a token and none was given: pass token=, or set SOUS_TOKEN or CLAUDE_RPC_TOKEN")
}

// An empty target is refused, not taken for the embedded daemon as an empty
// --remote is: in a recipe it is more likely a variable never set.
func TestHostRefusesAnEmptyTarget(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `host("")`+"\n")
	o.expect(t, 1, "main.star:1:5", `host: target is empty: want "embedded", "unix:///path/to.sock", "ssh://host" or "ws://host:port"`)
}

func TestDefaultHostFromSocketFlag(t *testing.T) {
	t.Parallel()
	sock, srv := socketDaemon(t, "tok", daemonConfig(t))
	o, _ := runStar(t, `
p = spawn("sleep", ["30"], id="outlives-the-run", echo=False)
print(run("echo", ["on the socket"], echo=False).stdout.strip())
`, "--socket", sock, "--token-file", tokenFile(t, "tok"))
	o.expect(t, 0)
	if o.stderr != "on the socket\n" {
		t.Errorf("log %q", o.stderr)
	}
	// A socket daemon's processes outlive the run that started them.
	pr := srv.Registry().Get("outlives-the-run")
	if pr == nil || !pr.Running() {
		t.Fatal("the run stopped a process of a socket daemon")
	}
	pr.Signal(syscall.SIGKILL)
}

func TestEmbeddedHostIsSharedByTheRun(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
e = host("embedded")
p = spawn(["sh", "-c", "echo hi"], id="emb", echo=False)
print(repr(e.reattach("emb", echo=False).wait().stdout))
`)
	o.expect(t, 0)
	if o.stderr != "\"hi\\n\"\n" {
		t.Errorf("log %q", o.stderr)
	}
}

// TestTokenFromEnvironment runs the binary: the token comes from
// SOUS_TOKEN, else CLAUDE_RPC_TOKEN, for --socket and for host().
func TestTokenFromEnvironment(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	sock, _ := socketDaemon(t, "from-env", daemonConfig(t))
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
print(run("echo", ["default"], echo=False).stdout.strip())
print(host("unix://` + sock + `").run("echo", ["explicit"], echo=False).stdout.strip())
`})
	for _, env := range []string{"SOUS_TOKEN=from-env", "CLAUDE_RPC_TOKEN=from-env"} {
		cmd := exec.Command(bin, "run", dir+"/main.star", "--socket", sock)
		cmd.Env = append(os.Environ(), env)
		out, err := cmd.CombinedOutput()
		if err != nil || withoutRunLine(string(out)) != "default\nexplicit\n" {
			t.Errorf("%s: %v\n%s", env, err, out)
		}
	}
}

// TestInterrupt sends SIGINT (and SIGHUP, as a closed terminal does) to a
// running sous: it exits 128+n and the processes of its embedded daemon are
// gone.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := testutil.WriteTree(t, map[string]string{"main.star": `
spawn(["sh", "-c", "echo $$ > ` + "\" + args[\"dir\"] + \"" + `/child.pid; exec sleep 30"], echo=False)
print("started")
sleep(30)
`})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "run", dir+"/main.star", "-a", "dir="+dir)
			stderr := &testutil.SyncBuffer{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(stderr.String(), "started") || !lineWritten(dir+"/child.pid") {
				if time.Now().After(deadline) {
					t.Fatalf("the recipe did not start: %s", stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			child := readPid(t, dir+"/child.pid")
			start := time.Now()
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(sig) {
				t.Fatalf("exit: %v, want code %d\n%s", err, 128+int(sig), stderr.String())
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("sous took %s to stop after %v", d, sig)
			}
			waitGone(t, child, 3*time.Second)
			if !strings.Contains(stderr.String(), "sous: interrupted") {
				t.Errorf("stderr:\n%s", stderr.String())
			}
		})
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// lineWritten reports whether the file at p holds a whole line: the shell
// creates it (a redirection) before echo writes to it.
func lineWritten(p string) bool {
	b, err := os.ReadFile(p)
	return err == nil && strings.HasSuffix(string(b), "\n")
}
