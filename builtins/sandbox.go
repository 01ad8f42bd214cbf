package builtins

import (
	"fmt"
	"slices"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// sandboxDoc documents the sandbox keyword of spawn, run, sh and pipeline.
const sandboxDoc = "sandbox confines the command: None (the default) does not; \"read-only\" lets it read and execute anything " +
	"and write nowhere but /dev/null and the like; a dict {\"write\": [paths], \"network\": False} also lets it write beneath " +
	"the write paths (files or directories; relative ones are taken from the command's cwd; add \"/tmp\" for temporary " +
	"files). network=False (the default, also for \"read-only\") leaves it no network at all, not even the host's " +
	"127.0.0.1; True keeps the host's. It cannot signal processes outside its sandbox nor reach their abstract Unix " +
	"sockets (Linux 6.12+), nor, where it gets a mount namespace, change the modes, owners, times or attributes of files " +
	"outside its write paths or reach the daemon's socket. On Linux this is Landlock and private network and mount " +
	"namespaces; where the host cannot enforce a sandbox the command fails to start: it never runs unsandboxed. " +
	"docs/SECURITY.md says what each kernel enforces."

// sandboxArg binds sandbox=: None, "read-only", or a dict with the keys
// write (a list of paths) and network (a bool). Paths go to the daemon as
// given: it resolves relative ones against the process's cwd on the host.
func sandboxArg(dst **wire.Sandbox) param {
	return paramFunc(func(v starlark.Value) error {
		switch x := v.(type) {
		case starlark.NoneType:
			*dst = nil
			return nil
		case starlark.String:
			if x != wire.SandboxReadOnly {
				return fmt.Errorf(`want None, "read-only" or a dict with write and network, got %s`, x.String())
			}
			*dst = &wire.Sandbox{Mode: wire.SandboxReadOnly}
			return nil
		case *starlark.Dict:
			sb := &wire.Sandbox{Mode: wire.SandboxWorkspaceWrite}
			for _, item := range x.Items() {
				k, ok := starlark.AsString(item[0])
				if !ok {
					return &argError{path: " key " + item[0].String(), msg: want("string", item[0]).Error()}
				}
				var err error
				switch k {
				case "write":
					err = strList(&sb.Write).set(item[1])
				case "network":
					err = boolean(&sb.Network).set(item[1])
				default:
					return fmt.Errorf("unknown key %q (want write and network)", k)
				}
				if err != nil {
					if ae, ok := err.(*argError); ok {
						return &argError{path: fmt.Sprintf("[%q]", k) + ae.path, msg: ae.msg}
					}
					return &argError{path: fmt.Sprintf("[%q]", k), msg: err.Error()}
				}
			}
			for i, w := range sb.Write {
				if w == "" {
					return &argError{path: fmt.Sprintf(`["write"][%d]`, i), msg: "empty path"}
				}
			}
			*dst = sb
			return nil
		default:
			return want(`None, "read-only" or a dict with write and network`, v)
		}
	})
}

// sandboxWithWrite is o's sandbox with one more write root (o's is not
// changed); nil stays nil: an unsandboxed command needs no root.
func (o *runOptions) sandboxWithWrite(path string) *wire.Sandbox {
	if o.sandbox == nil {
		return nil
	}
	sb := *o.sandbox
	sb.Mode = wire.SandboxWorkspaceWrite
	sb.Write = append(slices.Clip(sb.Write), path)
	return &sb
}
