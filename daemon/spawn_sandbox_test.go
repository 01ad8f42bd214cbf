package daemon

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

func requireSandbox(t *testing.T) {
	t.Helper()
	if err := sandbox.Supported(); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
}

func capabilityFeatures(t *testing.T, c *rawClient) []string {
	t.Helper()
	var caps wire.CapabilitiesResult
	if err := json.Unmarshal([]byte(c.result("server.capabilities", "")), &caps); err != nil {
		t.Fatal(err)
	}
	return caps.Features
}

// Not parallel: tests here override the probed Landlock ABI.
func TestSandboxFeatureAdvertisedOnlyWhenEnforceable(t *testing.T) {
	requireSandbox(t)
	d := startDaemon(t, Config{})
	c := d.dial()
	if f := capabilityFeatures(t, c); !slices.Contains(f, wire.FeatureSpawnSandbox) {
		t.Fatalf("features %v lack %s", f, wire.FeatureSpawnSandbox)
	}
	for _, abi := range []int{-1, 2} {
		restore := sandbox.OverrideABI(abi)
		f := capabilityFeatures(t, c)
		restore()
		if slices.Contains(f, wire.FeatureSpawnSandbox) {
			t.Fatalf("ABI %d: features %v include %s", abi, f, wire.FeatureSpawnSandbox)
		}
	}
	d2 := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureSpawnSandbox}})
	c2 := d2.dial()
	if f := capabilityFeatures(t, c2); slices.Contains(f, wire.FeatureSpawnSandbox) {
		t.Fatalf("disabled, yet advertised: %v", f)
	}
	c2.wantError("process.spawn", `{"id":"x","command":"true","sandbox":{"mode":"read-only"}}`, -32603,
		"sandbox: this daemon has process.spawn.sandbox disabled; the process was not started")
}

func TestSandboxedSpawn(t *testing.T) {
	requireSandbox(t)
	d := startDaemon(t, Config{})
	c := d.dial()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "ws"), 0o755)
	script := `touch ws/in && echo in ok; touch out 2>/dev/null || echo out refused; echo . >/dev/null && echo devnull ok`
	c.wantResult("process.spawn", mustJSON(map[string]any{
		"id": "ws", "command": "sh", "args": []string{"-c", script}, "cwd": dir,
		"sandbox": map[string]any{"mode": "workspace-write", "write": []string{"ws"}},
	}), `{"success":true}`)
	frames := c.waitExit("ws")
	checkSeqs(t, frames, 1)
	if got := string(output(frames, wire.Stdout)); got != "in ok\nout refused\ndevnull ok\n" {
		t.Fatalf("stdout %q", got)
	}
	// The frames are the contract's: nothing marks a sandboxed process.
	for _, l := range c.rawFrames("ws") {
		if strings.Contains(string(l), "sandbox") {
			t.Fatalf("frame %s", l)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Fatal("the child wrote outside its root")
	}

	// Read-only, and no network: a loopback server of the host is out of reach.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dial := `exec 3<>/dev/tcp/127.0.0.1/` + port + ` && echo connected || echo unreachable`
	script = `touch x 2>/dev/null || echo read-only; ` + dial
	for _, tc := range []struct {
		sandbox map[string]any
		want    string
	}{
		{map[string]any{"mode": "read-only"}, "read-only\nunreachable\n"},
		{map[string]any{"mode": "read-only", "network": true}, "read-only\nconnected\n"},
	} {
		c.resetFrames("ro")
		c.wantResult("process.spawn", mustJSON(map[string]any{
			"id": "ro", "command": "bash", "args": []string{"-c", script}, "cwd": dir, "sandbox": tc.sandbox,
		}), `{"success":true}`)
		if got := string(output(c.waitExit("ro"), wire.Stdout)); got != tc.want {
			t.Fatalf("%v: stdout %q, want %q", tc.sandbox, got, tc.want)
		}
	}
}

func TestSandboxedPipelineAndTerminal(t *testing.T) {
	requireSandbox(t)
	d := startDaemon(t, Config{})
	c := d.dial()
	dir := t.TempDir()
	sb := map[string]any{"mode": "workspace-write", "write": []string{dir}}
	c.wantResult("process.spawn", mustJSON(map[string]any{
		"id": "pl", "cwd": dir, "sandbox": sb,
		"pipeline": [][]string{{"sh", "-c", "echo a > a && cat a"}, {"sh", "-c", "cat; touch /b 2>/dev/null || echo refused"}},
	}), `{"success":true}`)
	if got := string(output(c.waitExit("pl"), wire.Stdout)); got != "a\nrefused\n" {
		t.Fatalf("pipeline stdout %q", got)
	}
	c.wantResult("process.spawn", mustJSON(map[string]any{
		"id": "tty", "command": "sh", "args": []string{"-c", "test -t 1 && touch t && touch /t 2>/dev/null || echo tty refused"},
		"cwd": dir, "tty": true, "sandbox": sb,
	}), `{"success":true}`)
	if got := string(output(c.waitExit("tty"), wire.Stdout)); got != "tty refused\r\n" {
		t.Fatalf("tty stdout %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "t")); err != nil {
		t.Fatal(err)
	}
}

func TestSandboxErrors(t *testing.T) {
	requireSandbox(t)
	d := startDaemon(t, Config{})
	c := d.dial()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	spawn := func(sb string) string {
		return `{"id":"x","command":"touch","args":[` + string(wire.QuoteID(marker)) + `],"sandbox":` + sb + `}`
	}
	c.wantError("process.spawn", spawn(`{"mode":"everything"}`), -32602, `sandbox: mode must be "read-only" or "workspace-write", got "everything"`)
	c.wantError("process.spawn", spawn(`{}`), -32602, `sandbox: mode must be "read-only" or "workspace-write", got ""`)
	c.wantError("process.spawn", spawn(`{"mode":"read-only","write":["/tmp"]}`), -32602, `sandbox: mode "read-only" takes no write roots (use "workspace-write")`)
	c.wantError("process.spawn", spawn(`{"mode":"workspace-write","write":[""]}`), -32602, `sandbox: empty write path`)
	c.wantError("process.spawn", spawn(`"read-only"`), -32602, "Invalid params")
	c.wantError("process.spawn", `{"sandbox":{"mode":"bad"},"command":"true"}`, -32602, "Process ID is required")

	missing := filepath.Join(dir, "missing")
	c.wantError("process.spawn", spawn(`{"mode":"workspace-write","write":[`+string(wire.QuoteID(missing))+`]}`), -32603,
		`spawn touch: sandbox: write root "`+missing+`": no such file or directory`)

	restore := sandbox.OverrideABI(-1)
	line := string(c.request("process.spawn", spawn(`{"mode":"read-only"}`)))
	restore()
	if !strings.Contains(line, `"code":-32603,"message":"sandbox: this kernel cannot enforce a sandbox (Landlock is unavailable: `) ||
		!strings.Contains(line, `); the process was not started"`) {
		t.Errorf("no Landlock: %s", line)
	}
	if sandbox.Probe().ABI < sandbox.MaxABI {
		// The kernel is taken for a newer one: the helper's strict
		// restriction fails, and the child never runs.
		restore := sandbox.OverrideABI(sandbox.MaxABI)
		line := string(c.request("process.spawn", spawn(`{"mode":"workspace-write","write":[`+string(wire.QuoteID(dir))+`]}`)))
		restore()
		if !strings.Contains(line, `"code":-32603,"message":"spawn touch: sandbox: landlock: missing kernel Landlock support`) {
			t.Errorf("unenforceable ABI: %s", line)
		}
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the child ran: %v", err)
	}
	// Nothing was registered under the id.
	if got := c.result("process.reattach", `{"id":"x"}`); !strings.Contains(got, `"found":false`) {
		t.Fatalf("reattach: %s", got)
	}
}
