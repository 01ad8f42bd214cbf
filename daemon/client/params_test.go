package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// TestExplainInvalidParams: the daemon answers a mistyped member with the
// bare -32602 "Invalid params" docs/PROTOCOL.md §2.1 prescribes; the client can say
// which member, from the param types it shares with the daemon. Each case
// is checked against a real daemon first, so the explanation never covers
// an answer the daemon does not give.
func TestExplainInvalidParams(t *testing.T) {
	_, c := embeddedDaemon(t)
	for _, tc := range []struct {
		method, params, want string
	}{
		{"files.stat", `{"path":5}`, "path: want string, got number"},
		{"files.read", `{"path":"/etc/hosts","maxBytes":"4"}`, "maxBytes: want integer, got string"},
		{"files.read", `{"path":"/etc/hosts","maxBytes":1.5}`, "maxBytes: want integer, got number 1.5"},
		{"git.status", `{"path":["."]}`, "path: want string, got array"},
		{"process.spawn", `{"id":"x","command":"echo","args":"hi"}`, "args: want array of strings, got string"},
		{"process.spawn", `{"id":"x","pipeline":[["echo",1]]}`, "pipeline: want string, got number"},
		{"process.spawn", `{"id":"x","command":"sh","tty":true,"size":{"rows":"24"}}`, "size.rows: want integer, got string"},
		{"process.kill", `{"id":7}`, "id: want string, got number"},
		{"process.kill", `{"id":"x","escalate":"yes"}`, "escalate: want boolean, got string"},
		{"files.stat", `"/etc/hosts"`, "params: want an object, got a string"},
		{"files.stat", `["/etc/hosts"]`, "params: want an object, got an array"},
		{"files.stat", ``, "params: want an object, got none"},
	} {
		var params any
		if tc.params != "" {
			params = json.RawMessage(tc.params)
		}
		err := c.Call(context.Background(), tc.method, params, nil)
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeInvalidParams || we.Message != wire.MsgInvalidParams {
			t.Errorf("%s %s: the daemon answered %v, not Invalid params", tc.method, tc.params, err)
			continue
		}
		if got := client.ExplainInvalidParams(tc.method, json.RawMessage(tc.params)); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.params, got, tc.want)
		}
	}
	// Nothing to say where the params decode, or the method is no
	// namespace's with params.
	for _, tc := range [][2]string{{"files.stat", `{"path":"/"}`}, {"server.ping", `{"x":1}`}, {"nope.x", `{"path":5}`}} {
		if got := client.ExplainInvalidParams(tc[0], json.RawMessage(tc[1])); got != "" {
			t.Errorf("%s %s: %q, want nothing", tc[0], tc[1], got)
		}
	}
}
