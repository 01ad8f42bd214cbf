//go:build !linux

package sandbox

import (
	"errors"
	"fmt"
	"os/exec"
)

// Self is the helper's executable (unused where sandboxes are unsupported).
const Self = ""

// Probe reports no Landlock: it exists only on Linux.
func Probe() Info {
	if o := abiOverride.Load(); o > 0 {
		return Info{ABI: int(o)}
	}
	return Info{Err: errors.New("Landlock exists only on Linux")}
}

// MaybeRunHelper records that the helper is installed; there is no helper
// form off Linux.
func MaybeRunHelper() { installed.Store(true) }

// Start starts cmd as is when p is nil and refuses any policy: this
// platform cannot enforce one.
func Start(cmd *exec.Cmd, p *Policy) error {
	if p == nil {
		return cmd.Start()
	}
	if err := Supported(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return errors.New("sandbox: this platform cannot enforce a sandbox")
}

// MountIsolation reports that there are no sandboxes here at all.
func MountIsolation() error {
	if err := Supported(); err != nil {
		return err
	}
	return errors.New("sandbox: this platform cannot enforce a sandbox")
}
