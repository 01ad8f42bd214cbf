package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/runlog"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// listRuns is run.list's answer as summaries.
func listRuns(t *testing.T, c *rawClient) []wire.RunSummary {
	t.Helper()
	var r wire.RunListResult
	if err := json.Unmarshal([]byte(c.result("run.list", `{}`)), &r); err != nil {
		t.Fatal(err)
	}
	return r.Runs
}

// waitState waits until run.list says run is in state.
func waitState(t *testing.T, c *rawClient, run, state string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		runs := listRuns(t, c)
		if len(runs) == 1 && runs[0].Run == run && runs[0].State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never %s: %+v", run, state, runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunJournalLeaseAndLock: the connection that created a run's journal
// holds it; a resent append is applied once; another client cannot take
// it over until that connection goes, and then the first lease is lost.
func TestRunJournalLeaseAndLock(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	d := startDaemon(t, Config{StateDir: state})
	runner, other := d.dial(), d.dial()
	head := `{"lease":"L1","head":{"k":"run","run":"r1","recipe":"/x.star","at":"2026-11-26T20:00:00Z"}}`
	runner.wantResult("run.create", head, `{"success":true}`)
	runner.wantResult("run.create", head, `{"success":true}`) // a resend
	other.wantError("run.create", strings.Replace(head, "L1", "L9", 1), wire.CodeRunExists, "run r1: the daemon has a journal of that run already")
	app := `{"run":"r1","lease":"L1","at":1,"records":[{"k":"call","seq":1,"fn":"run","call":"effect"},{"k":"answer","seq":1}]}`
	runner.wantResult("run.append", app, `{"count":3}`)
	runner.wantResult("run.append", app, `{"count":3}`) // applied before the drop, resent after it
	runner.wantResult("run.append", `{"run":"r1","lease":"L1","at":2,"records":[{"k":"answer","seq":1},{"k":"print"}],"sync":true}`, `{"count":4}`)
	runner.wantError("run.append", `{"run":"r1","lease":"L1","at":7,"records":[]}`, wire.CodeInvalidParams, "run.append: at 7, but the journal holds 4 records")
	runner.wantError("run.append", `{"run":"r1","lease":"L1","at":4,"records":[{"k":"print"},[1]]}`, wire.CodeInvalidParams, "run.append: record 2 is not a JSON object")
	waitState(t, other, "r1", runlog.StateRunning)
	other.wantError("run.open", `{"run":"r1","lease":"L2"}`, wire.CodeRunBusy, "run r1: its runner is still alive (it holds the journal's lock)")
	other.wantError("run.append", `{"run":"r1","lease":"L2","at":4,"records":[{"k":"print"}]}`, wire.CodeRunLeaseLost,
		"run r1: the lease is not the run's: another client took the run over (or the daemon restarted)")
	other.wantError("run.open", `{"run":"nope","lease":"L2"}`, wire.CodeRunUnknown, "run nope: no journal on this daemon")

	// The runner's connection goes: the run is free at once.
	runner.nc.Close()
	waitState(t, other, "r1", runlog.StateResumable)
	var opened wire.RunOpenResult
	if err := json.Unmarshal([]byte(other.result("run.open", `{"run":"r1","lease":"L2"}`)), &opened); err != nil {
		t.Fatal(err)
	}
	if kinds := recordKinds(opened.Records); kinds != "run call answer print" {
		t.Errorf("records %s", kinds)
	}
	// The first runner, reconnecting, presents its lease: lost.
	back := d.dial()
	back.wantError("run.append", `{"run":"r1","lease":"L1","at":4,"records":[{"k":"print"}]}`, wire.CodeRunLeaseLost,
		"run r1: the lease is not the run's: another client took the run over (or the daemon restarted)")
	other.wantResult("run.append", `{"run":"r1","lease":"L2","at":4,"records":[{"k":"end","status":"ok"}]}`, `{"count":5}`)
	other.wantResult("run.close", `{"run":"r1","lease":"L2"}`, `{"success":true}`)
	other.wantResult("run.close", `{"run":"r1","lease":"L2"}`, `{"success":true}`)
	if runs := listRuns(t, back); len(runs) != 1 || runs[0].State != runlog.StateFinished || runs[0].Steps != 1 || runs[0].Recipe != "/x.star" {
		t.Errorf("run.list: %+v", runs)
	}
	if _, err := os.Stat(filepath.Join(state, "runs", "r1.journal")); err != nil {
		t.Errorf("the journal is not under the state dir: %v", err)
	}
}

// TestRunJournalReconnectKeepsTheRun: the runner's lease re-takes the
// journal on a new connection when no one took the run over.
func TestRunJournalReconnectKeepsTheRun(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{StateDir: t.TempDir()})
	runner := d.dial()
	runner.wantResult("run.create", `{"lease":"L1","head":{"k":"run","run":"r2"}}`, `{"success":true}`)
	runner.nc.Close()
	again := d.dial()
	again.wantResult("run.append", `{"run":"r2","lease":"L1","at":1,"records":[{"k":"print"}]}`, `{"count":2}`)
	waitState(t, again, "r2", runlog.StateRunning)
	other := d.dial()
	other.wantError("run.open", `{"run":"r2","lease":"L2"}`, wire.CodeRunBusy, "run r2: its runner is still alive (it holds the journal's lock)")
}

// TestRunJournalOlderConnectionTakesNothingBack: the runner reconnected
// before the daemon saw its old connection go; a request the old one
// still carried is applied but does not take the run back, so the
// runner's run.close on the new connection succeeds.
func TestRunJournalOlderConnectionTakesNothingBack(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{StateDir: t.TempDir()})
	old := d.dial()
	old.wantResult("run.create", `{"lease":"L1","head":{"k":"run","run":"r4"}}`, `{"success":true}`)
	again := d.dial() // the reconnect; old is still open for the daemon
	again.wantResult("run.append", `{"run":"r4","lease":"L1","at":1,"records":[{"k":"print"}]}`, `{"count":2}`)
	old.wantResult("run.append", `{"run":"r4","lease":"L1","at":2,"records":[{"k":"end","status":"ok"}]}`, `{"count":3}`)
	again.wantResult("run.close", `{"run":"r4","lease":"L1"}`, `{"success":true}`)
	waitState(t, again, "r4", runlog.StateFinished)
}

// TestRunJournalTornTailOnTheDaemon: a journal cut at any byte past its
// run record is opened with the torn record dropped and cut off.
func TestRunJournalTornTailOnTheDaemon(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	d := startDaemon(t, Config{StateDir: state})
	c := d.dial()
	c.wantResult("run.create", `{"lease":"L1","head":{"k":"run","run":"r3"}}`, `{"success":true}`)
	c.wantResult("run.append", `{"run":"r3","lease":"L1","at":1,"records":[{"k":"call","seq":1,"fn":"run"},{"k":"answer","seq":1,"value":{"t":"str","v":"a long enough answer"}}]}`, `{"count":3}`)
	c.wantResult("run.close", `{"run":"r3","lease":"L1"}`, `{"success":true}`)
	path := filepath.Join(state, "runs", "r3.journal")
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := len(full) - 7 // inside the answer
	if err := os.WriteFile(path, full[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	var opened wire.RunOpenResult
	if err := json.Unmarshal([]byte(c.result("run.open", `{"run":"r3","lease":"L2"}`)), &opened); err != nil {
		t.Fatal(err)
	}
	if kinds := recordKinds(opened.Records); kinds != "run call" {
		t.Errorf("records %s", kinds)
	}
	c.wantResult("run.append", `{"run":"r3","lease":"L2","at":2,"records":[{"k":"answer","seq":1}]}`, `{"count":3}`)
	c.wantResult("run.close", `{"run":"r3","lease":"L2"}`, `{"success":true}`)
	data, _ := os.ReadFile(path)
	recs, good, err := runlog.Decode(data)
	if err != nil || good != len(data) || recordKinds(recs) != "run call answer" {
		t.Errorf("after the append: %v, %d of %d bytes, %s", err, good, len(data), recordKinds(recs))
	}
}

// TestRunJournalNeedsAStateDir: without a state dir the daemon neither
// advertises the extension nor answers its methods.
func TestRunJournalNeedsAStateDir(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	if caps := c.result("server.capabilities", ``); strings.Contains(caps, "run.") {
		t.Errorf("capabilities without a state dir: %s", caps)
	}
	c.wantError("run.list", `{}`, wire.CodeMethodNotFound, "Unknown method: run.list")
}

func recordKinds(recs []wire.RunRecord) string {
	var k []string
	for _, r := range recs {
		k = append(k, r.Kind)
	}
	return strings.Join(k, " ")
}

// TestRunJournalLateRequestAfterClose: a request a cut connection still
// carried, handled after the runner closed the run on its new connection,
// is applied (a duplicate adds nothing) but takes the run no more, and
// neither does one of a connection the daemon saw close: the next
// run.open is not refused as busy. (The runner's Close waits for every
// append's answer, so such a request can only be a duplicate.)
func TestRunJournalLateRequestAfterClose(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	d := startDaemon(t, Config{StateDir: state})
	old, cur := d.dial(), d.dial()
	old.wantResult("run.create", `{"lease":"L1","head":{"k":"run","run":"r5"}}`, `{"success":true}`)
	old.wantResult("run.append", `{"run":"r5","lease":"L1","at":1,"records":[{"k":"call","seq":1,"fn":"run"}]}`, `{"count":2}`)
	// The runner reconnected: its lease takes the run on the new connection.
	cur.wantResult("run.append", `{"run":"r5","lease":"L1","at":1,"records":[{"k":"call","seq":1,"fn":"run"}]}`, `{"count":2}`)
	cur.wantResult("run.close", `{"run":"r5","lease":"L1"}`, `{"success":true}`)
	// The old connection, not seen closed yet, delivers a late resend.
	old.wantResult("run.append", `{"run":"r5","lease":"L1","at":1,"records":[{"k":"call","seq":1,"fn":"run"}]}`, `{"count":2}`)
	other := d.dial()
	var opened wire.RunOpenResult
	if err := json.Unmarshal([]byte(other.result("run.open", `{"run":"r5","lease":"L2"}`)), &opened); err != nil {
		t.Fatal(err)
	}
	if kinds := recordKinds(opened.Records); kinds != "run call" {
		t.Errorf("records %s, want the head and one call", kinds)
	}
}
