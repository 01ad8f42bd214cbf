package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sessionTurns is how many sessions the sessions row runs, one turn each,
// and sessionLimit how many at once.
const sessionTurns, sessionLimit = 100, 20

// sessions is the row of agent fan-out: 100 sessions of the real Claude
// Code CLI against the scripted model, one turn each, through
// parallel(limit=20). It reports what sous itself spends per turn (its
// own user and system CPU: the recipe, the embedded daemon, the
// stream-json engine, the event bus) against what the CLI processes
// spend, which sous cannot make cheaper. The sessions of finished turns
// are closed as new ones start, so about 20 CLIs live at once.
func (e *env) sessions(t *testing.T) row {
	cli, home, env := scriptedCLI(t)
	recipe := filepath.Join(e.dir, "sessions.star")
	src := fmt.Sprintf(`
cli = json.decode(args["cli"])
sessions = []
pendings = []
def start(i):
    if i >= %[2]d:
        # The turn of item i-%[2]d has ended or soon will: close its session.
        pendings[i - %[2]d].wait()
        sessions[i - %[2]d].close()
    s = sdk.session(cwd = args["dir"], cli = cli, model = "claude-sonnet-4-6")
    sessions.append(s)
    p = s.start("turn %%d" %% i)
    pendings.append(p)
    return p
turns = parallel(list(range(%[1]d)), start, limit = %[2]d)
if len([t for t in turns if t.ok]) != %[1]d:
    fail("not every turn succeeded")
`, sessionTurns, sessionLimit)
	if err := os.WriteFile(recipe, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cliArg, _ := json.Marshal(cli)
	// A repeat takes two minutes of both CPUs; CPU time varies less than
	// wall time, so three tell enough.
	var owns, kids []time.Duration
	for range min(e.repeats, 3) {
		own, children := sousCPU(t, exec.Command(e.bin, "run", recipe, "-a", "dir="+home, "-a", "cli="+string(cliArg)), env)
		owns, kids = append(owns, own), append(kids, children)
	}
	own, children := median(owns)/sessionTurns, median(kids)/sessionTurns
	ratio := own.Seconds() / children.Seconds()
	return row{figure: fmt.Sprintf("%d concurrent scripted sessions through `parallel(limit=%d)`: sous's own CPU per turn", sessionTurns, sessionLimit),
		baseline: "the CLI processes' CPU per turn", target: "under 10% of it",
		result: fmt.Sprintf("%.1f ms vs %.0f ms (%.1f%%)", own.Seconds()*1000, children.Seconds()*1000, ratio*100), ok: ratio < 0.10}
}

// sousCPU runs cmd and returns the CPU time (user and system) of the sous
// process itself and that of the children it reaped (the CLIs, the
// processes the recipe ran), apart: wait4's rusage of sous counts both
// together, so sous's own is sampled from /proc/PID/stat while it runs
// (its last sample, a few milliseconds before it exits) and the children's
// is the rest.
func sousCPU(t *testing.T, cmd *exec.Cmd, env []string) (own, children time.Duration) {
	t.Helper()
	cmd.Env = env
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if o, ok := procOwnCPU(cmd.Process.Pid); ok {
				mu.Lock()
				own = o
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	close(stop)
	<-sampled
	if err != nil {
		t.Fatalf("sous run: %v\n%s", err, out)
	}
	total := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	mu.Lock()
	defer mu.Unlock()
	return own, total - own
}

// procOwnCPU reads utime + stime of pid from /proc/PID/stat: its own CPU,
// without its children's (cutime, cstime).
func procOwnCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command's closing parenthesis start at the
	// state, field 3; utime and stime are fields 14 and 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const userHZ = 100 // the kernel's clock ticks per second in /proc, on every Linux
	return time.Duration(utime+stime) * time.Second / userHZ, true
}
