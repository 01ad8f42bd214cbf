package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// spawnExit times process.spawn of /bin/true to its exit frame, n in a
// loop: through the embedded daemon (what a recipe's spawn takes) and
// through a socket daemon with a Go protocol client (daemon/client over
// the Unix socket), against Python's subprocess.run(['/bin/true']) and Go's
// os/exec Run, each a loop of n timed inside its own process (the
// interpreter's start is not counted). The four loops alternate.
func (e *env) spawnExit(t *testing.T) row {
	srv, err := daemon.New(daemon.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	embedded := client.Embedded(srv)
	defer embedded.Close()
	d := e.startDaemon(t)
	ctx := context.Background()
	socket, err := client.DialUnix(ctx, d.socket, d.token, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer socket.Close()
	const n = 200
	i := 0
	viaDaemon := func(c *client.Client) func() time.Duration {
		return func() time.Duration {
			start := time.Now()
			for range n {
				i++
				p, err := c.Spawn(ctx, client.SpawnSpec{ID: "t" + strconv.Itoa(i), Command: "/bin/true"}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			return time.Since(start)
		}
	}
	osExec := func() time.Duration {
		start := time.Now()
		for range n {
			if err := exec.Command("/bin/true").Run(); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start)
	}
	python := testutil.FastestPython(t)
	pyLoop := func() time.Duration {
		script := fmt.Sprintf("import subprocess,time\nt=time.perf_counter()\nfor _ in range(%d): subprocess.run(['/bin/true'])\nprint(time.perf_counter()-t)", n)
		out, err := exec.Command(python, "-c", script).Output()
		if err != nil {
			t.Fatalf("python3: %v", err)
		}
		s, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			t.Fatalf("python3 printed %q: %v", out, err)
		}
		return time.Duration(s * float64(time.Second))
	}
	if python == "" {
		pyLoop = func() time.Duration { return 0 }
	}
	var py, goExec, emb, sock []time.Duration
	for range e.repeats {
		py = append(py, pyLoop())
		goExec = append(goExec, osExec())
		emb = append(emb, viaDaemon(embedded)())
		sock = append(sock, viaDaemon(socket)())
	}
	ms := func(ds []time.Duration) float64 { return median(ds).Seconds() * 1000 / n }
	r := row{figure: "process spawn of `/bin/true` to its exit frame, " + strconv.Itoa(n) + " in a loop: the embedded daemon, and a Go protocol client over the Unix socket",
		baseline: "Python's `subprocess.run(['/bin/true'])` in a loop (and Go's `os/exec` Run)", target: "at most 1.2x Python"}
	if python == "" {
		r.result = fmt.Sprintf("python3 not found; embedded %.2f ms, socket %.2f ms, os/exec %.2f ms each", ms(emb), ms(sock), ms(goExec))
		return r
	}
	re, rs := ms(emb)/ms(py), ms(sock)/ms(py)
	r.result = fmt.Sprintf("embedded %.2fx, socket %.2fx (%.2f and %.2f vs %.2f ms each); os/exec %.2f ms (%.2fx Python)",
		re, rs, ms(emb), ms(sock), ms(py), ms(goExec), ms(goExec)/ms(py))
	r.ok = re <= 1.2 && rs <= 1.2
	return r
}
