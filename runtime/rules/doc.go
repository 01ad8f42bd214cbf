// Package rules is the permission rule engine: Claude Code's permission
// rule syntax, used by permissions() in recipes and by
// `sous run --allow/--deny`. It is pure (no Starlark, no I/O but the
// path resolution a local session needs) so that it can be table-tested and
// fuzzed on its own.
//
//	"Read"                  any use of the tool
//	"Bash(go test:*)"       a command whose words start with `go test`
//	"Bash(make)"            exactly the command `make`
//	"Write(/abs/prefix/**)" a glob on the tool's file_path, path or
//	                        notebook_path (`**` spans directories, `*` and `?`
//	                        stay within one); relative patterns and paths are
//	                        taken from the session's cwd
//	"WebFetch(domain:x.io)" a url on x.io or a subdomain of it
//	"mcp__server"           every tool of that MCP server
//
// Commands are compared word by word after shell quote removal, so
// `go  "test"` is `go test`. A shell command (Bash's string "command") is
// split at unquoted ;, &&, ||, |, & and newlines. An allow rule covers the
// command only when every part is covered by an allow rule and nothing in
// it runs or writes what the words do not show: command substitution ($(...)
// or backquotes, even inside double quotes), process substitution, a
// subshell or group, a here-document, or a redirection other than to a file
// descriptor or /dev/null. A deny or ask rule applies when it matches the
// whole command or any part of it. This makes allow rules strict and deny
// rules broad; deny rules remain best effort (a command can always hide
// another behind `sh -c` or an alias), so deny is no sandbox.
//
// Privileged commands (tool "Sudo") carry an argv ({"command": [...]}): no
// shell reads it, so it is compared as one command, never split.
package rules
