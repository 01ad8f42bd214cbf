package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
)

// TestSandboxedExecCannotEscapeThroughTheDaemon replays the attack: a
// daemon started from a shell that exports SOUS_TOKEN and SOUS_SOCKET, and
// a sandboxed (read-only) `sous exec -- touch OUTSIDE` spawned on it. The
// inner sous must not get the daemon to run touch outside the sandbox: the
// daemon hands its children neither variable, and where the kernel allows
// it the socket itself is out of the sandbox's reach, even for a child the
// spawn gave the token to.
func TestSandboxedExecCannotEscapeThroughTheDaemon(t *testing.T) {
	t.Parallel()
	if err := sandbox.Supported(); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	const token = "escape-test-token"
	bin := sousBinary(t)
	s := startServeEnv(t, token, func(sock string) []string {
		// What `export SOUS_TOKEN=... SOUS_SOCKET=...; sous daemon serve` gives.
		return append(cleanEnv(), "SOUS_TOKEN="+token, "SOUS_SOCKET="+sock)
	}, "--login-path=false")
	outside := t.TempDir()

	spawn := func(id string, env map[string]string) (marker string) {
		t.Helper()
		marker = filepath.Join(outside, id)
		params, _ := json.Marshal(map[string]any{
			"id": id, "command": bin, "args": []string{"exec", "--", "touch", marker},
			"sandbox": map[string]any{"mode": "read-only"}, "env": env,
		})
		rpc := s.sousCmd(t, s.clientEnv(), "rpc", "--socket", s.socket, "process.spawn", string(params))
		if out, err := rpc.CombinedOutput(); err != nil || !strings.Contains(string(out), `"success": true`) {
			t.Fatalf("spawn %s: %v\n%s", id, err, out)
		}
		attach := s.sousCmd(t, s.clientEnv(), "attach", "--socket", s.socket, id)
		out, _ := attach.CombinedOutput()
		t.Logf("%s: the sandboxed sous exec said: %s", id, strings.TrimSpace(string(out)))
		return marker
	}

	// The daemon's own environment: nothing for the inner sous to find.
	if m := spawn("inherited", nil); fileExists(m) {
		t.Errorf("escaped with the daemon's inherited SOUS_TOKEN and SOUS_SOCKET: %s was created outside the sandbox", m)
	}

	// A spawn that passes the token and socket on purpose (a recipe's env=)
	// gets them; the socket is still out of reach where the kernel can
	// deny it.
	if why := sandbox.MountIsolation(); why != nil {
		t.Logf("not checking a child given the token: %v", why)
		return
	}
	if m := spawn("given", map[string]string{"SOUS_TOKEN": token, "SOUS_SOCKET": s.socket}); fileExists(m) {
		t.Errorf("escaped through the daemon's socket with a token given in env: %s was created outside the sandbox", m)
	}
}
