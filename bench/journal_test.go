package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/procstat"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// journalCalls is how many run("true") the journal rows' recipe makes.
const journalCalls = 1000

// journalPairs is how many journaled and plain runs the rows with a
// target compare, pair by pair. The middle half of 15 pairs' ratios spanned
// about 0.98-1.09x on this 2-CPU host (2026-11-27), so the median of 15
// moved by about 0.03 from run to run, more than the target's margin. The
// median of 31 still moved by 0.02-0.04 between runs of the row minutes
// apart (1.013x to 1.056x on a quiet host, session 24), as wide as what
// it measures; 51 narrows that by another fifth, for about 2 minutes a
// row.
const journalPairs = 51

// journalRows measures what journaling a durable run costs: a recipe of
// 1,000 run("true") with and without its journal, interleaved in the
// same run, on the embedded daemon (--journal DIR against no flag) and on
// a socket daemon that keeps journals (no flag against --no-journal);
// each with the default group commit and with --journal-sync=always; and,
// reported without a target, the socket daemon reached over ssh. It
// reports the ratio and the journal's bytes per call.
func (e *env) journalRows(t *testing.T) []row {
	recipe := filepath.Join(e.dir, "true1000.star")
	os.WriteFile(recipe, []byte(fmt.Sprintf("for i in range(%d):\n    run(\"true\")\n", journalCalls)), 0o644)
	state := filepath.Join(e.dir, "jstate")
	d := e.startDaemon(t, "--state-dir", state)
	tokenFile := filepath.Join(e.dir, "jtoken")
	os.WriteFile(tokenFile, []byte(d.token+"\n"), 0o600)
	socket := []string{"--socket", d.socket, "--token-file", tokenFile}
	jdir := filepath.Join(e.dir, "journals")
	// sousRun times one run and appends to *cpu the CPU time it took: the
	// runner's (its children's too: the embedded daemon's commands), and
	// the socket daemon's own threads' meanwhile (not its commands'). The
	// rows report its ratio beside the target's: it says whether a wall
	// ratio is work the journal adds or waiting.
	sousRun := func(cpu *[]time.Duration, env []string, args ...string) func() time.Duration {
		return func() time.Duration {
			before := daemonCPU(t, d.cmd.Process.Pid)
			start := time.Now()
			cmd := exec.Command(e.bin, append([]string{"run", "-q"}, args...)...)
			cmd.Env = append(os.Environ(), env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("sous run %v: %v\n%s", args, err, out)
			}
			wall := time.Since(start)
			used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			if slices.Contains(args, "--socket") || slices.Contains(args, "--remote") {
				used += daemonCPU(t, d.cmd.Process.Pid) - before
			}
			*cpu = append(*cpu, used)
			return wall
		}
	}
	type journalCase struct {
		where      string
		plain, jnl []string
		journals   string
		env        []string
	}
	cases := []journalCase{
		{"embedded", []string{recipe}, []string{"--journal", jdir, recipe}, jdir, nil},
		{"embedded, --journal-sync=always", []string{recipe}, []string{"--journal", jdir, "--journal-sync=always", recipe}, jdir, nil},
		{"socket daemon", append([]string{"--no-journal", recipe}, socket...), append([]string{recipe}, socket...), filepath.Join(state, "runs"), nil},
		{"socket daemon, --journal-sync=always", append([]string{"--no-journal", recipe}, socket...),
			append([]string{"--journal-sync=always", recipe}, socket...), filepath.Join(state, "runs"), nil},
	}
	// The same daemon through OpenSSH on loopback (the ssh bridge), where
	// a record could not count as safe once written to a socket: reported,
	// no target.
	if _, err := os.Stat("/usr/sbin/sshd"); err == nil && os.Geteuid() == 0 {
		sshd := testutil.StartSSHD(t)
		remote := []string{"--remote", fmt.Sprintf("ssh://root@127.0.0.1:%d%s", sshd.Port, d.socket)}
		env := []string{"SOUS_SSH_COMMAND=" + sshd.Command, "SOUS_BRIDGE_CMD=" + e.bin + " daemon bridge --socket", "SOUS_TOKEN=" + d.token}
		cases = append(cases, journalCase{"over ssh (OpenSSH on loopback) to the socket daemon", append([]string{"--no-journal", recipe}, remote...),
			append([]string{recipe}, remote...), filepath.Join(state, "runs"), env})
	}
	var rows []row
	for _, c := range cases {
		os.RemoveAll(c.journals)
		// The 5% target is the default's, so its rows take the median
		// of journalPairs paired ratios: a whole run lasts a second, and
		// the machine drifts by more than 5% between runs.
		// --journal-sync=always buys a disk flush per effect and is
		// reported for what it costs.
		always, reported := strings.Contains(c.where, "always"), strings.Contains(c.where, "ssh")
		pairs := max(journalPairs, e.repeats)
		if always || reported {
			pairs = e.repeats
		}
		var cpuJ, cpuB []time.Duration
		ratios, tj, tb := pairedRatios(pairs, sousRun(&cpuJ, c.env, c.jnl...), sousRun(&cpuB, c.env, c.plain...))
		ratio := ratios[len(ratios)/2]
		cpuRatios := make([]float64, pairs)
		for i := range pairs {
			cpuRatios[i] = cpuJ[i].Seconds() / cpuB[i].Seconds()
		}
		slices.Sort(cpuRatios)
		target, ok := "<= 1.05x", ratio <= 1.05
		switch {
		case always:
			target, ok = "none: reported (a flush per effect)", true
		case reported:
			target, ok = "none: reported (the remote path)", true
		}
		rows = append(rows, row{
			figure:   fmt.Sprintf("a durable run of %d `run(\"true\")`, %s", journalCalls, c.where),
			baseline: "the same run not journaled",
			target:   target,
			result: fmt.Sprintf("%.3fx, the median of %d paired ratios, the middle half %.3f-%.3fx (%.0f vs %.0f µs a call; %s a call); CPU time (%s): %.3fx, the middle half %.3f-%.3fx",
				ratio, pairs, ratios[len(ratios)/4], ratios[len(ratios)*3/4],
				tj.Seconds()*1e6/journalCalls, tb.Seconds()*1e6/journalCalls, journalBytesPerCall(t, c.journals),
				cpuOf(c.where), cpuRatios[pairs/2], cpuRatios[pairs/4], cpuRatios[pairs*3/4]),
			ok: ok,
		})
	}
	return rows
}

// cpuOf says whose CPU time a row's CPU ratio counts.
func cpuOf(where string) string {
	switch {
	case strings.HasPrefix(where, "socket"):
		return "the runner's and the daemon's"
	case strings.Contains(where, "ssh"):
		return "the runner's with its ssh client's, and the daemon's; not sshd's or the bridge's"
	}
	return "the runner's with its commands'"
}

// daemonCPU is the CPU time a daemon's own threads used so far (not its
// children's), from /proc/PID/stat in clock ticks (10 ms here).
func daemonCPU(t *testing.T, pid int) time.Duration {
	st, err := procstat.Read(pid)
	if err != nil {
		t.Fatalf("daemon CPU: %v", err)
	}
	utime, ok1 := st.Int(14)
	stime, ok2 := st.Int(15)
	if !ok1 || !ok2 {
		t.Fatalf("daemon CPU: no utime or stime in /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux architecture Go runs on.
const clockTicks = 100

// journalBytesPerCall is the mean size of the journals in dir per call.
func journalBytesPerCall(t *testing.T, dir string) string {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	if len(paths) == 0 {
		t.Fatalf("no journal in %s", dir)
	}
	var total int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			total += fi.Size()
		}
	}
	return fmt.Sprintf("%d B", total/int64(len(paths))/journalCalls)
}
