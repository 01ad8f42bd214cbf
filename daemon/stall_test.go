package daemon

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// A client that stops reading the stream it follows can still be heard: the
// requests it sends after that, cheap ones first, are read and run even
// though none of their responses can be written yet.
func TestStalledStreamDoesNotStallRequests(t *testing.T) {
	d := startDaemon(t, Config{})
	nc, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	send := func(id int, method, params string) {
		line := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"` + method + `","params":` + params + `,"auth":"` + testToken + `"}` + "\n"
		if _, err := nc.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	send(1, "process.spawn", `{"id":"flood","command":"yes"}`)
	// Nothing is read: the socket's buffers fill and the stream stalls.
	deadline := time.Now().Add(10 * time.Second)
	for d.srv.Registry().Get("flood") == nil || d.srv.Registry().Get("flood").Log.Stats().LastSeq < 200 {
		if time.Now().After(deadline) {
			t.Fatal("the flood did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	for i := range 20 {
		send(100+i, "server.ping", `{}`)
	}
	send(2, "process.kill", `{"id":"flood","signal":"KILL"}`)
	// The child dies (its output stays queued behind the stalled stream, so
	// its exit frame cannot go in yet: it is the pid that tells).
	waitGone(t, d.srv.Registry().Get("flood").Pid, 10*time.Second)
}
