package daemon

import (
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// A daemon started from a shell that exports SOUS_TOKEN (or any other
// variable that leads a client to a daemon) must not hand it to its
// children: a sandboxed `sous exec -- CMD` would otherwise find the socket
// and the token in its environment and have the daemon run CMD outside the
// sandbox. A spawn that passes them in env= still gets them.
func TestChildrenDoNotInheritDaemonCredentials(t *testing.T) {
	base := []string{"PATH=/usr/bin:/bin", "KEEP=1"}
	for _, name := range wire.CredentialEnv {
		base = append(base, name+"=leaked-"+name)
	}
	d := startDaemon(t, Config{Env: base})
	c := d.dial()

	const script = `env | sort`
	check := func(id string, params map[string]any, want map[string]string) {
		t.Helper()
		c.wantResult("process.spawn", mustJSON(params), `{"success":true}`)
		out := string(output(c.waitExit(id), wire.Stdout))
		got := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				got[k] = v
			}
		}
		if got["KEEP"] != "1" {
			t.Errorf("%s: KEEP=%q, want the rest of the environment inherited:\n%s", id, got["KEEP"], out)
		}
		for _, name := range wire.CredentialEnv {
			if got[name] != want[name] {
				t.Errorf("%s: %s=%q, want %q", id, name, got[name], want[name])
			}
		}
	}
	plain := map[string]any{"id": "plain", "command": "sh", "args": []string{"-c", script}}
	check("plain", plain, nil)

	explicit := map[string]any{"id": "explicit", "command": "sh", "args": []string{"-c", script},
		"env": map[string]string{"SOUS_TOKEN": "given", "SOUS_SOCKET": "/given.sock"}}
	check("explicit", explicit, map[string]string{"SOUS_TOKEN": "given", "SOUS_SOCKET": "/given.sock"})

	pipeline := map[string]any{"id": "pipeline", "pipeline": [][]string{{"sh", "-c", script}, {"cat"}}}
	check("pipeline", pipeline, nil)

	tty := map[string]any{"id": "tty", "command": "sh", "args": []string{"-c", "stty -onlcr; " + script}, "tty": true}
	check("tty", tty, nil)

	if sandbox.Supported() == nil {
		sandboxed := map[string]any{"id": "sandboxed", "command": "sh", "args": []string{"-c", script},
			"sandbox": map[string]any{"mode": "read-only"}}
		check("sandboxed", sandboxed, nil)
	}
}

// The default environment (Config.Env unset: the daemon's own) is cleaned
// too: the embedded daemon of `sous run` runs in the user's shell.
func TestChildrenDoNotInheritCredentialsFromTheProcessEnv(t *testing.T) {
	for _, name := range wire.CredentialEnv {
		t.Setenv(name, "leaked-"+name)
	}
	d := startDaemon(t, Config{})
	c := d.dial()
	c.wantResult("process.spawn", shParams("p", `env`), `{"success":true}`)
	out := string(output(c.waitExit("p"), wire.Stdout))
	for _, name := range wire.CredentialEnv {
		if strings.Contains(out, name+"=") {
			t.Errorf("the child inherited %s:\n%s", name, out)
		}
	}
}
