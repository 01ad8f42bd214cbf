package gitcmd

import (
	"context"
	"strings"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// PushConfig is what push adds to Hardening. Push is the one command that
// uses a repository's configured remote, so its transports are let through
// again, but only file, ssh and https (not ext::, whose URL is a command
// line, nor a remote helper a config names with remote.<name>.vcs, nor
// plain git:// or http://). ssh is the ssh in PATH (the daemon's
// GIT_SSH_COMMAND still wins): core.sshCommand from any config is not run.
// Credential helpers and askpass stay off, so https needs credentials that
// take no program (a token in the URL, or none). No submodule is pushed.
var PushConfig = []string{
	"-c", "protocol.file.allow=always",
	"-c", "protocol.ssh.allow=always",
	"-c", "protocol.https.allow=always",
	"-c", "core.sshCommand=ssh",
	"-c", "push.recurseSubmodules=no",
}

// Push is git.push: branch (default: the one checked out in dir) to the
// branch of the same name on remote (default origin). Git's pre-push hook
// does not run (core.hooksPath); the remote's own hooks do, as on any push.
func Push(ctx context.Context, r Runner, dir, remote, branch string) (wire.GitPushResult, error) {
	if remote == "" {
		remote = "origin"
	}
	if err := NoOption("remote", remote); err != nil {
		return wire.GitPushResult{}, err
	}
	if err := NoOption("branch", branch); err != nil {
		return wire.GitPushResult{}, err
	}
	if branch == "" {
		ref, err := r.Git(ctx, dir, nil, "symbolic-ref", "-q", "--short", "HEAD")
		if err != nil {
			return wire.GitPushResult{}, err
		}
		if ref.ExitCode != 0 {
			return wire.GitPushResult{}, &Error{Command: "push", Msg: "HEAD is detached: name the branch to push (branch=)"}
		}
		branch = strings.TrimSpace(ref.Stdout)
	}
	// For a path remote, remote.<name>.receivepack names a program to run
	// on this machine: the repository's config does not get to choose it.
	// (A -c cannot override it: git keeps the first value it reads.)
	ref := "refs/heads/" + branch
	if _, err := run(ctx, r, dir, PushConfig, "push", "-q", "--no-verify", "--receive-pack=git-receive-pack",
		"--", remote, ref+":"+ref); err != nil {
		return wire.GitPushResult{}, err
	}
	return wire.GitPushResult{Success: true, Remote: remote, Branch: branch}, nil
}
