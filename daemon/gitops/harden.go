package gitops

import (
	"context"
	"fmt"

	"github.com/seed5ad92d46/sous/daemon/gitcmd"
)

// A repository's own config and files are not trusted. An agent allowed to
// write inside a worktree (and nothing else) can put a git dir there, point
// the worktree's .git at it, and fill its config with settings that name
// programs: the next git the daemon runs in that directory would run them
// as the daemon's user. So every git the daemon runs gets these settings on
// its command line, where they beat every config file; git passes them on
// to the gits it starts itself (in GIT_CONFIG_PARAMETERS), such as the
// checkout under `worktree add`.
//
// What the daemon's commands (rev-parse, status, for-each-ref, config,
// symbolic-ref, show-ref, check-ref-format, hash-object, commit-tree,
// branch -D, worktree add/list/remove/prune) could otherwise run:
//
//   - core.fsmonitor: a program run on every index refresh (status,
//     worktree add's checkout). "" is off for git before 2.36, where the
//     value is a hook path, and after, where it is also a boolean.
//   - hooks: post-checkout (worktree add), reference-transaction (branch
//     -D, worktree add -b), post-index-change. No hook can exist under
//     /dev/null. git 2.54's hooks named in config (hook.<name>.command)
//     are not reached by core.hooksPath; see guardArgs.
//   - filter drivers (filter.<name>.clean, .smudge, .process): run by
//     status on files whose stat data changed, and by the checkout of
//     worktree add, for the paths the attributes (the repository's own
//     .gitattributes and info/attributes) assign to them. A -c cannot
//     name every driver, so guardArgs lists those the repository defines.
//   - transports: a partial clone fetches missing objects on demand, which
//     runs remote.<name>.uploadpack (a local program for a path remote),
//     core.sshCommand, core.askPass and credential helpers, all of which a
//     repository's config can set. protocol.allow=never refuses every
//     transport, so the daemon's git never touches the network (a
//     worktree_create in a partial clone whose checkout needs missing
//     objects fails instead); GIT_NO_LAZY_FETCH (git 2.45+) says the same.
//   - submodules: status recurses into a submodule with a git of its own,
//     under the submodule's config, whose filter drivers guardArgs does
//     not see; Status asks for --ignore-submodules=dirty so that no git
//     runs in a submodule. status.submoduleSummary and submodule.recurse
//     would start more.
//   - programs none of these commands run today, neutralised so that
//     adding a command does not open a hole: core.pager (also --no-pager
//     and GIT_PAGER), core.editor, sequence.editor, diff.external (a diff
//     command would also need --no-ext-diff and --no-textconv, since
//     diff.<driver>.command and .textconv cannot be named here either),
//     gpg.program and gpg.<format>.program (commit-tree gets
//     --no-gpg-sign), gpg.ssh.defaultKeyCommand, core.alternateRefsCommand,
//     and automatic gc/maintenance, which starts gits of its own.
//
// Settings from the system and global config (and the operator's
// GIT_CONFIG_PARAMETERS) are the machine owner's, not the repository's, so
// GIT_CONFIG_NOSYSTEM and GIT_ATTR_NOSYSTEM are left alone: a filter the
// user installed globally (git-lfs) keeps working. Hooks are off whatever
// defines them: the daemon's worktree operations are not the user's own
// checkouts, and hooks are side effects no method needs.
//
// The list itself is gitcmd.Hardening (with --no-pager), shared with the
// builtins' fallback that runs git through process.spawn.
var hardening = gitcmd.Hardening

// hardenedEnv is added to every git's environment for the same reason as
// hardening: GIT_NO_LAZY_FETCH keeps a partial clone from fetching.
var hardenedEnv = []string{"GIT_NO_LAZY_FETCH=1"}

// guardArgs returns the -c settings that switch off the programs dir's own
// config names where no fixed setting can: the filter drivers the
// repository (its config, config.worktree, and files they include) defines,
// and config-named hooks from any scope. Commands that run filters (status,
// worktree add, worktree remove's own status) are given them.
//
// The config is read by `git config` just before the command runs, so a
// driver added in between is not covered; the checks of checkLink keep
// planted git dirs out of worktrees in the first place.
func (g *Git) guardArgs(ctx context.Context, dir string) ([]string, error) {
	out, err := g.run(ctx, dir, gitcmd.GuardQuery...)
	if exitCode(err) == 1 { // nothing set
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the repository's filter and hook settings: %w", err)
	}
	return gitcmd.ParseGuard(out)
}

// runGuarded runs git in dir with guardArgs for dir: for the commands that
// run filter drivers.
func (g *Git) runGuarded(ctx context.Context, dir string, args ...string) (string, error) {
	guard, err := g.guardArgs(ctx, dir)
	if err != nil {
		return "", err
	}
	return g.exec(ctx, invocation{dir: dir, config: guard}, args...)
}
