package daemon

import (
	"bytes"
	stdbase64 "encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

var fastPathSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"t"}`,
	` {"jsonrpc" : "2.0", "id" : "x\"y", "method":"process.stdin","params":{"id":"p","data":"aGk=","offset":3,"close":true},"auth":"t"} `,
	`{"jsonrpc":"2.0","id":null,"params":null,"auth":null,"method":null}`,
	`{"auth":"a","auth":null,"auth":"b","id":1,"id":[2,{"z":-0.5e+3}]}`,
	`{"Method":"x","ID":2,"paramſ":{}}`,
	`{"jsonrpc":"2.0\u0000","method":"a\/b"}`,
	`{"jsonrpc":2}`, `[1,2]`, `"str"`, `null`, `{}`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, `{"a":"` + "\t" + `"}`,
	`{"id":"p","data":"aGk=","offset":-1}`,
	`{"id":"p","data":"!!","offset":1e3}`,
	`{"id":"p","data":"aGk=","data":"","offset":null,"close":null}`,
	`{"id":"p","data":"aGk\u003d","offset":9223372036854775808}`,
	`{"id":"p","Data":"aGk=","command":1}`,
	`{"id":"p","data":"aGk=","unknown":[1,{"deep":null}],"x":true}`,
	`{"id":"p","data":"aG` + "\xff" + `k=","close":false}`,
	`{"id":"p","data":"aGk=\n"}`,
	`{"id":"\u00e9","data":"aGk="}`,
	`{"ıd":"p"}`, `{"K":1}`,
	// Members of the namespace's extensions, of the wrong type: the slow
	// path refuses them, so the fast one must hand them over.
	`{"id":"p","data":"aGk=","tty":"yes"}`, `{"id":"p","data":"aGk=","Mirror":5}`, `{"id":"p","data":"aGk=","mirrored":1}`,
	// run.append's params (decodeRunAppendFast).
	`{"run":"r1","lease":"0123","at":7,"records":[{"k":"answer","seq":3,"value":{"t":"x:Result","d":{"status":"ok","exit_code":0,"duration":1200}}},{"k":"call","seq":4,"fn":"run","show":"\"true\""}]}`,
	`{"run":"r1","lease":"l","at":0,"records":[],"sync":true}`, `{"run":"r","at":null,"records":null,"sync":null}`,
	`{"run":"r","at":1.5}`, `{"run":"r","at":1e2}`, `{"run":"r","at":-1}`, `{"run":"r","at":99999999999999999999}`,
	`{"run":"r","records":[ 1 , "x" ,null,[{}] ]}`, `{"run":"r","records":{}}`, `{"run":"r","records":[1],"records":[2,3]}`,
	`{"RUN":"r"}`, `{"run":"r","Records":[]}`, `{"run":"r\u0041"}`, `{"run":"r","unknown":[1,2]}`,
	// process.spawn's params (decodeSpawnFast).
	`{"command":"/bin/true","id":"t1","notifyGone":true,"spawnKey":"0123abcd","wantPid":true}`,
	`{"command":"/bin/true","exitSignal":true,"id":"t1","notifyGone":true,"spawnKey":"0123abcd","stdinClosed":true,"wantPid":true}`,
	`{"id":"a","stdinClosed":false,"exitSignal":null,"stdinClosed":true}`, `{"id":"a","stdinClosed":1}`, `{"id":"a","StdinClosed":true}`,
	`{"id":"a","stdinclosed":true}`, `{"id":"a","exitSignal":"true","stdinClosed":true}`, `{"id":"a","tty":true,"stdinClosed":true}`,
	`{"id":"a","command":"sh","args":["-c","echo hi"],"cwd":"/tmp","env":{"A":"1","B":null,"C":""}}`,
	`{"id":"a","args":[],"env":{},"wantPid":false,"notifyGone":null,"cwd":null}`,
	`{"id":"a","args":null,"env":null,"args":["x"],"env":{"A":"1"},"env":{"B":"2","A":null}}`,
	`{"id":"a","env":{"A":"1"},"env":{"B":"2"}}`, `{"id":"a","args":["x",null]}`, `{"id":"a","args":["A"]}`, `{"id":"a","args":"x"}`, `{"id":"a","args":[1]}`,
	`{"id":"a","env":{"A":1}}`, `{"id":"a","env":{"AB":"x"}}`, `{"id":"a","env":["A"]}`, `{"id":"a","env":{"é":"ü"}}`,
	`{"id":"a","Args":["x"]}`, `{"id":"a","WANTPID":true}`, `{"id":"a","wantPid":"yes"}`, `{"id":"a","wantPid":1}`,
	`{"id":"a","command":"x","timeoutMs":5,"tty":true,"size":{"rows":2,"cols":3}}`,
	`{"id":"a","args":["` + "ÿ" + `"],"env":{"K":"v` + "Ã" + `"}}`,
	` { "id" : "a" , "args" : [ "x" , "y" ] , "env" : { "K" : "v" , "L" : null } } `,
}

// The fast path must agree with encoding/json whenever it answers.
func FuzzFastPath(f *testing.F) {
	for _, s := range fastPathSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if validJSON(doc) && !json.Valid(doc) {
			t.Fatalf("validJSON accepts %q", doc)
		}
		if req, ok := parseRequestFast(doc); ok {
			var want wire.Request
			if err := json.Unmarshal(doc, &want); err != nil {
				t.Fatalf("%q: fast path answered, encoding/json: %v", doc, err)
			}
			if req.JSONRPC != want.JSONRPC || req.Method != want.Method || req.Auth != want.Auth ||
				!bytes.Equal(req.ID, want.ID) || !bytes.Equal(req.Params, want.Params) {
				t.Fatalf("%q:\nfast %+v\njson %+v", doc, req, want)
			}
		}
		if p, ok := decodeSpawnFast(doc); ok {
			want, err := decodeParams[wire.ProcessParams](doc)
			if err != nil {
				t.Fatalf("%q: spawn fast path answered, slow: %v", doc, err)
			}
			if !reflect.DeepEqual(p, want) {
				t.Fatalf("%q:\nfast %#v\nslow %#v", doc, p, want)
			}
		}
		if p, ok := decodeRunAppendFast(doc); ok {
			want, err := decodeParams[wire.RunAppendParams](doc)
			if err != nil {
				t.Fatalf("%q: run.append fast path answered, slow: %v", doc, err)
			}
			if !reflect.DeepEqual(p, want) {
				t.Fatalf("%q:\nfast %#v\nslow %#v", doc, p, want)
			}
		}
		if p, dataErr, ok := decodeStdinFast(doc, newBuf); ok {
			want, err := decodeParams[wire.ProcessParams](doc)
			if err != nil {
				t.Fatalf("%q: fast path answered, slow: %v", doc, err)
			}
			data, derr := stdbase64.StdEncoding.DecodeString(want.Data)
			if p.ID != want.ID || p.Close != want.Close || (p.Offset == nil) != (want.Offset == nil) ||
				p.Offset != nil && *p.Offset != *want.Offset || dataErr != (derr != nil) || !dataErr && !bytes.Equal(p.Data, data) {
				t.Fatalf("%q:\nfast %+v %v\nslow %+v %v", doc, p, dataErr, want, derr)
			}
		}
	})
}

// The fast path takes the shapes real clients send.
func TestFastPathTaken(t *testing.T) {
	line := `{"jsonrpc":"2.0","id":12,"method":"process.stdin","params":{"id":"p","data":"` +
		strings.Repeat("QUJD", 1000) + `","offset":0},"auth":"tok"}`
	req, ok := parseRequestFast([]byte(line))
	if !ok || req.Method != "process.stdin" || string(req.ID) != "12" || req.Auth != "tok" {
		t.Fatalf("request: %v %+v", ok, req)
	}
	p, dataErr, ok := decodeStdinFast(req.Params, newBuf)
	if !ok || dataErr || len(p.Data) != 3000 || p.Offset == nil || *p.Offset != 0 {
		t.Fatalf("params: %v %v %+v", ok, dataErr, p)
	}
	// What daemon/client sends for a spawn (spawnParams).
	spawn := `{"args":["-c","echo \"hi\" > /tmp/x"],"command":"sh","cwd":"/tmp","env":{"A":"1","B":null},"id":"t1","notifyGone":true,"spawnKey":"k","wantPid":true}`
	if sp, ok := decodeSpawnFast([]byte(spawn)); ok {
		t.Errorf("a spawn with an escape in its args took the fast path: %+v", sp)
	}
	spawn = `{"args":["-c","true"],"command":"sh","cwd":"/tmp","env":{"A":"1","B":null},"exitSignal":true,"id":"t1","notifyGone":true,"spawnKey":"k","stdinClosed":true,"wantPid":true}`
	if sp, ok := decodeSpawnFast([]byte(spawn)); !ok || sp.Command != "sh" || len(sp.Args) != 2 || sp.Env["B"] != nil || *sp.Env["A"] != "1" || !sp.WantPid || sp.SpawnKey != "k" ||
		!sp.ExitSignal || !sp.StdinClosed {
		t.Errorf("spawn: fast path %v: %+v", ok, sp)
	}
	appendParams := `{"run":"r1","lease":"0123","at":7,"records":[{"k":"answer","seq":3,"value":{"t":"none"}},{"k":"call","seq":4,"fn":"run"}]}`
	if ap, ok := decodeRunAppendFast([]byte(appendParams)); !ok || ap.At != 7 || len(ap.Records) != 2 || string(ap.Records[1]) != `{"k":"call","seq":4,"fn":"run"}` {
		t.Errorf("run.append: fast path %v: %+v", ok, ap)
	}
	// The run.* methods decode run.append's params through it (runMethod):
	// fewer allocations than encoding/json makes.
	fast := testing.AllocsPerRun(50, func() { decodeRunParams[wire.RunAppendParams](json.RawMessage(appendParams)) })
	std := testing.AllocsPerRun(50, func() { decodeParams[wire.RunAppendParams](json.RawMessage(appendParams)) })
	if fast >= std {
		t.Errorf("run.append's params: %.0f allocations through decodeRunParams, %.0f through encoding/json", fast, std)
	}
	for _, s := range fastPathSeeds {
		if _, ok := parseRequestFast([]byte(s)); ok != json.Valid([]byte(s)) && strings.HasPrefix(s, `{"jsonrpc":"2.0","id":1,`) {
			t.Errorf("%s: fast path not taken", s)
		}
	}
}

func BenchmarkDecodeStdinRequest(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12,"method":"process.stdin","params":{"id":"p","data":"` +
		stdbase64.StdEncoding.EncodeToString(make([]byte, 512<<10)) + `","offset":0},"auth":"tok"}`)
	b.SetBytes(512 << 10)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			req, _ := decodeRequest(line)
			if _, err := decodeStdinParams(req.Params, newBuf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var req wire.Request
			json.Unmarshal(line, &req)
			p, _ := decodeParams[wire.ProcessParams](req.Params)
			stdbase64.StdEncoding.DecodeString(p.Data)
		}
	})
}

// BenchmarkDecodeSpawnParams: the params of a plain spawn as daemon/client
// sends them, by the fast path and by encoding/json.
func BenchmarkDecodeSpawnParams(b *testing.B) {
	raw := []byte(`{"command":"/bin/true","exitSignal":true,"id":"t17","notifyGone":true,"spawnKey":"0123456789abcdef","stdinClosed":true,"wantPid":true}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			decodeSpawnParams(raw)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			decodeParams[wire.ProcessParams](raw)
		}
	})
}

// BenchmarkDecodeRunAppendParams decodes the run.append a durable run's
// runner sends with a run("true"): the answer of the call before and the
// call's own record, as a runner wrote them (strace of a run, 2026-11-27).
func BenchmarkDecodeRunAppendParams(b *testing.B) {
	raw := []byte(`{"run":"6461768aaee5318f","lease":"321517e32a092db131b368dc407c8636","at":14,"records":[` +
		`{"k":"answer","seq":7,"value":{"t":"x:Result","d":{"status":"ok","exit_code":0,"stages":[{"exit_code":0}],"duration":4916366}}},` +
		`{"k":"call","at":"2026-11-27T10:31:10.391344203Z","seq":8,"fn":"run","file":"r30.star","line":2,"hash":"78ffe55dce799ab7137358a0845f651b","show":"\"true\"","call":"effect","host":"unix:///tmp/jcpu/s"}]}`)
	if _, ok := decodeRunAppendFast(raw); !ok {
		b.Fatal("not the fast path")
	}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			decodeRunParams[wire.RunAppendParams](raw)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			decodeParams[wire.RunAppendParams](raw)
		}
	})
}

func newBuf(n int) []byte { return make([]byte, n) }
