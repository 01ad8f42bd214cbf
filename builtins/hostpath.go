package builtins

import (
	"fmt"
	"path/filepath"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/runtime"
)

// hostPath is the path a builtin sends to its host for the path p of the
// recipe. A relative path means the recipe's working directory, the
// directory sous runs in, so where the host's daemon runs on this machine
// (the embedded daemon, or a unix:// socket's, whose own working directory
// may be anywhere) it is made absolute here. An ssh:// or ws:// host is
// another machine, where this directory means nothing: the path goes as
// given and that daemon resolves it against its own working directory.
func hostPath(c *runtime.Call, p string) (string, error) {
	if filepath.IsAbs(p) {
		return p, nil
	}
	kind, _, err := client.Kind(c.Host.Target())
	if err != nil {
		return "", c.Errorf("%s: %v", c.Host.Target(), err)
	}
	if kind != "embedded" && kind != "unix" {
		return p, nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", c.Errorf("%s: %v", p, fmt.Errorf("resolve against the working directory: %w", err))
	}
	return abs, nil
}
