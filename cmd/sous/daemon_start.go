package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// DaemonStartOptions are the flags of `sous daemon start`: serve's, which
// it passes on to the daemon it starts, and its own.
type DaemonStartOptions struct {
	DaemonServeOptions
	LogFile string        // default SOCKET.log
	Wait    time.Duration // for the daemon to listen
}

func newCmdDaemonStart(f *Factory, runF func(*DaemonStartOptions) error) *cobra.Command {
	opts := &DaemonStartOptions{DaemonServeOptions: *newDaemonServeOptions(f)}
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start a detached daemon and return once it accepts connections",
		Long: `Start a daemon in the background (a new session, detached from the terminal)
and return once its socket accepts connections. Logs go to --log-file
(default: the socket path with ".log" appended). With --token-fd the token is
forwarded to the daemon over a pipe, never through disk, argv or environment.

Without --socket it serves $SOUS_SOCKET, else claustrum's default
~/.claude/remote/rpc.sock, whose directory it creates (0700); 'sous daemon
stop' and 'sous daemon bridge' without --socket find it there.`,
		Example: `  printf '%s\n' "$TOKEN" | sous daemon start --socket "$XDG_RUNTIME_DIR/sous.sock" --token-fd 0
  sous daemon start --token-fd 0 < ~/.sous-token     # on ~/.claude/remote/rpc.sock
  install -m 600 /dev/null ~/.sous-token && printf '%s\n' "$TOKEN" > ~/.sous-token
  sous daemon start --socket "$XDG_RUNTIME_DIR/sous.sock" --token-file ~/.sous-token --retain-for 2h --wait 30`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if opts.Socket == "" {
				return usageErrorf("start needs a --socket: it waits for the socket, and stop talks to it")
			}
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return daemonStartRun(opts)
		},
	}
	opts.register(cmd, f)
	// start needs its socket (it waits for it, and stop talks to it), so a
	// WebSocket-only daemon is serve's alone.
	cmd.Flags().Lookup("listen").Usage = "also serve JSON-RPC over WebSocket at `ws://HOST:PORT[/PATH]` (path default /; repeatable)"
	cmd.Flags().StringVar(&opts.LogFile, "log-file", "", "file for the daemon's logs (default SOCKET.log)")
	durationVar(cmd.Flags(), &opts.Wait, "wait", 10*time.Second, "how long to wait for the socket to accept (30s, or 30 for seconds)")
	return cmd
}

// daemonStartRun starts `sous daemon serve` with the same flags in a
// session of its own, and returns once it listens.
func daemonStartRun(o *DaemonStartOptions) error {
	streams, wait := o.IO, o.Wait
	if err := o.checkSocket(); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start: find own executable: %w", err)
	}
	if dir := filepath.Dir(o.Socket); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("start: --socket %s: its directory: %w", o.Socket, err)
		}
	}
	logPath := o.LogFile
	if logPath == "" {
		logPath = o.Socket + ".log"
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start: log file: %w", err)
	}
	defer logf.Close()
	// Read the token here, once nothing else can fail first, so a missing
	// or bad token fails in the foreground with a clear message; then
	// forward it over a pipe.
	token, err := o.readToken()
	if err != nil {
		return err
	}
	tokR, tokW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer tokR.Close()

	args := []string{"daemon", "serve", "--socket", o.Socket, "--token-fd", "3",
		"--log-format", o.LogFormat,
		"--replay-mem-limit", strconv.Itoa(o.ReplayMemLimit),
		"--replay-disk-limit", strconv.FormatInt(o.ReplayDiskLimit, 10),
		"--replay-disk-total", strconv.FormatInt(o.ReplayDiskTotal, 10),
		"--replay-mem-total", strconv.Itoa(o.ReplayMemTotal),
		"--retain-exited", strconv.Itoa(o.RetainExited), "--retain-for", o.RetainFor.String(),
		"--extract-max-bytes", strconv.FormatInt(o.ExtractMaxBytes, 10),
		"--extract-max-ratio", strconv.FormatFloat(o.ExtractMaxRatio, 'g', -1, 64)}
	if o.StateDir != "" {
		args = append(args, "--state-dir", o.StateDir)
	}
	if o.KeepChildren {
		args = append(args, "--keep-children")
	}
	if !o.LoginPath {
		args = append(args, "--login-path=false")
	}
	for _, c := range o.AllowCommands {
		args = append(args, "--allow-command", c)
	}
	for _, l := range o.Listen {
		args = append(args, "--listen", l)
	}
	args = append(args, "--ws-require-bearer="+strconv.FormatBool(o.WSRequireBearer),
		"--max-connections", strconv.Itoa(o.MaxConnections))
	if o.MetricsAddr != "" {
		args = append(args, "--metrics-addr", o.MetricsAddr)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer readyR.Close()
	args = append(args, "--ready-fd", "4")
	child := exec.Command(self, args...)
	child.Stdout, child.Stderr = logf, logf
	child.ExtraFiles = []*os.File{tokR, readyW} // fds 3 and 4
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// claustrum's daemon marks its environment so children can tell they run
	// under a detached daemon; keep that parity (serve marks its children's
	// too, daemon_env.go).
	child.Env = append(slices.Clip(o.Environ), "CLAUDE_SSH_DAEMON_CHILD=1")
	err = child.Start()
	readyW.Close() // the child's now; EOF on readyR once it exits
	if err != nil {
		tokW.Close()
		return fmt.Errorf("start daemon: %w", err)
	}
	fmt.Fprintf(tokW, "%s\n", token)
	tokW.Close()

	// The child says "ready" once it listens. A socket that accepts is not
	// enough: another daemon may already be serving it, while this one
	// failed to listen and exits.
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(readyR).ReadString('\n')
		ready <- line == "ready\n"
	}()
	select {
	case ok := <-ready:
		if ok {
			if err := o.removeTokenFile(); err != nil {
				// The daemon serves; only the file stays behind.
				fmt.Fprintf(streams.ErrOut, "sous: %v\n", err)
			}
			fmt.Fprintf(streams.Out, "sous daemon started (pid %d) on %s, logs in %s\n", child.Process.Pid, o.Socket, logPath)
			child.Process.Release()
			return nil
		}
		err := child.Wait()
		return fmt.Errorf("daemon exited during start (%v); its log %s ends with:\n%s", err, logPath, tail(logPath, 10))
	case <-time.After(wait):
		child.Process.Kill()
		child.Wait()
		return fmt.Errorf("daemon did not listen on %s within %s; see %s", o.Socket, wait, logPath)
	}
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
