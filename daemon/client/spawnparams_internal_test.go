package client

import (
	"encoding/json"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// oddStrings are strings encoding/json escapes: quotes, backslashes,
// control characters, HTML's <>&, U+2028/2029, invalid UTF-8, and plain
// non-ASCII.
var oddStrings = []string{"", "true", "a b", `q"uote`, `back\slash`, "tab\tnl\ncr\r\x00\x1f", "<script>&amp;", "\u2028\u2029", "bad\xffutf8\xc3", "héllo 日本", "/bin/true"}

func sp(s string) *string { return &s }

// TestSpawnParamsIsJSONMarshals: process.spawn's params written by hand
// are byte for byte what json.Marshal made of the same map before, for
// every member a spawn sends and strings encoding/json escapes.
func TestSpawnParamsIsJSONMarshals(t *testing.T) {
	var cases []map[string]any
	for _, s := range oddStrings {
		cases = append(cases, map[string]any{
			"id": "p-" + s, "command": s, "wantPid": true, "notifyGone": true,
			"args": []string{s, "x", s + s}, "cwd": s,
			"env": map[string]*string{s: sp(s), "PATH": sp("/usr/bin:" + s), "UNSET" + s: nil},
		})
	}
	cases = append(cases,
		map[string]any{"id": "a", "command": "true", "wantPid": true, "notifyGone": true},
		map[string]any{"id": "b", "command": "c", "args": []string{}, "env": map[string]*string{}, "timeoutMs": int64(1500), "spawnKey": "k1"},
		map[string]any{"id": "c", "command": "c", "args": []string(nil), "env": map[string]*string(nil), "wantPid": false},
		map[string]any{"id": "d", "pipeline": [][]string{{"echo", "x<y"}, {"cat"}}, "tty": true, "size": wire.TermSize{Rows: 3, Cols: 9}},
		map[string]any{"id": "e", "command": "sh", "sandbox": &wire.Sandbox{}, "mirror": []string{"stdout"}, "direct": true},
	)
	for _, params := range cases {
		checkSpawnParams(t, params)
	}
}

// FuzzSpawnParams holds the hand-written encoding to json.Marshal's for
// any strings in every member a plain spawn sends.
func FuzzSpawnParams(f *testing.F) {
	for _, s := range oddStrings {
		f.Add(s, s, s, s, s)
	}
	f.Fuzz(func(t *testing.T, id, command, arg, cwd, env string) {
		checkSpawnParams(t, map[string]any{
			"id": id, "command": command, "wantPid": true, "notifyGone": true,
			"args": []string{arg, command}, "cwd": cwd,
			"env": map[string]*string{env: sp(arg), cwd: nil},
		})
	})
}

func checkSpawnParams(t *testing.T, params map[string]any) {
	t.Helper()
	got, err := spawnParams(params)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("spawnParams:\n got %s\nwant %s", got, want)
	}
	// And the daemon reads the same request from it.
	var a, b wire.ProcessParams
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("decoded differently:\n got %s\nwant %s", ja, jb)
	}
}

// BenchmarkSpawnParams: a plain spawn's params by hand and through
// encoding/json, as spawnCall encoded them before.
func BenchmarkSpawnParams(b *testing.B) {
	params := map[string]any{"id": "t17", "command": "/bin/true", "wantPid": true, "notifyGone": true, "spawnKey": "0123456789abcdef"}
	b.Run("hand", func(b *testing.B) {
		for range b.N {
			spawnParams(params)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for range b.N {
			json.Marshal(params)
		}
	})
}
