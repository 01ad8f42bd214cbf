package builtins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// TestInterruptEndsAgentSessions interrupts a run (as Ctrl-C does) while a
// session's turn waits for the model, on a socket daemon whose processes
// outlive their clients: when Run returns, the CLI is gone.
func TestInterruptEndsAgentSessions(t *testing.T) {
	t.Parallel()
	cli := claudecli.Find(t, claudecli.Latest)
	hold := make(chan struct{})
	defer close(hold)
	arrived := make(chan struct{})
	var once sync.Once
	api, err := fakemodel.Start(fakemodel.Options{Func: func(*fakemodel.Request, int) fakemodel.Reply {
		once.Do(func() { close(arrived) })
		return fakemodel.Reply{Blocks: []fakemodel.Block{fakemodel.TextBlock("never")}, Hold: hold}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()

	sock, srv := daemontest.ServeUnix(t, daemon.Config{Token: "tok", ShutdownGrace: time.Second, Env: []string{"PATH=" + os.Getenv("PATH")}})

	cliJSON, _ := json.Marshal(cli)
	envJSON, _ := json.Marshal(claudecli.Env(t.TempDir(), api.URL()))
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), env = json.decode(args["env"]))
s.send("hold on")
`})
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- runtime.Run(ctx, runtime.Options{
			Recipe: filepath.Join(dir, "main.star"), Args: map[string]string{"dir": dir, "cli": string(cliJSON), "env": string(envJSON)},
			Stdout: &bytes.Buffer{}, Stderr: &stderr, Table: DefaultTable(),
			Host: client.Target{URL: "unix://" + sock, Token: "tok"},
		})
	}()
	select {
	case <-arrived:
	case err := <-done:
		t.Fatalf("the run ended before its turn reached the model: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("the turn never reached the model")
	}
	cancel(&runtime.Interrupt{Signal: syscall.SIGINT, Code: 130})
	select {
	case err := <-done:
		var ee *runtime.ExitError
		if !errors.As(err, &ee) || ee.Code != 130 {
			t.Errorf("Run = %v, want exit code 130", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end after the interrupt")
	}
	procs := srv.Registry().List()
	if len(procs) != 1 {
		t.Fatalf("%d processes on the daemon, want the CLI", len(procs))
	}
	if procs[0].Running() {
		t.Errorf("the CLI %s still runs after the interrupted run returned", procs[0].ID)
	}
}
