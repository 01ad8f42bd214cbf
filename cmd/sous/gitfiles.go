package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

func init() {
	commandGroups = append(commandGroups, newGitCmd, newFilesCmd)
}

// queryCmd describes a one-call command: build params from the args, call,
// print the result for humans or as JSON.
type queryCmd struct {
	use, short, example string
	nargs               [2]int // min, max positional args
	method              string
	params              func(args []string, local bool) map[string]any
	result              func() any
	human               func(w io.Writer, res any) error
	// check turns a result that reports failure into an error (exit 1).
	check func(res any) error
	// humanSaysFailure: the human output already tells what check
	// reports (stat's "does not exist"), so only the exit code says it
	// again.
	humanSaysFailure bool
	// before, when set, runs on the connection before the call, with the
	// call's params: it learns what a human line needs to know of the
	// state the call changes (worktree create: whether the branch
	// existed), or refuses a call that would lose the user's work unasked
	// (worktree remove of a dirty worktree): an error is exit 1.
	before func(ctx context.Context, c callConn, params map[string]any) error
	// verify, when set, runs on the connection after the call, before the
	// human output: it refuses a result that would mislead (files read of
	// a binary file).
	verify func(ctx context.Context, c callConn, params map[string]any, res any) error
}

func (q queryCmd) build(streams *IO, extra func(*cobra.Command, map[string]any)) *cobra.Command {
	var t targetFlags
	var asJSON bool
	var flagParams = map[string]any{}
	cmd := &cobra.Command{
		Use:     q.use,
		Short:   q.short,
		Example: q.example,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < q.nargs[0] || len(args) > q.nargs[1] {
				return usageErrorf("%s: wrong number of arguments (usage: %s %s)", cmd.Name(), cmd.Parent().CommandPath(), q.use)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			url, err := t.url()
			if err != nil {
				return err
			}
			params := q.params(args, isLocal(url))
			for k, v := range flagParams {
				switch f := v.(type) {
				case *pathFlag: // a path on the daemon's host: absolute when that is here
					if f.value == "" {
						continue
					}
					v = f.value
					if isLocal(url) {
						v = absPath(f.value)
					}
				case *string:
					if *f == "" {
						continue
					}
					v = *f
				}
				params[k] = v
			}
			return withConn(cmd.Context(), &t, func(ctx context.Context, c callConn) error {
				// What a message names: the path, made absolute, else the
				// first argument.
				subject := ""
				if p, ok := params["path"].(string); ok {
					subject = p
				} else if len(args) > 0 {
					subject = args[0]
				}
				res := q.result()
				if q.before != nil {
					if err := q.before(ctx, c, params); err != nil {
						return &exitError{code: 1, err: fmt.Errorf("%s: %w", subject, err)}
					}
				}
				// --json prints the daemon's result as it came, not res
				// encoded again: a result type may hold fields the daemon
				// left out (git.info outside a repository).
				var raw json.RawMessage
				into := res
				if asJSON {
					into = &raw
				}
				if err := c.Call(ctx, q.method, params, into); err != nil {
					var we *wire.Error
					if errors.As(err, &we) && we.Code == wire.CodeInternal {
						// The daemon's own failure (an open, a git run):
						// its words say it; the code adds nothing.
						return &exitError{code: 1, err: fmt.Errorf("%s: %s", q.method, we.Message)}
					}
					if errors.Is(err, client.ErrAnswerTooLarge) {
						return fmt.Errorf("%s: %s: %w", q.method, subject, err)
					}
					return fmt.Errorf("%s: %w", q.method, err)
				}
				if asJSON {
					if err := json.Unmarshal(raw, res); err != nil {
						return fmt.Errorf("%s: decode result: %w", q.method, err)
					}
				}
				if q.verify != nil && !asJSON {
					if err := q.verify(ctx, c, params, res); err != nil {
						return &exitError{code: 1, err: fmt.Errorf("%s: %w", subject, err)}
					}
				}
				if asJSON {
					if err := writeRawJSON(streams.Out, raw); err != nil {
						return err
					}
				} else if err := q.human(streams.Out, res); err != nil {
					return err
				}
				if q.check != nil {
					if err := q.check(res); err != nil {
						if q.humanSaysFailure && !asJSON {
							return &exitError{code: 1}
						}
						return &exitError{code: 1, err: fmt.Errorf("%s: %w", subject, err)}
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the daemon's result as JSON for scripts")
	if extra != nil {
		extra(cmd, flagParams)
	}
	t.register(cmd)
	return cmd
}

// writeRawJSON prints a daemon's result indented, as writeJSON prints a
// value.
func writeRawJSON(w io.Writer, raw json.RawMessage) error {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return fmt.Errorf("the daemon returned invalid JSON: %w", err)
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// pathArg is the optional PATH argument, made absolute when the daemon runs
// on this machine (a remote daemon resolves relative paths itself).
func pathArg(args []string, i int, local bool) string {
	p := "."
	if i < len(args) {
		p = args[i]
	}
	if local {
		return absPath(p)
	}
	return p
}

func newGitCmd(streams *IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "git",
		Short: "Query repositories and manage worktrees on a daemon's host",
		Example: `  sous git info
  sous git worktree create feature-x ../wt/feature-x --source main
  sous git status --remote ssh://build /src/app --json`,
	}
	cmd.AddCommand(
		queryCmd{
			use: "info [PATH]", short: "Branch, root, origin slug and default branch of a repository",
			example: "  sous git info\n  sous git info /src/app --json",
			nargs:   [2]int{0, 1}, method: "git.info",
			params: func(a []string, local bool) map[string]any { return map[string]any{"path": pathArg(a, 0, local)} },
			result: func() any { return &wire.GitInfoResult{} },
			human: func(w io.Writer, res any) error {
				r := res.(*wire.GitInfoResult)
				if !r.IsRepo {
					return nil // check says so
				}
				tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "root\t%s\nbranch\t%s\nslug\t%s\ndefault branch\t%s\n", r.Root, r.Branch, dash(r.RepoSlug), dash(r.DefaultBranch))
				return tw.Flush()
			},
			check: func(res any) error { return notARepo(res.(*wire.GitInfoResult).IsRepo) },
		}.build(streams, nil),
		queryCmd{
			use: "status [PATH]", short: "Whether a repository is clean, and its changes",
			example: "  sous git status\n  sous git status /src/app --json",
			nargs:   [2]int{0, 1}, method: "git.status",
			params: func(a []string, local bool) map[string]any { return map[string]any{"path": pathArg(a, 0, local)} },
			result: func() any { return &wire.GitStatusResult{} },
			human: func(w io.Writer, res any) error {
				r := res.(*wire.GitStatusResult)
				switch {
				case !r.IsRepo:
					return nil // check says so
				case r.Clean:
					_, err := fmt.Fprintln(w, "clean")
					return err
				}
				_, err := fmt.Fprintln(w, strings.Join(r.Changes, "\n"))
				return err
			},
			check: func(res any) error { return notARepo(res.(*wire.GitStatusResult).IsRepo) },
		}.build(streams, nil),
		queryCmd{
			use: "branches [PATH]", short: "Local branches of a repository, sorted",
			example: "  sous git branches",
			nargs:   [2]int{0, 1}, method: "git.list_branches",
			params: func(a []string, local bool) map[string]any { return map[string]any{"path": pathArg(a, 0, local)} },
			result: func() any { return &wire.GitBranchesResult{} },
			human: func(w io.Writer, res any) error {
				r := res.(*wire.GitBranchesResult)
				for _, b := range r.Branches {
					fmt.Fprintln(w, b)
				}
				return nil
			},
			check: func(res any) error { return notARepo(res.(*wire.GitBranchesResult).IsRepo) },
		}.build(streams, nil),
		newWorktreeCmd(streams),
	)
	return cmd
}

// notARepo is the failure of a git query outside a repository (exit 1, as
// files stat of a missing path).
func notARepo(isRepo bool) error {
	if isRepo {
		return nil
	}
	return errors.New("not a git repository (nor inside one)")
}

func newWorktreeCmd(streams *IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worktree",
		Short: "Create or remove git worktrees",
		Example: `  sous git worktree create feature-x /tmp/wt/feature-x --repo /src/app
  sous git worktree remove /tmp/wt/feature-x --repo /src/app`,
	}
	worktreeFailed := func(res any) error {
		r := res.(*wire.WorktreeResult)
		if r.Success {
			return nil
		}
		return fmt.Errorf("%s (%s)", r.Error, r.ErrorCode)
	}
	repoFlag := func(cmd *cobra.Command, params map[string]any) {
		repo := &pathFlag{}
		cmd.Flags().StringVar(&repo.value, "repo", "", "the repository (default: the daemon's working directory)")
		params["baseRepo"] = repo
	}
	// What create's line says of the branch: the daemon's result echoes a
	// source branch even when the branch existed and was only checked out
	// (claustrum's contract), so create asks beforehand.
	var branch, source string // the call's branchName and --source
	existed := -1             // unknown; 0 no, 1 yes
	var force bool            // remove --force
	cmd.AddCommand(
		queryCmd{
			use: "create BRANCH PATH", short: "Create a worktree at PATH on BRANCH (created from --source when new)",
			example: "  sous git worktree create feature-x ../wt/feature-x --source main",
			nargs:   [2]int{2, 2}, method: "git.worktree_create",
			params: func(a []string, local bool) map[string]any {
				return map[string]any{"branchName": a[0], "worktreePath": pathArg(a, 1, local)}
			},
			result: func() any { return &wire.WorktreeResult{} },
			before: func(ctx context.Context, c callConn, params map[string]any) error {
				branch, _ = params["branchName"].(string)
				repo, ok := params["baseRepo"].(string)
				if !ok {
					repo = "." // the daemon's working directory, as for create
				}
				var r wire.GitBranchesResult
				if err := c.Call(ctx, "git.list_branches", map[string]any{"path": repo}, &r); err == nil && r.IsRepo {
					existed = 0
					if slices.Contains(r.Branches, branch) {
						existed = 1
					}
				}
				return nil // without an answer, the line just says less
			},
			human: func(w io.Writer, res any) error {
				r := res.(*wire.WorktreeResult)
				if !r.Success {
					return nil
				}
				switch {
				case existed == 1 && source != "":
					fmt.Fprintf(w, "created %s on existing branch %s (--source %s not used)\n", r.Path, branch, source)
				case existed == 1:
					fmt.Fprintf(w, "created %s on existing branch %s\n", r.Path, branch)
				case existed == 0 && r.SourceBranch != "":
					fmt.Fprintf(w, "created %s on new branch %s from %s\n", r.Path, branch, r.SourceBranch)
				case existed == 0:
					fmt.Fprintf(w, "created %s on new branch %s\n", r.Path, branch) // an orphan: the repo has no commit
				default:
					fmt.Fprintf(w, "created %s on branch %s\n", r.Path, branch)
				}
				return nil
			},
			check: worktreeFailed,
		}.build(streams, func(cmd *cobra.Command, params map[string]any) {
			repoFlag(cmd, params)
			cmd.Flags().StringVar(&source, "source", "", "branch to start a new branch from (default: the repo's current branch); not used when BRANCH exists")
			params["sourceBranch"] = &source
		}),
		queryCmd{
			use: "remove PATH", short: "Remove the worktree at PATH (--force: even with uncommitted changes)",
			example: "  sous git worktree remove ../wt/feature-x\n  sous git worktree remove --force ../wt/experiment",
			nargs:   [2]int{1, 1}, method: "git.worktree_remove",
			params: func(a []string, local bool) map[string]any {
				return map[string]any{"worktreePath": pathArg(a, 0, local)}
			},
			result: func() any { return &wire.WorktreeResult{} },
			human: func(w io.Writer, res any) error {
				if res.(*wire.WorktreeResult).Success {
					fmt.Fprintln(w, "removed")
				}
				return nil
			},
			check: worktreeFailed,
			before: func(ctx context.Context, c callConn, params map[string]any) error {
				if force {
					return nil
				}
				return removable(ctx, c, params["worktreePath"].(string))
			},
		}.build(streams, func(cmd *cobra.Command, params map[string]any) {
			repoFlag(cmd, params)
			cmd.Flags().BoolVar(&force, "force", false, "remove it even when it has uncommitted changes, or is not a worktree git knows")
		}),
	)
	return cmd
}

// removable refuses, unless --force, to remove a worktree whose changes the
// removal would lose (the protocol's git.worktree_remove forces), and a path
// that is no worktree at all (the protocol lets that pass silently).
func removable(ctx context.Context, c callConn, path string) error {
	var st wire.GitStatusResult
	if err := c.Call(ctx, "git.status", map[string]any{"path": path}, &st); err != nil {
		return fmt.Errorf("git.status: %w", err)
	}
	switch {
	case !st.IsRepo:
		return errors.New("not a git worktree (--force asks the daemon to remove it anyway)")
	case !st.Clean:
		shown := st.Changes[:min(len(st.Changes), 5)]
		more := ""
		if len(st.Changes) > len(shown) {
			more = fmt.Sprintf("\n  ... and %d more", len(st.Changes)-len(shown))
		}
		return fmt.Errorf("uncommitted changes that removing it would lose:\n  %s%s\n(--force removes it anyway)", strings.Join(shown, "\n  "), more)
	}
	return nil
}

// pathFlag is a flag whose value is a path on the daemon's host, made
// absolute like the positional PATH arguments; other string flags (a branch
// name) are sent as given.
type pathFlag struct{ value string }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newFilesCmd(streams *IO) *cobra.Command {
	pathParams := func(a []string, local bool) map[string]any { return map[string]any{"path": pathArg(a, 0, local)} }
	cmd := &cobra.Command{
		Use:   "files",
		Short: "Inspect files and extract archives on a daemon's host",
		Example: `  sous files list /src/app
  sous files read --remote ssh://build /etc/os-release
  sous files extract-tar release.tar.gz /opt/app`,
	}
	cmd.AddCommand(
		queryCmd{
			use: "stat PATH", short: "Existence, type, size and mode of a path",
			example: "  sous files stat /etc/hosts", nargs: [2]int{1, 1}, method: "files.stat",
			params: pathParams, result: func() any { return &wire.StatResult{} },
			human: func(w io.Writer, res any) error {
				r := res.(*wire.StatResult)
				if !r.Exists {
					_, err := fmt.Fprintln(w, "does not exist")
					return err
				}
				_, err := fmt.Fprintf(w, "%s %d\n", r.Mode, r.Size)
				return err
			},
			check: func(res any) error {
				if !res.(*wire.StatResult).Exists {
					return fmt.Errorf("path does not exist")
				}
				return nil
			},
			humanSaysFailure: true,
		}.build(streams, nil),
		queryCmd{
			use: "list PATH", short: "Entries of a directory, sorted, hidden ones skipped",
			example: "  sous files list .", nargs: [2]int{1, 1}, method: "files.list",
			params: pathParams, result: func() any { return &wire.ListResult{} },
			human: func(w io.Writer, res any) error {
				for _, e := range res.(*wire.ListResult).Entries {
					suffix := ""
					if e.IsDir {
						suffix = "/"
					}
					fmt.Fprintln(w, e.Name+suffix)
				}
				return nil
			},
		}.build(streams, nil),
		queryCmd{
			use: "read PATH", short: "Print a text file's content (refuses one that is not UTF-8)",
			example: "  sous files read /etc/os-release\n  sous files read big.log --max-bytes 1048576",
			nargs:   [2]int{1, 1}, method: "files.read",
			params: pathParams, result: func() any { return &wire.ReadResult{} },
			human: func(w io.Writer, res any) error {
				_, err := io.WriteString(w, res.(*wire.ReadResult).Content)
				return err
			},
			check: func(res any) error {
				if !res.(*wire.ReadResult).Exists {
					return fmt.Errorf("no such file")
				}
				return nil
			},
			verify: refuseBinary,
		}.build(streams, func(cmd *cobra.Command, params map[string]any) {
			cmd.Flags().Int64("max-bytes", 0, "refuse files larger than this many bytes")
			cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
				if cmd.Flags().Changed("max-bytes") {
					n, _ := cmd.Flags().GetInt64("max-bytes")
					params["maxBytes"] = n
				}
				return nil
			}
		}),
		queryCmd{
			use: "validate PATH", short: "Whether a path exists, and whether it is a directory",
			example: "  sous files validate /src/app", nargs: [2]int{1, 1}, method: "files.validate",
			params: pathParams, result: func() any { return &wire.ValidateResult{} },
			human: func(w io.Writer, res any) error {
				r := res.(*wire.ValidateResult)
				switch {
				case !r.Valid:
					fmt.Fprintln(w, "invalid:", r.Error)
				case r.IsDir:
					fmt.Fprintln(w, "valid directory")
				default:
					fmt.Fprintln(w, "valid file")
				}
				return nil
			},
			check: func(res any) error {
				if r := res.(*wire.ValidateResult); !r.Valid {
					return fmt.Errorf("%s", r.Error)
				}
				return nil
			},
			humanSaysFailure: true,
		}.build(streams, nil),
		newExtractTarCmd(streams),
	)
	return cmd
}

// refuseBinary refuses to print a files.read result that lost bytes: the
// protocol carries content as a JSON string, so bytes that are not UTF-8
// arrive as U+FFFD, and printing them would write a corrupted copy and exit
// 0. Only content with a U+FFFD is suspect; it is a loss when the file's
// size (files.stat) differs from the bytes that arrived.
func refuseBinary(ctx context.Context, c callConn, params map[string]any, res any) error {
	r := res.(*wire.ReadResult)
	if !r.Exists || !strings.ContainsRune(r.Content, utf8.RuneError) {
		return nil
	}
	var st wire.StatResult
	if err := c.Call(ctx, "files.stat", map[string]any{"path": params["path"]}, &st); err != nil {
		return fmt.Errorf("files.stat: %w", err)
	}
	if st.Size == int64(len(r.Content)) {
		return nil // a real U+FFFD
	}
	return fmt.Errorf("not UTF-8 text (%d bytes on disk, %d after the bytes that are not UTF-8 were replaced): "+
		"files read carries text only; copy a binary file with `sous exec -- cat PATH > COPY`", st.Size, len(r.Content))
}

// plural picks the word for n of something.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
