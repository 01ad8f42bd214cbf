package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// docBlock returns the fenced code block of docs/NAME that contains mark.
func docBlock(t *testing.T, name, mark string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)\n```\n").FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], mark) {
			return m[1]
		}
	}
	t.Fatalf("docs/%s has no code block with %q", name, mark)
	return ""
}

// TestKubectlBridgeOfTheRemoteDoc runs the kubectl-bridge script of
// docs/REMOTE.md ("On Kubernetes") as SOUS_SSH_COMMAND, with a kubectl that
// runs the exec'd command here instead of in a pod: the ssh:// targets of
// a hosts() pool reach the daemon through it, and kubectl is asked for
// the pod and namespace the doc says.
func TestKubectlBridgeOfTheRemoteDoc(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	sock, _ := socketDaemon(t, poolToken, daemonConfig(t))
	dir := shortTempDir(t)
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("kubectl-bridge", docBlock(t, "REMOTE.md", "# kubectl-bridge:"))
	// kubectl exec -i -n NS POD -- CMD...: log the call, run CMD here.
	write("kubectl", `#!/bin/sh
echo "$@" >> "$(dirname "$0")/kubectl.log"
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
`)
	recipe := filepath.Join(dir, "main.star")
	write("main.star", `
pool = hosts(["ssh://sous-0`+sock+`", "ssh://sous-1`+sock+`"], slots=1)
res = parallel(["a", "b", "c"], lambda s, h: h.spawn(["echo", s], echo=False), hosts=pool)
print([r.stdout.strip() for r in res], pool.lost)
`)
	cmd := exec.Command(bin, "run", recipe)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+filepath.Dir(bin)+":"+os.Getenv("PATH"),
		"SOUS_SSH_COMMAND=kubectl-bridge -n ci", "SOUS_TOKEN="+poolToken)
	out, err := cmd.CombinedOutput()
	if err != nil || withoutRunLine(string(out)) != "[\"a\", \"b\", \"c\"] []\n" {
		t.Fatalf("sous run: %v\n%s", err, out)
	}
	log, err := os.ReadFile(filepath.Join(dir, "kubectl.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{"sous-0", "sous-1"} {
		if want := "exec -i -n ci " + pod + " -- sh -c sous daemon bridge --socket " + sock + "\n"; !strings.Contains(string(log), want) {
			t.Errorf("kubectl was not called as %q:\n%s", want, log)
		}
	}
}

// TestDaemonCommandOfTheKubernetesDoc runs the container command of the
// StatefulSet in docs/REMOTE.md, with its paths and port moved here: the
// token comes on descriptor 3 from a file its group may read (as fsGroup
// leaves a Secret's), sous replaces the shell, and a client gets through
// over WebSocket with that token.
func TestDaemonCommandOfTheKubernetesDoc(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	yaml := docBlock(t, "REMOTE.md", "kind: StatefulSet")
	m := regexp.MustCompile(`(?s)args:\n\s*- >-\n(.*?)\n\s*ports:`).FindStringSubmatch(yaml)
	if m == nil {
		t.Fatalf("no folded args in the StatefulSet:\n%s", yaml)
	}
	script := strings.Join(strings.Fields(m[1]), " ")
	dir := shortTempDir(t)
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(poolToken), 0o440); err != nil {
		t.Fatal(err)
	}
	script = strings.NewReplacer("/run/sous/sous.sock", filepath.Join(dir, "sous.sock"),
		"ws://0.0.0.0:8003", "ws://127.0.0.1:0", "/etc/sous-token/token", token).Replace(script)
	d := &servedDaemon{cmd: exec.Command("/bin/sh", "-c", script), stdout: &testutil.SyncBuffer{}, stderr: &testutil.SyncBuffer{}, exited: make(chan struct{})}
	d.cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	d.cmd.Stdout, d.cmd.Stderr = d.stdout, d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		<-d.exited
	})
	ws := strings.TrimSuffix(d.url(t, wsLine), "/")
	cmd := exec.Command(bin, "exec", "--remote", ws, "--", "sh", "-c", "echo $((6*7))")
	cmd.Env = append(os.Environ(), "SOUS_TOKEN="+poolToken)
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "42\n" {
		t.Fatalf("sous exec --remote %s: %v\n%s", ws, err, out)
	}
	// exec: the shell is gone, sous itself gets the pod's SIGTERM.
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/comm"); strings.TrimSpace(string(comm)) != "sous" {
		t.Errorf("the container's process is %q, not sous", comm)
	}
}
