package client

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

// What a broken link's write fails with, per link: a socket's net errors,
// and the ssh link's pipe to the ssh process (EPIPE once ssh is gone, or
// the pipe closed under it). Each must count as the connection breaking, or
// the call fails for good instead of being resent after the reconnect:
// `sous exec --remote ssh://...` stopped sending stdin after a dropped link.
func TestIsConnErr(t *testing.T) {
	for _, err := range []error{
		&fs.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE},
		fmt.Errorf("send: %w", &fs.PathError{Op: "write", Path: "|1", Err: os.ErrClosed}),
		syscall.ECONNRESET,
	} {
		if !isConnErr(err) {
			t.Errorf("isConnErr(%v) = false", err)
		}
	}
	if isConnErr(errors.New("params: bad")) {
		t.Error("isConnErr of an ordinary error")
	}
}
