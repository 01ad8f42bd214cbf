package daemon

import (
	"fmt"
	"slices"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The process.spawn.sandbox extension (wire.Sandbox documents the params;
// package sandbox the enforcement). Unlike the other extensions, a sandbox
// the daemon does not honour is never ignored: the spawn fails and nothing
// runs.

// withSandbox adds process.spawn.sandbox to the advertised features when this
// daemon can enforce it: the kernel has Landlock (ABI 3 or later) and the
// program installed the helper.
func withSandbox(feats []string) []string {
	if sandbox.Supported() != nil {
		return feats
	}
	return append(slices.Clip(feats), wire.FeatureSpawnSandbox)
}

// sandboxPolicy checks process.spawn's sandbox: its shape (-32602), then
// whether this daemon can enforce it (-32603). nil means unsandboxed.
func (s *Server) sandboxPolicy(p *wire.Sandbox) (*sandbox.Policy, error) {
	if p == nil {
		return nil, nil
	}
	switch p.Mode {
	case wire.SandboxReadOnly:
		if len(p.Write) > 0 {
			return nil, wire.InvalidParams(`sandbox: mode "read-only" takes no write roots (use "workspace-write")`)
		}
	case wire.SandboxWorkspaceWrite:
	default:
		return nil, wire.InvalidParams(fmt.Sprintf(`sandbox: mode must be "read-only" or "workspace-write", got %q`, p.Mode))
	}
	// The daemon's own sockets are hidden from the child: through them it
	// could have commands run outside its sandbox.
	pol := &sandbox.Policy{Write: p.Write, Network: p.Network, Hide: s.socketPaths()}
	if err := pol.Validate(); err != nil {
		return nil, wire.InvalidParams(err.Error())
	}
	if !s.enabled(wire.FeatureSpawnSandbox) {
		return nil, wire.Errorf(wire.CodeInternal, "sandbox: this daemon has %s disabled; the process was not started", wire.FeatureSpawnSandbox)
	}
	if err := sandbox.Supported(); err != nil {
		return nil, wire.Errorf(wire.CodeInternal, "sandbox: %v; the process was not started", err)
	}
	s.weakSandboxOnce.Do(func() {
		if err := sandbox.MountIsolation(); err != nil {
			s.log.Warn("sandboxed commands get no mount namespace here: outside their write roots they can still chmod, chown, utimes and setxattr files, and they can connect to the daemon's socket (they have no token, unless a spawn gives it)", "why", err)
		}
	})
	return pol, nil
}
