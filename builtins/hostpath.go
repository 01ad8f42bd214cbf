package builtins

import (
	"fmt"
	"path/filepath"

	"github.com/seed5ad92d46/sous/runtime"
)

// hostPath is the path a builtin sends to its host for the path p of the
// recipe. A relative path means the recipe's working directory (Env.Dir,
// else the directory sous runs in), as `sous files` takes it from the
// shell's, so where the host's daemon runs on this machine (the embedded
// daemon, or a unix:// socket's, whose own working directory may be
// anywhere) it is made absolute here. An ssh:// or ws:// host is another
// machine, where this directory means nothing: the path goes as given and
// that daemon resolves it against its own working directory, the way `sous
// files --remote` sends it.
func hostPath(c *runtime.Call, p string) (string, error) {
	if p == "" || filepath.IsAbs(p) || !c.Host.Local() {
		return p, nil
	}
	if c.Env.Dir != "" {
		return filepath.Join(c.Env.Dir, p), nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", c.Errorf("%s: %v", p, fmt.Errorf("resolve against the working directory: %w", err))
	}
	return abs, nil
}
