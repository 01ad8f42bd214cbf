// Package methodcount is a test helper that counts the requests a client
// sends a daemon, by method: a Unix-socket relay that passes every byte on
// unchanged and reads the method of each JSON-RPC line going to the daemon.
// Tests use it to prove what a client does not send (a process.stdin per
// command, say).
//
//	r := methodcount.Start(t, daemonSocket)
//	c, _ := client.DialUnix(ctx, r.Path(), token, client.Options{})
//	... // work through c
//	if n := r.Count("process.stdin"); n != 0 { ... }
//
// Descriptors passed with a line (SCM_RIGHTS) do not cross it, as they
// would not cross socat: a client spawns unmirrored through it.
package methodcount

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// Relay counts the requests relayed to its target, by method.
type Relay struct {
	path, target string
	ln           net.Listener
	mu           sync.Mutex
	counts       map[string]int
	conns        map[net.Conn]struct{}
	wg           sync.WaitGroup
}

// Start relays connections to its socket to target until the test ends.
func Start(tb testing.TB, target string) *Relay {
	tb.Helper()
	path := filepath.Join(testutil.ShortTempDir(tb), "r")
	ln, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatalf("methodcount: listen: %v", err)
	}
	r := &Relay{path: path, target: target, ln: ln, counts: map[string]int{}, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	tb.Cleanup(r.Close)
	return r
}

// Path is the socket clients dial instead of the target's.
func (r *Relay) Path() string { return r.path }

// Count is how many requests of method have gone to the target so far.
func (r *Relay) Count(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[method]
}

// Close stops accepting and cuts the connections relayed.
func (r *Relay) Close() {
	r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		d, err := net.Dial("unix", r.target)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns[c], r.conns[d] = struct{}{}, struct{}{}
		r.mu.Unlock()
		r.wg.Add(2)
		go func() { defer r.wg.Done(); io.Copy(c, d); c.Close() }()
		go func() { defer r.wg.Done(); r.requests(c, d); d.Close() }()
	}
}

// requests copies what the client sends, line by line, counting each
// request's method.
func (r *Relay) requests(from, to net.Conn) {
	in := bufio.NewReaderSize(from, 64<<10)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var req struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(line, &req) == nil && req.Method != "" {
				r.mu.Lock()
				r.counts[req.Method]++
				r.mu.Unlock()
			}
			if _, werr := to.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
