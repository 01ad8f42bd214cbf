package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// keyedSpawn is process.spawn params for a shell script with a spawn key
// (process.spawn.key), asking for the pid and for gone notifications.
func keyedSpawn(id, key, script string, args ...string) string {
	return mustJSON(map[string]any{"id": id, "command": "sh", "args": append([]string{"-c", script, "sh"}, args...),
		"wantPid": true, "notifyGone": true, "spawnKey": key})
}

func spawnResult(t *testing.T, c *rawClient, params string) wire.SpawnResult {
	t.Helper()
	var res wire.SpawnResult
	if err := json.Unmarshal([]byte(c.result("process.spawn", params)), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// runCount is how many times a script that appends "run" to path ran.
func runCount(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

// TestSpawnKeyAnswersAgain: a spawn with the key of a process the daemon
// has under that id starts nothing; it answers with that process and
// streams its frames from the first, on another connection too, running or
// exited. A different key, or none, replaces it as the contract says.
func TestSpawnKeyAnswersAgain(t *testing.T) {
	d := startDaemon(t, Config{})
	runs := filepath.Join(t.TempDir(), "runs")
	script := `echo run >> "$1"; echo started; read x; echo "got $x"`

	a := d.dial()
	first := spawnResult(t, a, keyedSpawn("k", "key-1", script, runs))
	a.waitFrames("k", 1)

	// Running: another connection's resend gets the same process, its
	// output from seq 1, and may write its stdin.
	b := d.dial()
	again := spawnResult(t, b, keyedSpawn("k", "key-1", script, runs))
	if again != first {
		t.Fatalf("the resend answered %+v, the spawn %+v", again, first)
	}
	b.result("process.stdin", mustJSON(map[string]any{"id": "k", "data": wire.EncodeBase64([]byte("hi\n"))}))
	for _, c := range []*rawClient{a, b} {
		fs := c.waitExit("k")
		checkSeqs(t, fs, 1)
		if out := string(output(fs, wire.Stdout)); out != "started\ngot hi\n" {
			t.Errorf("output %q", out)
		}
	}
	if n := runCount(t, runs); n != 1 {
		t.Fatalf("the script ran %d times, want once", n)
	}

	// Exited: the resend answers how it ended, not a new run.
	c := d.dial()
	if late := spawnResult(t, c, keyedSpawn("k", "key-1", script, runs)); late != first {
		t.Fatalf("the resend after the exit answered %+v, the spawn %+v", late, first)
	}
	fs := c.waitExit("k")
	checkSeqs(t, fs, 1)
	if code := exitCodeOf(fs); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if n := runCount(t, runs); n != 1 {
		t.Fatalf("the script ran %d times after the resend of an exited spawn, want once", n)
	}

	// Another key replaces, running or not; so does a spawn without one.
	c.resetFrames("k")
	newer := spawnResult(t, c, keyedSpawn("k", "key-2", script, runs))
	if newer.Pid == first.Pid && newer.StartTime == first.StartTime {
		t.Fatal("a spawn with another key answered with the old process")
	}
	c.waitFrames("k", 1) // it ran, and c follows it
	plain := spawnResult(t, a, mustJSON(map[string]any{"id": "k", "command": "sh", "args": []string{"-c", script, "sh", runs},
		"wantPid": true}))
	if plain.StartTime == newer.StartTime {
		t.Fatal("a spawn without a key answered with the running process")
	}
	c.waitFor("gone", 10*time.Second, func() bool {
		return slices.ContainsFunc(c.all, func(l []byte) bool { return bytes.Contains(l, []byte(`"reason":"replaced"`)) })
	})
	for deadline := time.Now().Add(10 * time.Second); runCount(t, runs) < 3 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	a.request("process.killAndWait", `{"id":"k","signal":"KILL"}`)
	if n := runCount(t, runs); n != 3 {
		t.Fatalf("the script ran %d times, want 3", n)
	}
}

// TestSpawnKeyConcurrent: spawns of one id with one key, sent at once on
// several connections, start one process; all answer with it.
func TestSpawnKeyConcurrent(t *testing.T) {
	d := startDaemon(t, Config{})
	dir := t.TempDir()
	const conns = 4
	clients := make([]*rawClient, conns)
	for i := range clients {
		clients[i] = d.dial()
	}
	for round := range 10 {
		id := fmt.Sprintf("c%d", round)
		runs := filepath.Join(dir, id)
		params := keyedSpawn(id, "key-"+id, `echo run >> "$1"`, runs)
		results := make([]wire.SpawnResult, conns)
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = spawnResult(t, c, params)
			}()
		}
		wg.Wait()
		for i := range clients {
			if results[i] != results[0] {
				t.Fatalf("round %d: connection %d got %+v, connection 0 %+v", round, i, results[i], results[0])
			}
		}
		for _, c := range clients {
			if code := exitCodeOf(c.waitExit(id)); code != 0 {
				t.Fatalf("round %d: exit code %d", round, code)
			}
		}
		if n := runCount(t, runs); n != 1 {
			t.Fatalf("round %d: the script ran %d times, want once", round, n)
		}
	}
}

// TestSpawnKeyDisabled: a daemon without the extension neither advertises
// it nor honours it: a spawn with the same key replaces, as claustrum's.
func TestSpawnKeyDisabled(t *testing.T) {
	d := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureSpawnKey}})
	c := d.dial()
	if caps := c.result("server.capabilities", ""); strings.Contains(caps, wire.FeatureSpawnKey) {
		t.Fatalf("capabilities list the disabled feature: %s", caps)
	}
	first := spawnResult(t, c, keyedSpawn("d", "same", "sleep 10"))
	second := spawnResult(t, c, keyedSpawn("d", "same", "sleep 10"))
	if first == second {
		t.Fatal("the disabled extension answered with the same process")
	}
	c.request("process.killAndWait", `{"id":"d","signal":"KILL"}`)
}
