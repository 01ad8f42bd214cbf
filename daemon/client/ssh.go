package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultBridgeCommand is what runs on the far side of an ssh target, with
// the socket path appended. A host that runs claustrum instead of sous sets
// the bridge to "claustrum -bridge -socket".
const DefaultBridgeCommand = "sous daemon bridge --socket"

// SSHTarget is a parsed ssh://[user@]host[:port][/socket/path] URL.
type SSHTarget struct {
	User   string
	Host   string
	Port   string
	Socket string // remote socket path; empty: the bridge's default
}

// ParseSSH parses an ssh:// target.
func ParseSSH(target string) (SSHTarget, error) {
	u, err := url.Parse(target)
	if err != nil {
		return SSHTarget{}, fmt.Errorf("ssh target %q: %w", target, err)
	}
	if u.Scheme != "ssh" || u.Hostname() == "" {
		return SSHTarget{}, fmt.Errorf("ssh target %q: want ssh://[user@]host[:port][/socket/path]", target)
	}
	t := SSHTarget{Host: u.Hostname(), Port: u.Port(), Socket: u.Path}
	if u.User != nil {
		t.User = u.User.Username()
		if _, hasPw := u.User.Password(); hasPw {
			return SSHTarget{}, fmt.Errorf("ssh target %q: passwords in the URL are not supported; use keys or an agent", target)
		}
	}
	if t.Socket == "/" {
		t.Socket = ""
	}
	return t, nil
}

// SSHOptions tune the ssh transport.
type SSHOptions struct {
	// SSH is the ssh program (default "ssh" from PATH), so the user's
	// ~/.ssh/config, agent and ControlMaster apply.
	SSH string
	// ExtraArgs go before the destination (e.g. "-F", "config", "-i", "key").
	ExtraArgs []string
	// BridgeCommand runs remotely with the socket path appended (default
	// DefaultBridgeCommand).
	BridgeCommand string
}

// SSHArgs is the ssh command line for t: the bridge is the remote command.
func SSHArgs(t SSHTarget, o SSHOptions) []string {
	args := []string{"-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"}
	if t.Port != "" {
		args = append(args, "-p", t.Port)
	}
	args = append(args, o.ExtraArgs...)
	dest := t.Host
	if t.User != "" {
		dest = t.User + "@" + t.Host
	}
	bridge := o.BridgeCommand
	if bridge == "" {
		bridge = DefaultBridgeCommand
	}
	remote := bridge
	if t.Socket != "" {
		remote += " " + shellQuote(t.Socket)
	} else if bridge == DefaultBridgeCommand {
		remote = "sous daemon bridge" // the bridge's own default socket
	}
	return append(args, "--", dest, remote)
}

// shellQuote quotes s for the remote POSIX shell that ssh hands the command to.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// SSHDial returns a DialFunc that starts ssh with the bridge as the remote
// command and speaks through its stdio. Each dial is a new ssh process.
func SSHDial(t SSHTarget, o SSHOptions) DialFunc {
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		prog := o.SSH
		if prog == "" {
			prog = "ssh"
		}
		cmd := exec.Command(prog, SSHArgs(t, o)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C is ours to handle, not ssh's
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, w, err := sshOutputPipe()
		if err != nil {
			return nil, err
		}
		cmd.Stdout = w
		stderr := &tailBuffer{max: 4096}
		cmd.Stderr = stderr
		err = cmd.Start()
		w.Close() // ssh's copy is ssh's; ours would hide its end
		if err != nil {
			stdout.Close()
			return nil, fmt.Errorf("ssh to %s: %w", t.Host, err)
		}
		s := &sshStream{cmd: cmd, stdin: stdin, stdout: stdout, stderr: stderr, exited: make(chan struct{})}
		go func() {
			s.waitErr = cmd.Wait()
			close(s.exited)
		}()
		// ssh gives no "connected" signal; a failure to connect (auth,
		// host key, no bridge) shows as an early exit, caught on first use
		// with ssh's own words. Wait a moment for the quick failures so the
		// first error names them.
		select {
		case <-s.exited:
			stdout.Close()
			return nil, s.failure()
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		}
		return s, nil
	}
}

// sshOutputPipe is the pipe ssh writes the daemon's bytes into: 1 MiB
// where the kernel allows, so that ssh, which writes what it decrypts as it
// comes, seldom finds it full while the reader waits for a CPU (in 64 KiB,
// ssh's own CPU for a stream was half as much again as with /dev/null).
// The reading end is ours to close (Close), not Wait's: what ssh wrote
// before it exited is read to the end.
func sshOutputPipe() (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("ssh: pipe: %w", err)
	}
	if rc, err := r.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, sshPipeSize) }) // best effort
	}
	return r, w, nil
}

const sshPipeSize = 1 << 20

// sshStream is an ssh process seen as a byte stream.
type sshStream struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *os.File
	stderr  *tailBuffer
	exited  chan struct{}
	waitErr error
	once    sync.Once
}

func (s *sshStream) Read(p []byte) (int, error) {
	n, err := s.stdout.Read(p)
	if err != nil && n == 0 {
		select {
		case <-s.exited:
			if f := s.failure(); f != nil {
				return 0, f
			}
		case <-time.After(sshExitWait):
		}
	}
	return n, err
}

// sshExitWait bounds how long a read that found ssh's output ended waits
// for ssh to exit, to return its reason (stderr) rather than a bare EOF.
// ssh exits right after its channel closes; a busy machine may take a
// moment to run it that far.
const sshExitWait = 2 * time.Second

func (s *sshStream) Write(p []byte) (int, error) { return s.stdin.Write(p) }

func (s *sshStream) Close() error {
	s.once.Do(func() {
		s.stdin.Close()
		if s.cmd.Process != nil {
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		}
		s.stdout.Close()
	})
	return nil
}

// failure describes why ssh exited, with the last of its stderr.
func (s *sshStream) failure() error {
	msg := strings.TrimSpace(s.stderr.String())
	if s.waitErr == nil && msg == "" {
		return nil
	}
	if msg == "" {
		return fmt.Errorf("ssh: %v", s.waitErr)
	}
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 && len(msg)-i < 300 {
		msg = msg[i+1:]
	}
	return fmt.Errorf("ssh: %s", msg)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = bytes.Clone(b.buf[len(b.buf)-b.max:])
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
