package daemon

import (
	"strings"
	"testing"
	"time"
)

// Every line here is sent as is; the reply must match byte for byte.
// AUTH stands for the valid token.
func TestValidationOrder(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	checkValidationOrder(t, d.dial())
}

// checkValidationOrder is the validation table, on any transport.
func checkValidationOrder(t *testing.T, c *rawClient) {
	const (
		unauth   = `"error":{"code":-32001,"message":"Unauthorized: invalid or missing auth token"}}`
		version  = `"error":{"code":-32600,"message":"Invalid JSON-RPC version"}}`
		badParam = `"error":{"code":-32602,"message":"Invalid params"}}`
	)
	cases := []struct {
		name, line, reply string
	}{
		// parse
		{"malformed", `{"jsonrpc":"2.0","id":1,`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{"garbage", `hello`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"AUTH"} x`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		// auth before version
		{"no auth", `{"jsonrpc":"2.0","id":2,"method":"server.ping"}`, `{"jsonrpc":"2.0","id":2,` + unauth},
		{"wrong auth", `{"jsonrpc":"2.0","id":3,"method":"server.ping","auth":"nope"}`, `{"jsonrpc":"2.0","id":3,` + unauth},
		{"token prefix", `{"jsonrpc":"2.0","id":3,"method":"server.ping","auth":"s3cret"}`, `{"jsonrpc":"2.0","id":3,` + unauth},
		{"no auth wrong version", `{"jsonrpc":"1.0","id":4,"method":"server.ping"}`, `{"jsonrpc":"2.0","id":4,` + unauth},
		{"no auth no version", `{"id":5,"method":"nope"}`, `{"jsonrpc":"2.0","id":5,` + unauth},
		{"empty object", `{}`, `{"jsonrpc":"2.0","id":null,` + unauth},
		// version
		{"wrong version", `{"jsonrpc":"1.0","id":6,"method":"server.ping","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":6,` + version},
		{"no version", `{"id":7,"method":"server.ping","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":7,` + version},
		{"version before method", `{"id":8,"method":"foo","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":8,` + version},
		// method
		{"no dot", `{"jsonrpc":"2.0","id":9,"method":"foo","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"Invalid method format: foo"}}`},
		{"no method", `{"jsonrpc":"2.0","id":9,"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"Invalid method format: "}}`},
		{"unknown namespace", `{"jsonrpc":"2.0","id":10,"method":"nope.x","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":10,"error":{"code":-32601,"message":"Unknown namespace: nope"}}`},
		{"unknown method", `{"jsonrpc":"2.0","id":11,"method":"files.nope","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":11,"error":{"code":-32601,"message":"Unknown method: files.nope"}}`},
		{"unknown method with bad params", `{"jsonrpc":"2.0","id":12,"method":"process.nope","params":"x","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":12,"error":{"code":-32601,"message":"Unknown method: process.nope"}}`},
		{"unknown server method", `{"jsonrpc":"2.0","id":13,"method":"server.nope","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":13,"error":{"code":-32601,"message":"Unknown method: server.nope"}}`},
		{"unknown method, no params", `{"jsonrpc":"2.0","id":14,"method":"git.nope","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":14,"error":{"code":-32601,"message":"Unknown method: git.nope"}}`},
		// params presence
		{"files no params", `{"jsonrpc":"2.0","id":20,"method":"files.stat","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":20,` + badParam},
		{"git no params", `{"jsonrpc":"2.0","id":21,"method":"git.info","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":21,` + badParam},
		{"process no params", `{"jsonrpc":"2.0","id":22,"method":"process.spawn","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":22,` + badParam},
		{"killAndWait no params", `{"jsonrpc":"2.0","id":23,"method":"process.killAndWait","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":23,` + badParam},
		{"list no params", `{"jsonrpc":"2.0","id":24,"method":"process.list","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":24,` + badParam},
		{"null params", `{"jsonrpc":"2.0","id":25,"method":"process.reattach","params":null,"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":25,` + badParam},
		// {} runs the method's own validation
		{"empty spawn", `{"jsonrpc":"2.0","id":30,"method":"process.spawn","params":{},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":30,"error":{"code":-32602,"message":"Process ID is required"}}`},
		{"spawn no command", `{"jsonrpc":"2.0","id":31,"method":"process.spawn","params":{"id":"a"},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":31,"error":{"code":-32602,"message":"Command is required"}}`},
		{"empty killAndWait", `{"jsonrpc":"2.0","id":32,"method":"process.killAndWait","params":{},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":32,"error":{"code":-32602,"message":"Process ID is required"}}`},
		{"empty stat", `{"jsonrpc":"2.0","id":33,"method":"files.stat","params":{},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":33,"result":{"exists":false,"isDir":false,"size":0,"mode":""}}`},
		{"empty extract", `{"jsonrpc":"2.0","id":34,"method":"files.extract_tar","params":{},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":34,"error":{"code":-32602,"message":"archivePath and destDir are required"}}`},
		{"empty worktree_create", `{"jsonrpc":"2.0","id":35,"method":"git.worktree_create","params":{},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":35,"error":{"code":-32602,"message":"branchName is required"}}`},
		{"empty list", `{"jsonrpc":"2.0","id":36,"method":"process.list","params":{},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":36,"result":{"processes":[]}}`},
		// mistyped params
		{"maxBytes string", `{"jsonrpc":"2.0","id":40,"method":"files.read","params":{"path":"/etc/hostname","maxBytes":"4"},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":40,` + badParam},
		{"path number", `{"jsonrpc":"2.0","id":41,"method":"files.stat","params":{"path":123},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":41,` + badParam},
		{"params string", `{"jsonrpc":"2.0","id":42,"method":"files.stat","params":"x","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":42,` + badParam},
		{"params array", `{"jsonrpc":"2.0","id":43,"method":"process.spawn","params":["a","b"],"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":43,` + badParam},
		{"params number", `{"jsonrpc":"2.0","id":44,"method":"git.status","params":1,"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":44,` + badParam},
		{"namespace divergence files", `{"jsonrpc":"2.0","id":45,"method":"files.stat","params":{"path":"/","maxBytes":"{"},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":45,` + badParam},
		{"namespace divergence git", `{"jsonrpc":"2.0","id":46,"method":"git.status","params":{"path":"/","baseRepo":[1,2]},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":46,` + badParam},
		{"args not strings", `{"jsonrpc":"2.0","id":47,"method":"process.spawn","params":{"id":"a","command":"true","args":[1]},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":47,` + badParam},
		{"env value number", `{"jsonrpc":"2.0","id":48,"method":"process.spawn","params":{"id":"a","command":"true","env":{"A":1}},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":48,` + badParam},
		{"timeoutMs string", `{"jsonrpc":"2.0","id":49,"method":"process.killAndWait","params":{"id":"a","timeoutMs":"5"},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":49,` + badParam},
		{"fromSeq fraction", `{"jsonrpc":"2.0","id":50,"method":"process.reattach","params":{"id":"a","fromSeq":1.5},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":50,` + badParam},
		{"divergence process", `{"jsonrpc":"2.0","id":51,"method":"process.kill","params":{"id":"a","fromSeq":"x"},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":51,` + badParam},
		// unknown keys ignored
		{"unknown keys", `{"jsonrpc":"2.0","id":60,"method":"files.stat","params":{"nope":{"deep":[1]},"zz":"q"},"auth":"AUTH","extra":1}`, `{"jsonrpc":"2.0","id":60,"result":{"exists":false,"isDir":false,"size":0,"mode":""}}`},
		// server.* ignores params of any type
		{"ping params string", `{"jsonrpc":"2.0","id":70,"method":"server.ping","params":"x","auth":"AUTH"}`, `{"jsonrpc":"2.0","id":70,"result":{"pong":true}}`},
		{"ping params array", `{"jsonrpc":"2.0","id":71,"method":"server.ping","params":[1,{}],"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":71,"result":{"pong":true}}`},
		{"ping params object", `{"jsonrpc":"2.0","id":72,"method":"server.ping","params":{"a":"b"},"auth":"AUTH"}`, `{"jsonrpc":"2.0","id":72,"result":{"pong":true}}`},
	}
	for _, tc := range cases {
		line := strings.ReplaceAll(tc.line, "AUTH", testToken) + "\n"
		c.send(line)
		c.waitFor(tc.name, 10*time.Second, func() bool { return len(c.resps) > 0 })
		c.mu.Lock()
		got := string(c.resps[0])
		c.resps = c.resps[1:]
		c.mu.Unlock()
		if got != tc.reply+"\n" {
			t.Errorf("%s:\n sent %s\n got %s\nwant %s", tc.name, tc.line, got, tc.reply)
		}
	}
}
