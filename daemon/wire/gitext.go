package wire

// The git.* extensions that take a worktree to the finish line: diff,
// commit, merge and push run on the host that has the worktree
// (docs/PROTOCOL.md §6, "git.diff, git.commit, git.merge, git.push").
// Each method is also advertised as a feature of the same name.
const (
	FeatureGitDiff   = "git.diff"
	FeatureGitCommit = "git.commit"
	FeatureGitMerge  = "git.merge"
	FeatureGitPush   = "git.push"

	// git.worktree_create {"include": ["globs"]}: the untracked paths of
	// the repository the globs match (relative to its top level) are
	// copied into the new worktree, modes kept, symlinks copied as links
	// that stay inside the repository.
	FeatureWorktreeCreateInclude = "git.worktree_create.include"
)

// GitMethods are the extension methods above, in the order
// server.capabilities lists them after the 19.
var GitMethods = []string{"git.diff", "git.commit", "git.merge", "git.push"}

// CodeGitFailed is the error of git.diff, git.commit, git.merge and
// git.push when git ran and failed; the message is git's own, on one line
// ("git commit: nothing to commit").
const CodeGitFailed = -32010

// GitDiffParams are git.diff's params.
type GitDiffParams struct {
	Path string `json:"path"`
	Base string `json:"base,omitempty"` // default HEAD
	Stat bool   `json:"stat,omitempty"`
}

// GitDiffResult is git.diff's result.
type GitDiffResult struct {
	Diff string `json:"diff"`
}

// GitCommitParams are git.commit's params.
type GitCommitParams struct {
	Path    string `json:"path"`
	Message string `json:"message"`
	All     bool   `json:"all,omitempty"`
}

// GitCommitResult is git.commit's result: the new commit's id.
type GitCommitResult struct {
	Commit string `json:"commit"`
}

// GitMergeParams are git.merge's params.
type GitMergeParams struct {
	Repo    string `json:"repo"`
	Branch  string `json:"branch"`
	Squash  bool   `json:"squash,omitempty"`
	Message string `json:"message,omitempty"`
}

// GitMergeResult is git.merge's result. A conflicted merge is aborted: ok
// is false, commit empty and conflicts the paths git could not merge.
type GitMergeResult struct {
	OK        bool     `json:"ok"`
	Commit    string   `json:"commit"`
	Conflicts []string `json:"conflicts"`
}

// GitPushParams are git.push's params.
type GitPushParams struct {
	Path   string `json:"path"`
	Remote string `json:"remote,omitempty"` // default origin
	Branch string `json:"branch,omitempty"` // default: the current branch
}

// GitPushResult is git.push's result: what was pushed where.
type GitPushResult struct {
	Success bool   `json:"success"`
	Remote  string `json:"remote"`
	Branch  string `json:"branch"`
}
