package wire

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

// readResultCases are contents that exercise every escape: each byte
// value, invalid UTF-8, the two separators, HTML characters.
func readResultCases() [][]byte {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	random := make([]byte, 64<<10)
	rand.NewChaCha8([32]byte{7}).Read(random)
	return [][]byte{
		nil,
		[]byte("plain text\n"),
		all,
		[]byte("a\u2028b\u2029c <tag> & \"q\" \\ /"),
		[]byte("\xff\xfe truncated \xe2\x82"),
		[]byte("héllo wörld 日本語 🎉"),
		bytes.Repeat([]byte("x"), 1<<20),
		random,
	}
}

func TestAppendReadResultIsWhatJSONWrites(t *testing.T) {
	for _, content := range readResultCases() {
		for _, exists := range []bool{true, false} {
			want, err := json.Marshal(readResultFields{Content: string(content), Exists: exists})
			if err != nil {
				t.Fatal(err)
			}
			got := AppendReadResult(nil, content, exists)
			if !bytes.Equal(got, want) {
				t.Fatalf("content %q:\n got %s\nwant %s", truncate(content), truncate(got), truncate(want))
			}
			if cap(got) != len(got) {
				t.Errorf("content %q: cap %d for %d bytes: the size was not exact", truncate(content), cap(got), len(got))
			}
			// After a prefix, as a response line would have it.
			if got := AppendReadResult([]byte("prefix:"), content, exists); !bytes.Equal(got, append([]byte("prefix:"), want...)) {
				t.Fatalf("content %q after a prefix: %s", truncate(content), truncate(got))
			}
		}
	}
}

// The file read into the answer's buffer and escaped there gives the same
// bytes, in that buffer when the escapes fit the room before it.
func TestReadAnswerEncodesInPlace(t *testing.T) {
	for i, content := range readResultCases() {
		for _, short := range []int{0, 3} { // the file shrank since its stat
			if short > len(content) {
				continue
			}
			a := NewReadAnswer(len(content))
			copy(a.Content(), content)
			n := len(content) - short
			want, _ := json.Marshal(readResultFields{Content: string(content[:n]), Exists: true})
			got := a.Encode(n)
			if !bytes.Equal(got, want) {
				t.Fatalf("case %d, %d bytes short:\n got %s\nwant %s", i, short, truncate(got), truncate(want))
			}
			inPlace := unsafe.SliceData(got) == unsafe.SliceData(a.buf)
			// Text escapes fit; bytes that are not UTF-8 grow sixfold.
			if wantInPlace := utf8.Valid(content) && !bytes.ContainsAny(content, "\x00\x01\x02<>&\""); inPlace != wantInPlace && len(content) > 1000 {
				t.Errorf("case %d: encoded in place %v, want %v", i, inPlace, wantInPlace)
			}
		}
	}
}

func TestReadResultDecodesAsJSONDoes(t *testing.T) {
	var answers [][]byte
	for _, content := range readResultCases() {
		answers = append(answers, AppendReadResult(nil, content, true))
	}
	answers = append(answers,
		[]byte(`{"exists":true,"content":"other order"}`),
		[]byte(`{ "content" : "spaces", "exists" : false }`),
		[]byte(`{"content":"surrogates \ud83c\udf89 \ud800 lone","exists":true}`),
		[]byte(`{"content":"escapes \/ \u00e9 \u0041 \b\f\n\r\t","exists":true}`),
		[]byte("{\"content\":\"raw \xff invalid\",\"exists\":true}"),
		[]byte(`{"content":"","exists":false}`),
		[]byte(`{"content":"x","exists":true,"extra":1}`),
	)
	for _, b := range answers {
		var want readResultFields
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("%s: %v", truncate(b), err)
		}
		var got, owned ReadResult
		if err := got.UnmarshalJSON(b); err != nil {
			t.Fatalf("%s: %v", truncate(b), err)
		}
		if err := owned.DecodeOwned(bytes.Clone(b)); err != nil {
			t.Fatalf("%s owned: %v", truncate(b), err)
		}
		if got != ReadResult(want) || owned != got {
			t.Fatalf("%s:\n got %q\nowned %q\nwant %q", truncate(b), truncate([]byte(got.Content)), truncate([]byte(owned.Content)), truncate([]byte(want.Content)))
		}
	}
}

func TestReadResultRefusesBrokenStrings(t *testing.T) {
	for _, b := range []string{
		`{"content":"no end`,
		`{"content":"ends in a backslash\`,
		`{"content":"bad \q escape","exists":true}`,
		`{"content":"short \u12","exists":true}`,
		"{\"content\":\"raw \x01 control\",\"exists\":true}",
		`{"content":"x","exists":true}trailing`,
		`{"content":"x","exists":maybe}`,
	} {
		var r ReadResult
		if err := r.UnmarshalJSON([]byte(b)); err == nil {
			t.Errorf("%s: decoded as %+v", b, r)
		}
	}
}

// FuzzReadResult checks both halves against encoding/json: the encoding of
// any content, and the decoding of any answer (what json.Unmarshal takes,
// with the same result; what it refuses, refused).
func FuzzReadResult(f *testing.F) {
	for _, c := range readResultCases() {
		if len(c) < 4096 {
			f.Add(c)
			f.Add(AppendReadResult(nil, c, true))
		}
	}
	f.Add([]byte(`{"content":"\ud83c\udf89","exists":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		want, _ := json.Marshal(readResultFields{Content: string(b), Exists: true})
		if got := AppendReadResult(nil, b, true); !bytes.Equal(got, want) {
			t.Fatalf("encode %q:\n got %s\nwant %s", b, got, want)
		}
		var std readResultFields
		stdErr := json.Unmarshal(b, &std)
		var got, owned ReadResult
		err := got.UnmarshalJSON(b)
		ownedErr := owned.DecodeOwned(bytes.Clone(b))
		if (err == nil) != (stdErr == nil) || (ownedErr == nil) != (stdErr == nil) {
			t.Fatalf("decode %q: error %v (owned: %v), encoding/json's %v", b, err, ownedErr, stdErr)
		}
		if err == nil && (got != ReadResult(std) || owned != got) {
			t.Fatalf("decode %q: %+v (owned: %+v), encoding/json's %+v", b, got, owned, std)
		}
		a := NewReadAnswer(len(b))
		copy(a.Content(), b)
		if got := a.Encode(len(b)); !bytes.Equal(got, want) {
			t.Fatalf("encode %q in place:\n got %s\nwant %s", b, got, want)
		}
	})
}

func truncate(b []byte) string {
	s := string(b)
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// BenchmarkReadResult times a 64 MiB file's answer both ways, against
// encoding/json in the same run, for two texts: log lines, whose only
// escapes are their newlines (ReadAnswer encodes those in place), and
// lines full of quotes, tabs and <>&, whose escapes outgrow the room
// ReadAnswer leaves (it then encodes into a new buffer).
func BenchmarkReadResult(b *testing.B) {
	texts := []struct{ name, line string }{
		{"log", "2026-11-23T10:00:00Z INFO step 42 of the build finished in 1.2s, 318 files\n"},
		{"escapes", strings.Repeat("some <log> text, \"quoted\" & tabbed\t", 3) + "\n"},
	}
	for _, text := range texts {
		content := bytes.Repeat([]byte(text.line), (64<<20)/len(text.line))
		answer := AppendReadResult(nil, content, true)
		run := func(name string, f func()) {
			b.Run(text.name+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(content)))
				for b.Loop() {
					f()
				}
			})
		}
		run("encode/json.Marshal", func() { json.Marshal(ReadResult{Content: string(content), Exists: true}) })
		run("encode/AppendReadResult", func() { AppendReadResult(nil, content, true) })
		run("encode/ReadAnswer", func() {
			a := NewReadAnswer(len(content))
			copy(a.Content(), content) // the file's read
			a.Encode(len(content))
		})
		run("decode/json.Unmarshal", func() {
			var r readResultFields
			json.Unmarshal(answer, &r)
		})
		run("decode/UnmarshalJSON", func() {
			var r ReadResult
			r.UnmarshalJSON(answer)
		})
		scratch := make([]byte, len(answer))
		run("decode/DecodeOwned", func() {
			copy(scratch, answer) // the answer's read
			var r ReadResult
			r.DecodeOwned(scratch)
		})
	}
}
