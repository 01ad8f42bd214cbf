package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// stdioRequest is connection.stdio as the bridge sends it: the first line
// of its connection, with its stdin and stdout passed alongside. It carries
// no token (the bridge has none; docs/PROTOCOL.md §6.26 says why none is
// needed), so a daemon without the extension refuses it as unauthorized,
// and a sous daemon with it disabled as an unknown method.
var stdioRequest = []byte(`{"jsonrpc":"2.0","id":"sous-bridge","method":"` + wire.StdioMethod + `","params":{}}` + "\n")

// passStdio offers the daemon the bridge's stdin and stdout
// (connection.stdio). When the daemon takes them, the bridge lets go of its
// own copies, waits for the daemon to end the connection and returns
// handed: sshd sees the session end when the daemon closes them and the
// bridge exits. Otherwise it returns the connection to relay through and
// the reader of the daemon's side (what the refusal's read may have
// buffered comes first); a daemon that hung up on the request is dialled
// again.
func passStdio(uc *net.UnixConn, streams *IO, socket string) (handed bool, conn net.Conn, fromDaemon io.Reader, err error) {
	in, inOK := streams.In.(*os.File)
	out, outOK := streams.Out.(*os.File)
	if !inOK || !outOK || !isStream(in) || !isStream(out) {
		return false, uc, uc, nil // a terminal or a file: nothing to gain, relay
	}
	if err := sendWithFiles(uc, stdioRequest, in, out); err != nil {
		return false, uc, uc, nil // relay what the socket still takes; it says so if nothing
	}
	br := bufio.NewReader(uc)
	answer, rerr := br.ReadSlice('\n')
	if rerr != nil {
		// Hung up on a request it did not know: a fresh connection for
		// the relay.
		uc.Close()
		nc, err := net.Dial("unix", socket)
		if err != nil {
			return false, nil, nil, fmt.Errorf("dial server: %w", err)
		}
		return false, nc, nc, nil
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(answer, &resp) != nil || resp.Result == nil || resp.Error != nil {
		return false, uc, br, nil
	}
	// The daemon holds them now. Our copies go, so that the session ends
	// when the daemon closes its own, whatever the bridge is doing.
	releaseStdio(in, out)
	io.Copy(io.Discard, br) // until the daemon ends the connection
	uc.Close()
	return true, nil, nil, nil
}

// isStream reports whether f is a pipe or a socket: what sshd gives a
// session's command, and what the daemon takes.
func isStream(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0
}

// sendWithFiles writes line to uc in one sendmsg, with files passed as
// SCM_RIGHTS, without putting them into blocking mode (File.Fd would).
func sendWithFiles(uc *net.UnixConn, line []byte, files ...*os.File) error {
	fds := make([]int, 0, len(files))
	for _, f := range files {
		rc, err := f.SyscallConn()
		if err != nil {
			return err
		}
		if err := rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) }); err != nil {
			return err
		}
	}
	_, _, err := uc.WriteMsgUnix(line, unix.UnixRights(fds...), nil)
	runtime.KeepAlive(files)
	return err
}

// releaseStdio puts /dev/null in place of files' descriptors: the numbers
// stay taken (nothing else is opened onto them), the pipes are let go.
func releaseStdio(files ...*os.File) {
	null, err := unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(null)
	for _, f := range files {
		rc, err := f.SyscallConn()
		if err != nil {
			continue
		}
		_ = rc.Control(func(fd uintptr) { unix.Dup3(null, int(fd), 0) })
	}
}
