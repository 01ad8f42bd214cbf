package wire

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// checkRunRecordJSON fails t unless AppendJSON makes json.Marshal's bytes
// (or its error).
func checkRunRecordJSON(t *testing.T, r RunRecord) {
	t.Helper()
	want, werr := json.Marshal(&r)
	got, gerr := r.AppendJSON([]byte("prefix"))
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("AppendJSON error %v, json.Marshal error %v", gerr, werr)
	}
	if werr != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("AppendJSON wrote\n%s\njson.Marshal\n%s", got, want)
	}
}

func TestRunRecordJSONMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 27, 7, 30, 1, 123456789, time.UTC)
	for _, r := range []RunRecord{
		{Kind: "run", Run: "r1", Recipe: "/a/b.star", Args: map[string]string{"b": "2", "a": "<&>"}, Dir: "/tmp", At: at},
		{Kind: "call", Seq: 3, Fn: "run", File: "r.star", Line: 12, Hash: "abc", Show: `"true", env={"A": "\n"}`, Call: "effect",
			Host: "unix:///s", At: at.In(time.FixedZone("", 5*3600+1800)), Within: 2},
		{Kind: "answer", Seq: 3, Value: json.RawMessage(`{"t":"x:Result","d":{"status":"ok"}}`), Mark: -7},
		{Kind: "answer", Seq: 4, Failed: true, Error: "bad \u2028 \xff byte"},
		{Kind: "answer", Seq: 5, Unkept: "a function"},
		{Kind: "end", Status: "failed", Code: -1},
		{Kind: "print"},
		{},
		{Kind: "call", At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, // json.Marshal refuses it
		{Kind: "call", At: time.Date(2000, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))},
		{Kind: "call", At: time.Date(2000, 1, 1, 0, 0, 0, 0, time.FixedZone("", -(23*3600+59*60+59)))},
	} {
		checkRunRecordJSON(t, r)
	}
}

// FuzzRunRecordJSON: whatever the fields, the hand-written encoder makes
// the bytes encoding/json makes.
func FuzzRunRecordJSON(f *testing.F) {
	f.Add("call", "run", "r.star", `"true"`, "hash", `{"t":"none"}`, int64(3), int64(1764228601123456789), 0, false)
	f.Add("answer", "<\x00>", "\xff\xfe", "\u2028\u2029", "", `[1, 2]`, int64(-1), int64(0), -3600, true)
	f.Fuzz(func(t *testing.T, kind, fn, file, show, hash, value string, n, unixNano int64, offset int, failed bool) {
		r := RunRecord{Kind: kind, Fn: fn, File: file, Show: show, Hash: hash, Seq: int(n), Line: int(n >> 3),
			Within: int(n >> 7), Mark: n, Code: int(n >> 11), Failed: failed, Error: show, Unkept: file,
			Status: kind, Host: hash, Call: fn, Run: file, Recipe: show, Dir: hash}
		if unixNano != 0 {
			r.At = time.Unix(0, unixNano).In(time.FixedZone("z", offset%(30*3600)))
		}
		// A Value is JSON as json.Marshal makes it (compact, with <, >
		// and & escaped), as the journal makes it.
		if json.Valid([]byte(value)) {
			v, err := json.Marshal(json.RawMessage(value))
			if err != nil {
				t.Fatal(err)
			}
			r.Value = v
		} else {
			r.Value, _ = json.Marshal(value)
		}
		checkRunRecordJSON(t, r)
		if want, _ := json.Marshal(show); !bytes.Equal(QuoteID(show), want) {
			t.Fatalf("QuoteID(%q) = %s, json.Marshal %s", show, QuoteID(show), want)
		}
	})
}

// BenchmarkRunRecordJSON sets a call's record, as a durable run makes one
// for every builtin call, through AppendJSON beside json.Marshal.
func BenchmarkRunRecordJSON(b *testing.B) {
	r := RunRecord{Kind: "call", Seq: 123, Fn: "run", File: "/home/me/recipes/build.star", Line: 77,
		Hash: "0123456789abcdef0123456789abcdef", Show: `"true"`, Call: "effect", Host: "unix:///run/sous.sock",
		At: time.Date(2026, 11, 27, 7, 30, 1, 123456789, time.UTC)}
	b.Run("hand", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = r.AppendJSON(buf[:0])
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(&r)
		}
	})
}
