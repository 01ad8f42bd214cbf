package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// TestSpawnRefusesTheIDOfARunningProcess: spawn with the id of a process
// of the same run that still runs fails, naming it and replace=True,
// instead of killing it behind the recipe's back (its handle's wait then
// failed). Before, the second spawn silently replaced the first.
func TestSpawnRefusesTheIDOfARunningProcess(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
a = spawn(["sleep", "30"], id="dup", echo=False)
print(a.pid)
spawn(["echo", "second"], id="dup")
print("not reached")
`)
	pid := firstLogInt(t, o)
	o.expect(t, 1, "main.star:4:6",
		fmt.Sprintf(`spawn: id "dup" is already running (pid %d); pass replace=True to kill and replace it`, pid))
	if strings.Contains(o.stderr, "not reached") || strings.Contains(o.stdout, "second") {
		t.Errorf("the second spawn went ahead:\nstdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	}
	waitGone(t, pid, 10*time.Second) // the run's end stops it, as ever
}

// TestSpawnReplaceKillsAndReplaces: replace=True keeps the daemon's rule
// (the old process is killed and its id taken), and an id whose process
// has exited is free without it.
func TestSpawnReplaceKillsAndReplaces(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
a = spawn(["sleep", "30"], id="dup", echo=False)
print(a.pid)
b = spawn(["echo", "new"], id="dup", replace=True, echo=False)
print(repr(b.wait().stdout))
c = spawn("true", id="done", echo=False)
c.wait()
d = spawn(["echo", "again"], id="done", echo=False)
print(repr(d.wait().stdout))
`)
	o.expect(t, 0)
	pid := firstLogInt(t, o)
	if want := fmt.Sprintf("%d\n\"new\\n\"\n\"again\\n\"\n", pid); o.stderr != want {
		t.Errorf("log %q, want %q", o.stderr, want)
	}
	waitGone(t, pid, 10*time.Second)
}

// TestSpawnRefusesAnotherClientsRunningID: the id of a process another
// client started on the daemon is refused too (the daemon's process.list
// says it runs), and that process goes on running. A daemon without
// process.list only has the run's own processes to check.
func TestSpawnRefusesAnotherClientsRunningID(t *testing.T) {
	t.Parallel()
	const token = "dup-token"
	sock, srv := socketDaemon(t, token, daemonConfig(t))
	theirs := spawnOnDaemon(t, sock, token, "theirs")
	o, _ := runStar(t, `
spawn(["echo", "mine"], id="theirs")
`, "--socket", sock, "--token-file", tokenFile(t, token))
	o.expect(t, 1, "main.star:2:6",
		fmt.Sprintf(`spawn: id "theirs" is already running (pid %d); pass replace=True to kill and replace it`, theirs.Pid))
	if pr := srv.Registry().Get("theirs"); pr == nil || !pr.Running() {
		t.Error("the other client's process was stopped")
	}

	cfg := daemonConfig(t)
	cfg.DisableFeatures = []string{wire.FeatureProcessList}
	sock, _ = socketDaemon(t, token, cfg)
	o, _ = runStar(t, `
a = spawn(["sleep", "30"], id="mine", echo=False)
print(a.pid)
spawn(["echo", "again"], id="mine")
`, "--socket", sock, "--token-file", tokenFile(t, token))
	o.expect(t, 1, "main.star:4:6",
		fmt.Sprintf(`spawn: id "mine" is already running (pid %d); pass replace=True`, firstLogInt(t, o)))
}

// spawnOnDaemon starts `sleep 30` as id through a client of the test's
// own, as another program using the daemon would; it is killed when the
// test ends.
func spawnOnDaemon(t *testing.T, sock, token, id string) *client.Proc {
	t.Helper()
	c := dialDaemon(t, sock, token)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: id, Command: "sleep", Args: []string{"30"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Kill(ctx, "KILL")
	})
	return p
}

// firstLogInt reads the int the recipe printed first.
func firstLogInt(t *testing.T, o outcome) int {
	t.Helper()
	first, _, _ := strings.Cut(o.stderr, "\n")
	n, err := strconv.Atoi(first)
	if err != nil {
		t.Fatalf("the recipe's first line is not a pid: %q\nstderr:\n%s", first, o.stderr)
	}
	return n
}
