package client

import (
	"encoding/json"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// parseResult takes the daemon's own successful responses and leaves every
// other line to encoding/json, which must then agree with it.
func TestParseResult(t *testing.T) {
	for _, tc := range []struct {
		line   string
		id     uint64
		result string
		ok     bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"pong":true}}`, 7, `{"pong":true}`, true},
		{`{"jsonrpc":"2.0","id":18446744073709551615,"result":[1,"}"]}`, 18446744073709551615, `[1,"}"]`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"a":1},"extra":{"b":2}}`, 0, "", false},
		{`{"jsonrpc":"2.0","id":1,"result":{"a":1}`, 0, "", false},
		{`{"jsonrpc":"2.0","id":01,"result":{}}`, 0, "", false},
		{`{"jsonrpc":"2.0","id":18446744073709551616,"result":{}}`, 0, "", false},
		{`{"jsonrpc":"2.0","id":"a","result":{}}`, 0, "", false},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}`, 0, "", false},
		{`{"jsonrpc":"2.0","id":4,"result":}`, 0, "", false},
	} {
		id, result, ok := parseResult([]byte(tc.line))
		if ok != tc.ok || id != tc.id || string(result) != tc.result {
			t.Errorf("%s: got %d %q %v, want %d %q %v", tc.line, id, result, ok, tc.id, tc.result, tc.ok)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"server.ping", "", "t0ken with spaces ", "a\"b\\c", "\x00\n", "<&>", "héllo", "\xff"} {
		want, _ := json.Marshal(s)
		if got := wire.AppendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("%q: got %s, want x%s", s, got, want)
		}
	}
}
