package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// oversizedMarker as the first byte of a fuzz input asks for the line to be
// padded past the limit.
const oversizedMarker = 0xff

// fuzzSeeds are lines that reach every stage of the validation order.
var fuzzSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":"x","method":"server.capabilities","params":[1],"auth":"AUTH"}`,
	`{"jsonrpc":"1.0","id":2,"method":"server.version","auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":3,"method":"server.ping","auth":"wrong"}`,
	`{"jsonrpc":"2.0","id":4,"method":"nodot","auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":5,"method":"nope.x","auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":6,"method":"files.nope","auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":7,"method":"files.stat","params":{"path":"/etc/hostname"},"auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":8,"method":"files.read","params":{"path":"/etc/hostname","maxBytes":"4"},"auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":9,"method":"files.list","params":{"path":"/nonexistent"},"auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":10,"method":"files.validate","params":{"path":"/"},"auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":11,"method":"process.stdin","params":{"id":"p","data":"aGk=","offset":3},"auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":12,"method":"process.kill","params":{"id":"p","signal":"KILL"},"auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":13,"method":"process.killAndWait","params":{"id":"p","timeoutMs":-1},"auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":14,"method":"process.reattach","params":{"id":"p","fromSeq":0,"wantPid":true},"auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":15,"method":"process.list","params":{},"auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":16,"method":"git.status","params":{"path":"/","baseRepo":[1,2]},"auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":17,"method":"server.shutdown","auth":"AUTH"}`,
	`{"jsonrpc":"2.0","id":null,"method":"process.stdin","params":"x","auth":"AUTH"}`,
	`{"id":18}`,
	`{"jsonrpc":"2.0","id":1,`,
	`  `,
	`[1,2]`,
	"\xff" + `{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"AUTH","pad":"`,
}

// unsafeMethods have side effects outside the daemon (spawning arbitrary
// programs, deleting directories): a fuzzer must not reach them with a
// valid token.
var unsafeMethods = map[string]bool{
	"process.spawn": true, "files.extract_tar": true,
	"git.worktree_create": true, "git.worktree_remove": true,
}

// expectation is what the contract says one line gets.
type expectation struct {
	reply   bool   // false: no reply at all (blank line, authorized shutdown)
	closes  bool   // the connection closes without a reply (oversized line)
	code    int    // a fixed error code, 0 when the method decides
	message string // the fixed message for code, "" when the method decides
	id      string // the id the reply echoes
}

func expect(line []byte, token string) (e expectation, skip bool) {
	if len(line) > wire.MaxLine {
		return expectation{closes: true}, false
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return expectation{}, false
	}
	var req wire.Request
	if err := json.Unmarshal(line, &req); err != nil {
		return expectation{reply: true, code: wire.CodeParseError, message: wire.MsgParseError, id: "null"}, false
	}
	id := string(req.ID)
	if id == "" {
		id = "null"
	}
	e = expectation{reply: true, id: id}
	switch {
	case req.Auth != token:
		e.code, e.message = wire.CodeUnauthorized, wire.MsgUnauthorized
	case req.JSONRPC != "2.0":
		e.code, e.message = wire.CodeInvalidRequest, wire.MsgInvalidVersion
	case req.Method == "server.shutdown":
		e.reply = false
	case !strings.Contains(req.Method, "."):
		e.code, e.message = wire.CodeMethodNotFound, "Invalid method format: "+req.Method
	case unsafeMethods[req.Method]:
		return e, true
	}
	return e, false
}

func FuzzRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(strings.ReplaceAll(s, "AUTH", testToken)))
	}
	srv, err := New(Config{Token: testToken, Dir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()

	f.Fuzz(func(t *testing.T, in []byte) {
		line := bytes.ReplaceAll(in, []byte("\n"), []byte(" ")) // one line per input
		if len(line) > 0 && line[0] == oversizedMarker && len(line) > 1 {
			line = append(line[1:], bytes.Repeat([]byte("x"), wire.MaxLine)...)[:wire.MaxLine+1]
		}
		e, skip := expect(line, testToken)
		if skip {
			t.Skip("unsafe method")
		}
		client, server := net.Pipe()
		defer client.Close()
		srv.ServeConn(server)
		client.SetDeadline(time.Now().Add(30 * time.Second))

		sentinel := `{"jsonrpc":"2.0","id":"sentinel","method":"server.ping","auth":` + string(wire.QuoteID(testToken)) + "}\n"
		writeErr := make(chan error, 1)
		go func() {
			_, err := client.Write(append(line, '\n'))
			if err == nil && !e.closes {
				_, err = io.WriteString(client, sentinel)
			}
			writeErr <- err
		}()
		r := bufio.NewReader(client)
		if e.closes {
			if got, err := r.ReadBytes('\n'); !errors.Is(err, io.EOF) {
				t.Fatalf("oversized line answered: %q %v", got, err)
			}
			return
		}
		want := 1 // the sentinel's reply
		if e.reply {
			want++
		}
		var replies [][]byte
		sawSentinel := false
		for len(replies)+boolInt(sawSentinel) < want {
			got, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatalf("after %d replies: %v", len(replies), err)
			}
			if string(got) == `{"jsonrpc":"2.0","id":"sentinel","result":{"pong":true}}`+"\n" && !sawSentinel {
				sawSentinel = true
				continue
			}
			replies = append(replies, got)
		}
		if err := <-writeErr; err != nil {
			t.Fatal(err)
		}
		if !e.reply {
			if len(replies) != 0 {
				t.Fatalf("%q: unexpected reply %q", line, replies)
			}
			return
		}
		if len(replies) != 1 {
			t.Fatalf("%q: %d replies", line, len(replies))
		}
		checkReply(t, line, replies[0], e)
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkReply verifies the reply is one of the documented answers.
func checkReply(t *testing.T, line, reply []byte, e expectation) {
	t.Helper()
	var resp struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *wire.Error     `json:"error"`
	}
	if bytes.Count(reply, []byte("\n")) != 1 || json.Unmarshal(reply, &resp) != nil || resp.JSONRPC != "2.0" {
		t.Fatalf("%q: bad reply %q", line, reply)
	}
	if string(resp.ID) != e.id {
		t.Fatalf("%q: reply id %s, want %s", line, resp.ID, e.id)
	}
	if (resp.Result == nil) == (resp.Error == nil) {
		t.Fatalf("%q: reply %q has not exactly one of result and error", line, reply)
	}
	if e.code != 0 {
		if resp.Error == nil || resp.Error.Code != e.code || resp.Error.Message != e.message {
			t.Fatalf("%q: got %q, want %d %q", line, reply, e.code, e.message)
		}
		return
	}
	if resp.Error != nil {
		switch resp.Error.Code {
		case wire.CodeMethodNotFound:
			if !strings.HasPrefix(resp.Error.Message, "Unknown namespace: ") && !strings.HasPrefix(resp.Error.Message, "Unknown method: ") {
				t.Fatalf("%q: %q", line, reply)
			}
		case wire.CodeInvalidParams, wire.CodeInternal, wire.CodeStdinGap:
		default:
			t.Fatalf("%q: undocumented error %q", line, reply)
		}
	}
}
