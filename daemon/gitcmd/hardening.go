package gitcmd

import (
	"context"
	"fmt"
	"strings"
)

// Hardening goes on the command line of every git sous runs, before the
// command, where it beats every config file. docs of daemon/gitops
// (harden.go) say what each setting keeps a repository's config from
// running; git passes them on to the gits it starts (GIT_CONFIG_PARAMETERS).
var Hardening = []string{
	"--no-pager",
	"-c", "core.fsmonitor=",
	"-c", "core.hooksPath=/dev/null",
	"-c", "protocol.allow=never",
	"-c", "core.sshCommand=",
	"-c", "core.askPass=",
	"-c", "credential.helper=", // "" empties the list of helpers
	"-c", "submodule.recurse=false",
	"-c", "status.submoduleSummary=false",
	"-c", "core.pager=cat",
	"-c", "core.editor=true",
	"-c", "sequence.editor=true",
	"-c", "diff.external=",
	"-c", "gpg.program=",
	"-c", "gpg.openpgp.program=",
	"-c", "gpg.x509.program=",
	"-c", "gpg.ssh.program=",
	"-c", "gpg.ssh.defaultKeyCommand=",
	"-c", "core.alternateRefsCommand=",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
}

// Env is added to every git's environment: messages in the C locale (they
// are matched and shown), no prompt or pager that could block, no optional
// locks (a query never contends with the user's git on index.lock), and no
// lazy fetch in a partial clone (hardening forbids the transport).
var Env = []string{
	"LC_ALL=C",
	"LANGUAGE=C",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_PAGER=cat",
	"PAGER=cat",
	"GIT_OPTIONAL_LOCKS=0",
	"GIT_NO_LAZY_FETCH=1",
}

// RepoLocalEnv are the variables that point git at a particular
// repository, object store or index: a daemon started from a git hook
// inherits them, and they would make git act on the hook's repository.
var RepoLocalEnv = []string{
	"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
	"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
	"GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE", "GIT_NO_REPLACE_OBJECTS",
	"GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX",
	"GIT_SHALLOW_FILE", "GIT_QUARANTINE_PATH", "GIT_NAMESPACE",
}

// GuardQuery is the config query whose output ParseGuard reads: the
// filter and hook settings from every scope, with their scopes.
var GuardQuery = []string{"config", "--show-scope", "--name-only", "-z", "--get-regexp", `^(filter|hook)\.`}

// Guard runs GuardQuery in dir and returns ParseGuard's settings.
func Guard(ctx context.Context, r Runner, dir string) ([]string, error) {
	out, err := r.Git(ctx, dir, nil, GuardQuery...)
	if err != nil {
		return nil, err
	}
	switch out.ExitCode {
	case 0:
		return ParseGuard(out.Stdout)
	case 1: // nothing set
		return nil, nil
	}
	return nil, fmt.Errorf("read the repository's filter and hook settings: %w", failed("config", out))
}

// ParseGuard turns GuardQuery's output into the -c settings that switch
// off what no fixed setting can: the filter drivers the repository's own
// config defines (a -c cannot name every driver), and config-named hooks
// from any scope (core.hooksPath does not reach them). Filters from the
// system and global config and the command line are the machine owner's
// and are kept (git-lfs).
func ParseGuard(out string) ([]string, error) {
	var args []string
	seen := map[string]bool{}
	fields := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		scope, key := fields[i], fields[i+1]
		section, rest, _ := strings.Cut(key, ".")
		dot := strings.LastIndexByte(rest, '.')
		if dot < 0 {
			continue // "filter.x" names no driver setting
		}
		name := rest[:dot]
		var set []string
		switch {
		case section == "filter" && !trustedScope(scope):
			set = []string{"clean=", "smudge=", "process=", "required=false"}
		case section == "hook":
			set = []string{"command=true", "enabled=false"}
		default:
			continue
		}
		if seen[section+"."+name] {
			continue
		}
		seen[section+"."+name] = true
		// -c splits at the first '=': a name holding one cannot be
		// given, and a driver left running is not an option.
		if strings.ContainsAny(name, "=\n") {
			return nil, fmt.Errorf("the repository's config names a %s %q that cannot be switched off", section, name)
		}
		for _, kv := range set {
			args = append(args, "-c", section+"."+name+"."+kv)
		}
	}
	return args, nil
}

// trustedScope reports whether config from scope is the machine owner's
// rather than the repository's: system and global files, and the command
// line (the operator's GIT_CONFIG_PARAMETERS).
func trustedScope(scope string) bool {
	switch scope {
	case "system", "global", "command":
		return true
	}
	return false
}
