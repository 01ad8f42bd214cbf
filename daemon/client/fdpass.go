package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// filePasser is a link that can pass descriptors with a request: the
// embedded daemon's, and a stream link over a Unix socket (SCM_RIGHTS).
// The caller keeps its files; the daemon gets copies.
type filePasser interface {
	passesFiles() bool
	sendFiles(id uint64, method string, params json.RawMessage, files []*os.File) error
}

// passed is what a spawn's request carries of its SpawnSpec.Mirror.
type passed struct {
	files  []*os.File // with the request, in the order of params' "mirror"
	stdin  bool       // a stdin is among them
	direct bool       // the output among them is the child's own
	tee    bool       // output among them that the daemon tees or writes to
}

// mirror arranges spec.Mirror for the spawn whose params are given: the
// descriptors to pass with the request, named in params' "mirror"
// (process.spawn.mirror, and .stdin and .direct for those). An embedded
// daemon and a daemon on a Unix socket can take them; over other links, or
// once a relay dropped them (noPassing), the spawn is unmirrored and its
// stdin the daemon's pipe. Without .direct, output is teed to the pipes
// among Stdout and Stderr, and written by the daemon to the regular files
// and null devices among them where it offers .files; other files are not
// passed.
func (c *Client) mirror(ctx context.Context, spec SpawnSpec, params map[string]any) passed {
	if spec.Mirror == (mirror.Spec{}) || c.noPassing.Load() {
		return passed{}
	}
	c.mu.Lock()
	l := c.cur
	c.mu.Unlock()
	if fp, ok := l.(filePasser); !ok || !fp.passesFiles() {
		return passed{}
	}
	if ok, err := c.HasFeature(ctx, wire.FeatureSpawnMirror); err != nil || !ok {
		return passed{} // the spawn reports a lost connection itself
	}
	has := func(feature string) bool {
		ok, err := c.HasFeature(ctx, feature)
		return err == nil && ok && !spec.TTY
	}
	var p passed
	p.direct = spec.Mirror.Direct && has(wire.FeatureSpawnMirrorDirect)
	var names []string
	for _, m := range []struct {
		name string
		f    *os.File
	}{{"stdout", spec.Mirror.Stdout}, {"stderr", spec.Mirror.Stderr}, {"stdin", spec.Mirror.Stdin}} {
		switch {
		case m.f == nil:
			continue
		case m.name == "stdin":
			if !has(wire.FeatureSpawnMirrorStdin) {
				continue // written through process.stdin as usual
			}
			p.stdin = true
		case p.direct || mirror.IsPipe(m.f):
		case !mirror.IsFileOrNull(m.f) || !has(wire.FeatureSpawnMirrorFiles):
			continue // neither teed nor written by the daemon: the frames carry this stream
		}
		names = append(names, m.name)
		p.files = append(p.files, m.f)
		p.tee = p.tee || m.name != "stdin" && !p.direct
	}
	if names != nil {
		params["mirror"] = names
		if p.direct {
			params["direct"] = true
		}
	}
	return p
}

// mirrorRefused reports whether a spawn failed on its passed mirror: the
// descriptors did not arrive, so nothing was started.
func mirrorRefused(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Code == wire.CodeInvalidParams && strings.HasPrefix(we.Message, "mirror: ")
}

// passesFiles reports whether the stream is a Unix socket.
func (l *streamLink) passesFiles() bool {
	_, ok := l.rwc.(*net.UnixConn)
	return ok
}

// sendFiles sends a request with files attached to its first byte, in one
// sendmsg (the daemon binds descriptors to the line that byte belongs to;
// should the kernel take only part of the line, the rest follows plainly).
func (l *streamLink) sendFiles(id uint64, method string, params json.RawMessage, files []*os.File) error {
	uc := l.rwc.(*net.UnixConn) // passesFiles said so
	// Through Control, not Fd, which would switch a non-blocking file
	// (and whoever shares its description) to blocking.
	fds := make([]int, len(files))
	for i, f := range files {
		rc, err := f.SyscallConn()
		if err != nil {
			return fmt.Errorf("%s: pass %s: %w", method, f.Name(), err)
		}
		_ = rc.Control(func(fd uintptr) { fds[i] = int(fd) })
	}
	return l.enc.sendAlone(id, method, params, l.write, func(b []byte) error {
		n, _, err := uc.WriteMsgUnix(b, unix.UnixRights(fds...), nil)
		if err == nil && n < len(b) {
			_, err = uc.Write(b[n:])
		}
		runtime.KeepAlive(files)
		if err != nil {
			l.rwc.Close()
		}
		return err
	})
}

// dupFile returns a close-on-exec duplicate of f (through Control: Fd
// would make a non-blocking file blocking).
func dupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
