// Package rules is the permission rule engine: Claude Code's permission
// rule syntax, used by permissions() in recipes, by `sous run
// --allow/--deny` and by the prompt's "always" answers. It knows no
// Starlark; its only I/O is resolving the symlinks of a local session's
// paths.
//
//	"Read"                  any use of the tool
//	"Bash(go test:*)"       a command whose words start with `go test`
//	"Bash(make)"            exactly the command `make`
//	"Write(/abs/prefix/**)" a glob on the tool's file_path, path or
//	                        notebook_path (`**` spans directories, `*` and `?`
//	                        stay within one); relative patterns and paths are
//	                        taken from the session's cwd
//	"Edit(...)"             the same for every file-editing tool (Edit,
//	                        Write, MultiEdit, NotebookEdit), as in Claude Code
//	"WebFetch(domain:x.io)" a url on x.io or a subdomain of it
//	"mcp__server"           every tool of that MCP server
//
// Commands are compared word by word after shell quote removal, so
// `go  "test"` is `go test`. A shell command (Bash's string "command") is
// read as bash reads it (shell.go) and split at ;, &&, ||, |, & and
// newlines. An allow rule covers the command only when every part is
// covered by an allow rule and nothing in it runs or writes what the words
// do not show: substitutions, arithmetic, expansions that evaluate text,
// assignments, keywords, subshells, groups, here-documents, redirections
// other than to a descriptor or /dev/null. A deny or ask rule applies when
// it matches the whole command or any part of it, also behind wrappers
// (sudo, env, xargs, sh -c, /bin/rm: wrappers.go). This makes allow rules
// strict and deny rules broad; deny rules remain best effort (an alias or a
// script hides a command), so deny is no sandbox.
//
// Writes inside .git are covered only by allow rules that name .git, and
// Set.DenyGitWrites (permissions()) denies the rest.
//
// Privileged commands (tool "Sudo") carry an argv ({"command": [...]}): no
// shell reads it, so it is compared as one command, never split.
package rules
