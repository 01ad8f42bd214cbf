package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// readToken gets the token from --token-file or --token-fd. It is checked
// before anything else: the daemon never starts unauthenticated.
func (o *DaemonServeOptions) readToken() (string, error) {
	token, err := o.readTokenLine()
	if err == nil && token == "" {
		// docs/PROTOCOL.md: the daemon never starts unauthenticated, and a
		// request without "auth" would match an empty token.
		err = errors.New("the token is empty: the daemon never runs unauthenticated")
	}
	return token, err
}

// readTokenLine reads the token as a line (one trailing \n or \r\n
// stripped; other whitespace kept) from --token-file or --token-fd.
func (o *DaemonServeOptions) readTokenLine() (string, error) {
	switch {
	case o.TokenFile != "" && o.TokenFD >= 0:
		return "", usageErrorf("use either --token-file or --token-fd, not both")
	case o.TokenFile != "":
		// Deleted only once the daemon serves (removeTokenFile): a daemon
		// that cannot listen leaves the token where it was for the next try.
		if err := checkTokenFileMode(o.TokenFile); err != nil {
			return "", err
		}
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return "", fmt.Errorf("read --token-file: %w", err)
		}
		return client.StripTokenNewline(string(b)), nil
	case o.TokenFD >= 0:
		f := os.NewFile(uintptr(o.TokenFD), "token-fd")
		if f == nil {
			return "", fmt.Errorf("read --token-fd %d: not an open descriptor", o.TokenFD)
		}
		defer f.Close()
		line, err := bufio.NewReader(f).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read --token-fd %d: %w", o.TokenFD, err)
		}
		return client.StripTokenNewline(line), nil
	}
	return "", errors.New("daemon requires --token-file or --token-fd")
}

// checkTokenFileMode refuses a regular token file that other users may
// read or write, as ssh refuses such a private key: whoever reads the token
// runs anything as the daemon's user, whoever writes it chooses it. A pipe
// or a descriptor (/dev/stdin, <(...)) stores nothing and is not checked.
func checkTokenFileMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("read --token-file: %w", err)
	}
	if perm := fi.Mode().Perm(); fi.Mode().IsRegular() && perm&0o077 != 0 {
		return fmt.Errorf("--token-file %s: its mode %04o lets other users read or change the token; chmod 600 %s (or pass the token on --token-fd)", path, perm, path)
	}
	return nil
}

// removeTokenFile deletes --token-file once the daemon listens: the token
// is the daemon's alone from then on. Only a regular file is deleted: a
// pipe or a descriptor (/dev/stdin) stores nothing, and is not the
// daemon's to unlink.
func (o *DaemonServeOptions) removeTokenFile() error {
	if o.TokenFile == "" {
		return nil
	}
	if fi, err := os.Lstat(o.TokenFile); err == nil && !fi.Mode().IsRegular() {
		return nil
	}
	if err := os.Remove(o.TokenFile); err != nil {
		return fmt.Errorf("remove --token-file after reading it: %w", err)
	}
	return nil
}
