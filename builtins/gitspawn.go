package builtins

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/gitcmd"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

// spawnGit runs git through process.spawn on a daemon that lacks the git.*
// method a builtin needs: the command lines of package gitcmd, with its
// hardening on the command line and its environment, as the daemon would
// run them itself. The check of the worktree's .git that the daemon makes
// before its own git runs has no equivalent here.
type spawnGit struct{ d runtime.Daemon }

// gitOutputCap bounds what one git run may print before it is cut off
// (a diff of a huge tree): it is held in memory.
const gitOutputCap = 64 << 20

func (s spawnGit) Git(ctx context.Context, dir string, config []string, args ...string) (gitcmd.Output, error) {
	argv := append(append(append([]string(nil), gitcmd.Hardening...), config...), args...)
	env := map[string]*string{}
	for _, kv := range gitcmd.Env {
		name, val, _ := strings.Cut(kv, "=")
		env[name] = &val
	}
	for _, name := range gitcmd.RepoLocalEnv {
		env[name] = nil // unset (the client emulates it on an older daemon)
	}
	var mu sync.Mutex
	var stdout, stderr strings.Builder
	over := false
	h := func(f *wire.Frame) {
		mu.Lock()
		defer mu.Unlock()
		var b *strings.Builder
		switch f.Stream {
		case wire.Stdout:
			b = &stdout
		case wire.Stderr:
			b = &stderr
		default:
			return
		}
		if b.Len()+len(f.Data) > gitOutputCap {
			over = true
			return
		}
		b.Write(f.Data)
	}
	spec := client.SpawnSpec{ID: "sous-git-" + uuid.NewString(), Command: "git", Args: argv, Cwd: dir, Env: env}
	p, err := s.d.Spawn(ctx, spec, h)
	if err != nil {
		if why, refused := client.SpawnRefused(err, "git"); refused {
			return gitcmd.Output{}, fmt.Errorf("cannot start git: %s", why)
		}
		return gitcmd.Output{}, err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gitKillWait)
		defer cancel()
		_, _ = p.KillAndWait(kctx, "TERM", gitKillWait, true) // best effort: ctx's error is the answer
		return gitcmd.Output{}, fmt.Errorf("git %s: %w", args[0], ctx.Err())
	}
	code, ok := p.Exited()
	if !ok {
		return gitcmd.Output{}, fmt.Errorf("git %s: following the process failed: %v", args[0], p.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	if over {
		return gitcmd.Output{}, fmt.Errorf("git %s: printed more than %d bytes", args[0], gitOutputCap)
	}
	return gitcmd.Output{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: code}, nil
}
