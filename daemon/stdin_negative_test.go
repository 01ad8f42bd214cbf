package daemon

import (
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// A negative offset names no place in the stdin stream. The daemon used to
// take it for an overlap and write part of the data (the tail past the
// applied mark); it is refused instead, and nothing reaches the child.
func TestStdinNegativeOffsetRefused(t *testing.T) {
	d := startDaemon(t, Config{})
	c := d.dial()
	c.wantResult("process.spawn", shParams("cat", "cat"), `{"success":true}`)
	c.wantResult("process.stdin", `{"id":"cat","data":"YWJj","offset":0}`, `{"success":true,"applied":3}`)
	// "ZGVmZ2hpamts" is "defghijkl": at offset -3 it would "end" at 6, so
	// its last three bytes were written as if they were the stream's 3..5.
	c.wantError("process.stdin", `{"id":"cat","data":"ZGVmZ2hpamts","offset":-3}`, wire.CodeInvalidParams,
		"Invalid params: offset must not be negative")
	// The slow decoding path (an extra field) checks it too.
	c.wantError("process.stdin", `{"id":"cat","data":"ZGVmZ2hpamts","offset":-3,"extra":[1]}`, wire.CodeInvalidParams,
		"Invalid params: offset must not be negative")
	c.wantResult("process.stdin", `{"id":"cat","data":"","offset":3,"close":true}`, `{"success":true,"applied":3}`)
	if got := string(output(c.waitExit("cat"), wire.Stdout)); got != "abc" {
		t.Fatalf("child read %q, want %q", got, "abc")
	}
}
