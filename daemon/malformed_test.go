package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// corpusCase is one line of testdata/malformed.txt.
type corpusCase struct {
	name   string
	expect string // an error code, "result", "none" or "close"
	line   []byte
}

// loadCorpus reads testdata/malformed.txt (its header says the format).
func loadCorpus(t *testing.T, token string) []corpusCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/malformed.txt")
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	for n, l := range strings.Split(string(raw), "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 {
			t.Fatalf("testdata/malformed.txt:%d: want NAME<TAB>EXPECT<TAB>LINE", n+1)
		}
		line, err := expandCorpusLine(f[2], token)
		if err != nil {
			t.Fatalf("testdata/malformed.txt:%d: %v", n+1, err)
		}
		cases = append(cases, corpusCase{name: f[0], expect: f[1], line: line})
	}
	return cases
}

// expandCorpusLine evaluates `"text" + N*"text" + @N*"x"`.
func expandCorpusLine(expr, token string) ([]byte, error) {
	type term struct {
		text   string
		repeat int
		fill   bool
	}
	var terms []term
	rest := strings.TrimSpace(expr)
	for rest != "" {
		var tm term
		tm.repeat = 1
		if star := strings.Index(rest, "*\""); star > 0 && !strings.HasPrefix(rest, "\"") {
			num := rest[:star]
			if strings.HasPrefix(num, "@") {
				tm.fill, num = true, num[1:]
			}
			n, err := strconv.Atoi(num)
			if err != nil {
				return nil, fmt.Errorf("bad repeat %q", rest[:star])
			}
			tm.repeat = n
			rest = rest[star+1:]
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return nil, fmt.Errorf("want a Go-quoted string at %.20q", rest)
		}
		tm.text, _ = strconv.Unquote(q)
		tm.text = strings.ReplaceAll(tm.text, "AUTH", token)
		terms = append(terms, tm)
		rest = strings.TrimSpace(rest[len(q):])
		if rest != "" {
			if !strings.HasPrefix(rest, "+") {
				return nil, fmt.Errorf("want + at %.20q", rest)
			}
			rest = strings.TrimSpace(rest[1:])
		}
	}
	fixed := 0
	for _, tm := range terms {
		if !tm.fill {
			fixed += len(tm.text) * tm.repeat
		}
	}
	var b bytes.Buffer
	for _, tm := range terms {
		n := tm.repeat
		if tm.fill {
			if len(tm.text) != 1 || tm.repeat < fixed {
				return nil, errors.New("@N*\"x\" takes one byte and a total at least the rest's length")
			}
			n = tm.repeat - fixed
		}
		b.WriteString(strings.Repeat(tm.text, n))
	}
	return b.Bytes(), nil
}

// TestMalformedCorpus replays every line of testdata/malformed.txt (invalid
// JSON and UTF-8, NUL bytes, 10,000-deep nesting, huge numbers, wrong types,
// duplicate keys, lines at and past 1 MiB, ...) against a real daemon on its
// socket, each on a fresh connection followed by a ping: every line gets the
// answer the table documents (or, for 1 MiB and more, the connection closes
// with no reply), the connection still serves the ping, and the daemon
// answers a ping on a new connection at the end.
func TestMalformedCorpus(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{Dir: t.TempDir()})
	cases := loadCorpus(t, testToken)
	if len(cases) < 50 {
		t.Fatalf("only %d cases", len(cases))
	}
	sentinel := `{"jsonrpc":"2.0","id":"sentinel","method":"server.ping","auth":` + string(wire.QuoteID(testToken)) + "}\n"
	wantSentinel := `{"jsonrpc":"2.0","id":"sentinel","result":{"pong":true}}`
	counts := map[string]int{}
	for _, tc := range cases {
		counts[tc.expect]++
		nc, err := net.Dial("unix", d.sock)
		if err != nil {
			t.Fatalf("%s: the daemon stopped accepting: %v", tc.name, err)
		}
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		wrote := make(chan error, 1)
		go func() {
			_, err := nc.Write(append(bytes.Clone(tc.line), '\n'))
			if err == nil && tc.expect != "close" {
				_, err = io.WriteString(nc, sentinel)
			}
			wrote <- err
		}()
		r := bufio.NewReaderSize(nc, 1<<20)
		if tc.expect == "close" {
			got, err := r.ReadBytes('\n')
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isConnReset(err) {
				t.Errorf("%s (%d bytes): want the connection closed without a reply, got %.200q, %v", tc.name, len(tc.line), got, err)
			} else if len(got) > 0 {
				t.Errorf("%s: a reply before the close: %.200q", tc.name, got)
			}
			nc.Close()
			<-wrote // a write into a closed connection may fail; that is the point
			continue
		}
		var reply []byte
		sawSentinel := false
		for !sawSentinel || (reply == nil && tc.expect != "none") {
			got, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatalf("%s: connection ended (%v) after %q", tc.name, err, reply)
			}
			switch {
			case strings.TrimSuffix(string(got), "\n") == wantSentinel && !sawSentinel:
				sawSentinel = true
			case reply == nil && tc.expect != "none":
				reply = got
			default:
				t.Fatalf("%s: unexpected extra line %.200q", tc.name, got)
			}
		}
		if err := <-wrote; err != nil {
			t.Fatalf("%s: write: %v", tc.name, err)
		}
		nc.Close()
		if tc.expect == "none" {
			continue
		}
		var resp struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *wire.Error     `json:"error"`
		}
		if err := json.Unmarshal(reply, &resp); err != nil || resp.JSONRPC != "2.0" {
			t.Errorf("%s: the reply is not a JSON-RPC response: %.200q (%v)", tc.name, reply, err)
			continue
		}
		got := "result"
		if resp.Error != nil {
			got = strconv.Itoa(resp.Error.Code)
		}
		if got != tc.expect || (resp.Error == nil) == (resp.Result == nil) {
			t.Errorf("%s: got %.300s, want %s", tc.name, reply, tc.expect)
		}
		if got == "-32700" && string(resp.ID) != "null" {
			t.Errorf("%s: a parse error must carry id null: %.200q", tc.name, reply)
		}
	}
	// Still alive and serving.
	c := d.dial()
	c.wantResult("server.ping", "", `{"pong":true}`)
	if t.Failed() {
		return
	}
	t.Logf("%d malformed lines replayed (%v): every one got its documented answer; the daemon still answers ping", len(cases), counts)
}

func isConnReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}
