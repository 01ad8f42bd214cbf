package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
)

// run, sh and pipeline without stdin= have the spawn close the child's
// stdin (process.spawn.stdin.closed): over a socket daemon with the
// extension a recipe sends no process.stdin for them, against one without
// it one per command, and either way the commands read end-of-file. With
// stdin= the data is still written.
func TestRunSendsNoStdinRequest(t *testing.T) {
	t.Parallel()
	const noStdin = `
for i in range(20):
    run("true", echo=False)
print(repr(run("cat", echo=False).stdout))
print(repr(sh("read x || echo eof", echo=False).stdout))
print(repr(pipeline([["cat"], ["tr", "a-z", "A-Z"]], echo=False).stdout))
`
	const fed = `print(repr(run("cat", stdin="fed", echo=False).stdout))`
	for _, tc := range []struct {
		name     string
		disable  []string
		requests int // process.stdin requests the 23 commands without stdin= cost
	}{
		{"with the extension", nil, 0},
		{"without it", []string{wire.FeatureSpawnStdinClosed}, 23},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := daemonConfig(t)
			cfg.DisableFeatures = tc.disable
			sock, _ := socketDaemon(t, "tok", cfg)
			relay := faultproxy.Start(t, sock, faultproxy.Options{CountMethods: true})
			flags := []string{"--socket", relay.Path(), "--token-file", tokenFile(t, "tok"), "--no-journal"}

			o, _ := runStar(t, noStdin, flags...)
			o.expect(t, 0, `""`+"\n"+`"eof\n"`+"\n"+`""`+"\n") // print writes to stderr
			if n := relay.Requests("process.stdin"); n != tc.requests {
				t.Errorf("%d process.stdin requests for 23 commands without stdin, want %d", n, tc.requests)
			}
			if n := relay.Requests("process.spawn"); n != 23 {
				t.Errorf("%d process.spawn requests, want 23", n)
			}

			before := relay.Requests("process.stdin")
			o, _ = runStar(t, fed, flags...)
			o.expect(t, 0, `"fed"`)
			if relay.Requests("process.stdin") == before {
				t.Error("run with stdin= sent no process.stdin")
			}
		})
	}
}

// Against a daemon that can close no stdin at all (claustrum's own has
// neither extension), run fails before it starts the command, saying
// what the daemon lacks: a command started and then stopped for want of
// a close would have done its work, or half of it, for nothing.
func TestRunRefusedWhereNoStdinCanClose(t *testing.T) {
	t.Parallel()
	cfg := daemonConfig(t)
	cfg.DisableFeatures = []string{wire.FeatureSpawnStdinClosed, wire.FeatureStdinClose}
	sock, _ := socketDaemon(t, "tok", cfg)
	relay := faultproxy.Start(t, sock, faultproxy.Options{CountMethods: true})
	marker := filepath.Join(t.TempDir(), "ran")
	o, _ := runStar(t, fmt.Sprintf("run(\"touch\", [%q])\n", marker),
		"--socket", relay.Path(), "--token-file", tokenFile(t, "tok"), "--no-journal")
	o.expect(t, 1, "cannot start `touch", `needs the daemon extension "process.stdin.close"`)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
	if n := relay.Requests("process.spawn"); n != 0 {
		t.Errorf("%d process.spawn requests, want none", n)
	}
}
