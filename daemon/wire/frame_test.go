package wire

import (
	"bytes"
	stdbase64 "encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestAppendFrameExact(t *testing.T) {
	id := QuoteID(`p"1`)
	for _, tc := range []struct {
		f    Frame
		want string
	}{
		{Frame{Seq: 1, Stream: Stdout, Data: []byte("hi")}, `{"type":"stream","processId":"p\"1","stream":"stdout","seq":1,"data":"aGk="}`},
		{Frame{Seq: 2, Stream: Stderr, Data: nil}, `{"type":"stream","processId":"p\"1","stream":"stderr","seq":2,"data":""}`},
		{Frame{Seq: 3, Stream: Exit, ExitCode: -1, Data: []byte("ignored")}, `{"type":"stream","processId":"p\"1","stream":"exit","seq":3,"exitCode":-1}`},
		// process.spawn.mirror: the spawner has the bytes; only the seq travels.
		{Frame{Seq: 4, Stream: Stderr, Data: []byte("teed"), Stage: 2, Mirrored: true}, `{"type":"stream","processId":"p\"1","stream":"stderr","seq":4,"mirrored":true,"stage":1}`},
	} {
		if got := string(AppendFrame(nil, id, &tc.f)); got != tc.want+"\n" {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
	// Appends after what is there, growing as needed.
	buf := make([]byte, 0, 4)
	buf = append(buf, "x\n"...)
	buf = AppendFrame(buf, id, &Frame{Seq: 9, Stream: Stdout, Data: bytes.Repeat([]byte{0xff}, 100)})
	if !bytes.HasPrefix(buf, []byte("x\n{")) || !json.Valid(buf[2:]) {
		t.Fatalf("%s", buf)
	}
}

func TestParseFrame(t *testing.T) {
	var f Frame
	id, err := ParseFrame([]byte(` { "data" : "aGk=", "seq":12 ,"x":[1,{"a":"}"}],"stream":"stderr","processId":"a\/b\u00e9","type":"stream" }`), &f)
	if err != nil || string(id) != "a/bé" || f.Seq != 12 || f.Stream != Stderr || string(f.Data) != "hi" {
		t.Fatalf("%q %+v %v", id, f, err)
	}
	// An escaped base64 payload ("\/" from encoders that escape slashes).
	data := []byte{0xff, 0xfe, 0xfd}
	line := `{"type":"stream","processId":"p","stream":"stdout","seq":1,"data":"` +
		strings.ReplaceAll(stdbase64.StdEncoding.EncodeToString(data), "/", `\/`) + `"}`
	if _, err := ParseFrame([]byte(line), &f); err != nil || !bytes.Equal(f.Data, data) {
		t.Fatalf("%q %v", f.Data, err)
	}
	// The buffer of Data is reused.
	f.Data = make([]byte, 0, 100)
	p := &f.Data[:1][0]
	ParseFrame([]byte(`{"type":"stream","processId":"p","stream":"stdout","seq":1,"data":"aGk="}`), &f)
	if &f.Data[0] != p {
		t.Fatal("Data storage not reused")
	}
	// An exit frame clears Data, null data is no data.
	if _, err := ParseFrame([]byte(`{"type":"stream","processId":"p","stream":"exit","seq":2,"exitCode":-1,"data":null}`), &f); err != nil || len(f.Data) != 0 || f.ExitCode != -1 {
		t.Fatalf("%+v %v", f, err)
	}

	for _, bad := range []string{
		``, `[]`, `{}`, `{"jsonrpc":"2.0","id":1,"result":{}}`, `{"type":"other"}`,
	} {
		if _, err := ParseFrame([]byte(bad), &f); !errors.Is(err, ErrNotFrame) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	for _, bad := range []string{
		`{"type":"stream","processId":"p","stream":"stdout"}`,
		`{"type":"stream","processId":"p","stream":"nope","seq":1}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":1.5}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":1,"data":"!!"}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":1`,
		`{"type":"stream","processId":"p\`,
	} {
		if _, err := ParseFrame([]byte(bad), &f); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestIsFrameLine(t *testing.T) {
	if !IsFrameLine([]byte(`{"type":"stream","processId":"x"}`)) || IsFrameLine([]byte(`{"jsonrpc":"2.0","id":1,"result":{"pong":true}}`)) {
		t.Fatal("IsFrameLine")
	}
}

// AppendFrame must agree with encoding/json on what it writes.
func TestAppendFrameMatchesJSON(t *testing.T) {
	f := Frame{Seq: 1 << 40, Stream: Stdout, Data: []byte("\x00<>&\u2028")}
	line := AppendFrame(nil, QuoteID("id<&>\u2028\xff"), &f)
	var v struct {
		Type, ProcessID, Stream string
		Seq                     int64
		Data                    []byte
	}
	if err := json.Unmarshal(line, &v); err != nil {
		t.Fatal(err)
	}
	if v.Type != "stream" || v.ProcessID != "id<&>\u2028\ufffd" || v.Stream != "stdout" || v.Seq != 1<<40 || !bytes.Equal(v.Data, f.Data) {
		t.Fatalf("%+v", v)
	}
}

func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"stream","processId":"p","stream":"stdout","seq":1,"data":"aGk="}`,
		`{"type":"stream","processId":"p\"1","stream":"exit","seq":3,"exitCode":-1}`,
		`{"data":"aGk=","seq":12,"x":[1,{"a":"}"}],"stream":"stderr","processId":"a\/b\u00e9","type":"stream"}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":1,"data":"YWJj\/w=="}`,
		`{"jsonrpc":"2.0","id":1,"result":{"pong":true}}`,
		`{"type":"stream","processId":"\ud800","stream":"stderr","seq":-9223372036854775808,"data":null}`,
		`{"type":"stream","processId":"p","stream":"stderr","seq":2,"data":"ZQ==","stage":2}`,
		`{"type":"stream","processId":"p","stream":"exit","seq":4,"exitCode":-1,"stageExitCodes":[143,0],"timedOut":true}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":5,"mirrored":true}`,
		`{"type":"stream","processId":"p","stream":"exit","seq":6,"exitCode":-1,"timedOut":true,"signal":9}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":5,"data":"aGk=","mirrored":true}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":7,"data":"aGk=","stage":1}`,
		`{"type":"stream","processId":"p","stream":"stderr","seq":8,"data":""}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":9,"data":"aGk=","x":"y"}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":9,"data":"aG\nk=","stage":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		// The daemon's own layout, read without the general parser, reads
		// as the general parser reads it, or is left to it.
		var own, gen Frame
		if ownID, ok := parseOwnLayout(line, &own); ok {
			genID, err := parseFrame(line, &gen, new(int))
			if err != nil || string(ownID) != string(genID) || !sameFrame(&own, &gen) {
				t.Fatalf("own layout %q: %+v %q, general parser: %+v %q %v", line, own, ownID, gen, genID, err)
			}
		}
		var fr Frame
		id, err := ParseFrame(line, &fr)
		if err != nil {
			return
		}
		if fr.Stream != Stdout && fr.Stream != Stderr && fr.Stream != Exit {
			t.Fatalf("stream %d accepted", fr.Stream)
		}
		// Round trip: what we encode, we parse back to the same frame. An id
		// with invalid UTF-8 is encoded with U+FFFD in its place, as
		// encoding/json does.
		wantID := string([]rune(string(id)))
		out := AppendFrame(nil, QuoteID(string(id)), &fr)
		if !json.Valid(out) || out[len(out)-1] != '\n' || bytes.Count(out, []byte("\n")) != 1 {
			t.Fatalf("AppendFrame wrote %q", out)
		}
		var back Frame
		id2, err := ParseFrame(out, &back)
		if err != nil {
			t.Fatalf("reparse %q: %v", out, err)
		}
		if string(id2) != wantID || back.Seq != fr.Seq || back.Stream != fr.Stream || back.ExitCode != fr.ExitCode {
			t.Fatalf("round trip %q -> %q: %+v vs %+v", line, out, back, fr)
		}
		wantData := fr.Data
		if fr.Mirrored {
			wantData = nil // a mirrored frame is encoded without its data
		}
		if fr.Stream != Exit && !bytes.Equal(back.Data, wantData) {
			t.Fatalf("data %q vs %q", back.Data, wantData)
		}
		// The extension members round trip on the frames that carry them.
		if fr.Stream != Exit && (back.Stage != fr.Stage || back.Mirrored != fr.Mirrored) ||
			fr.Stream == Exit && (back.TimedOut != fr.TimedOut || back.Signal != fr.Signal || !slices.Equal(back.StageCodes, fr.StageCodes)) {
			t.Fatalf("extensions %q -> %q: %+v vs %+v", line, out, back, fr)
		}
	})
}

// sameFrame compares every member of two frames.
func sameFrame(a, b *Frame) bool {
	return a.Seq == b.Seq && a.Stream == b.Stream && a.ExitCode == b.ExitCode && a.Stage == b.Stage &&
		a.TimedOut == b.TimedOut && a.Signal == b.Signal && a.Mirrored == b.Mirrored &&
		bytes.Equal(a.Data, b.Data) && slices.Equal(a.StageCodes, b.StageCodes)
}

func BenchmarkAppendFrame(b *testing.B) {
	f := Frame{Seq: 123456, Stream: Stdout, Data: bytes.Repeat([]byte("abcdefgh"), 4096)}
	id := QuoteID("bench")
	buf := make([]byte, 0, 64<<10)
	b.SetBytes(int64(len(f.Data)))
	for b.Loop() {
		buf = AppendFrame(buf[:0], id, &f)
	}
}

func BenchmarkParseFrame(b *testing.B) {
	f := Frame{Seq: 123456, Stream: Stdout, Data: bytes.Repeat([]byte("abcdefgh"), 4096)}
	line := AppendFrame(nil, QuoteID("bench"), &f)
	var out Frame
	b.Run("own", func(b *testing.B) {
		b.SetBytes(int64(len(f.Data)))
		for b.Loop() {
			if _, err := ParseFrame(line, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The general parser, which any other layout takes.
	b.Run("general", func(b *testing.B) {
		b.SetBytes(int64(len(f.Data)))
		for b.Loop() {
			if _, err := parseFrame(line, &out, new(int)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestHasControl(t *testing.T) {
	for i := 0; i < 256; i++ {
		for _, n := range []int{1, 7, 8, 9, 31, 32, 33, 64, 100} {
			for pos := 0; pos < n; pos++ {
				s := bytes.Repeat([]byte("A"), n)
				s[pos] = byte(i)
				if got := HasControl(s); got != (i < 0x20) {
					t.Fatalf("HasControl with %#x at %d of %d = %v", i, pos, n, got)
				}
			}
		}
	}
	if _, err := ParseFrame([]byte("{\"type\":\"stream\",\"processId\":\"a\tb\",\"stream\":\"stdout\",\"seq\":1}"), &Frame{}); err == nil {
		t.Fatal("a control character in a string was accepted")
	}
}

func TestDataControlCharacters(t *testing.T) {
	data := stdbase64.StdEncoding.EncodeToString(bytes.Repeat([]byte("xyz"), 40))
	for _, bad := range []string{"\n", "\r", "\r\n", "\n\n\n\n", "\t", "\x00"} {
		for _, pos := range []int{0, 4, 33, len(data)} {
			line := `{"type":"stream","processId":"p","stream":"stdout","seq":1,"data":"` + data[:pos] + bad + data[pos:] + `"}`
			if _, err := ParseFrame([]byte(line), &Frame{}); err == nil {
				t.Errorf("%q at %d accepted", bad, pos)
			}
		}
	}
}
