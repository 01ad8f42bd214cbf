package builtins

import (
	"os"
	"path/filepath"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// Paths on a host. A local host (the embedded daemon, or a daemon on a Unix
// socket: the same machine and filesystem as the runner) takes a relative
// path from the recipe's working directory, as `sous files` takes it from
// the shell's; the builtins make it absolute before sending it. A remote
// host (ssh://, ws://) gets it as given and resolves it against its own
// daemon's directory, the way `sous files --remote` sends it.

// local reports whether h runs on this machine.
func (h *Host) local() bool {
	kind, _, err := client.Kind(h.target)
	return err == nil && (kind == "embedded" || kind == "unix")
}

// hostPath is path as the call's host should get it.
func hostPath(c *Call, path string) string {
	if path == "" || filepath.IsAbs(path) || !c.Host.local() {
		return path
	}
	dir := c.Env.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return path // the daemon resolves it, and says what it found
		}
		dir = wd
	}
	return filepath.Join(dir, path)
}
