package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The binary form is the JSON line with "dataBytes" in place of "data",
// in the same place (before "stage"), then the data as it is.
func TestAppendBinaryFrameExact(t *testing.T) {
	id := QuoteID(`p"1`)
	for _, tc := range []struct {
		f    Frame
		want string
	}{
		{Frame{Seq: 1, Stream: Stdout, Data: []byte("hi\n\x00")}, `{"type":"stream","processId":"p\"1","stream":"stdout","seq":1,"dataBytes":4}` + "\nhi\n\x00"},
		{Frame{Seq: 2, Stream: Stderr, Data: []byte("x"), Stage: 3}, `{"type":"stream","processId":"p\"1","stream":"stderr","seq":2,"dataBytes":1,"stage":2}` + "\nx"},
		{Frame{Seq: 3, Stream: Stdout}, `{"type":"stream","processId":"p\"1","stream":"stdout","seq":3,"dataBytes":0}` + "\n"},
	} {
		if !CarriesData(&tc.f) {
			t.Fatalf("%+v does not carry data", tc.f)
		}
		got := AppendBinaryFrame(nil, id, &tc.f)
		if string(got) != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
		var back Frame
		gotID, err := ParseBinaryFrame(got, &back)
		if err != nil || string(gotID) != `p"1` || !sameFrame(&back, &tc.f) && !(len(tc.f.Data) == 0 && len(back.Data) == 0) {
			t.Errorf("read back %q: %+v %q %v", got, back, gotID, err)
		}
	}
	for _, f := range []Frame{{Seq: 4, Stream: Exit}, {Seq: 5, Stream: Stdout, Mirrored: true}} {
		if CarriesData(&f) {
			t.Errorf("%+v carries data: it must stay JSON", f)
		}
	}
}

// A header that lies is an error, never a frame, and says what is wrong.
func TestBinaryFrameHeaderRefused(t *testing.T) {
	const pre = `{"type":"stream","processId":"p","stream":"stdout","seq":1,`
	for _, tc := range []struct{ header, want string }{
		{pre + `"dataBytes":-1}`, "want a count of bytes"},
		{pre + `"dataBytes":32769}`, "over the 32768 a frame carries"},
		{pre + `"dataBytes":99999999999999999999999}`, "want integer"},
		{pre + `"dataBytes":1.5}`, "want , or }"},
		{pre + `"dataBytes":1e3}`, "want , or }"},
		{pre + `"dataBytes":"3"}`, "want a count of bytes"},
		{pre + `"dataBytes":null}`, "want a count of bytes"},
		{pre + `"dataBytes":3,"data":"YWJj"}`, "carries no data of its own"},
		{pre + `"dataBytes":3,"mirrored":true}`, "carries no data of its own"},
		{`{"type":"stream","processId":"p","stream":"exit","seq":1,"exitCode":0,"dataBytes":0}`, "carries no data of its own"},
	} {
		var f Frame
		_, n, err := ParseFrameHeader([]byte(tc.header), &f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: n=%d err=%v, want an error with %q", tc.header, n, err, tc.want)
		}
	}
	// Read as a whole JSON frame (a client that never asked), a header is
	// refused too, not taken for a frame without data.
	var f Frame
	if _, err := ParseFrame([]byte(pre+`"dataBytes":3}`), &f); err == nil {
		t.Error("ParseFrame took a binary header for a frame")
	}
	// A message whose data is not as long as its header says.
	for _, msg := range []string{pre + `"dataBytes":3}` + "\nab", pre + `"dataBytes":3}` + "\nabcd", pre + `"dataBytes":3}`} {
		if _, err := ParseBinaryFrame([]byte(msg), &f); err == nil {
			t.Errorf("%q: read as a frame", msg)
		}
	}
	if _, err := ParseBinaryFrame([]byte(pre+`"dataBytes":3}`+"\nabc"+"d"), &f); !errors.Is(err, ErrDataBytes) {
		t.Errorf("a longer message: %v, want ErrDataBytes", err)
	}
}

// FuzzBinaryFrame holds the binary frame reader to its contract on hostile
// input: a message it reads is a header that parses, '\n', and exactly
// dataBytes bytes (at most MaxFrameData), and encodes back to itself in the
// daemon's layout; and a frame encoded by the daemon reads back as it was.
func FuzzBinaryFrame(f *testing.F) {
	const pre = `{"type":"stream","processId":"p","stream":"stdout","seq":1,`
	for _, s := range []string{
		pre + `"dataBytes":3}` + "\nabc",
		pre + `"dataBytes":3,"stage":0}` + "\nab\n",
		pre + `"dataBytes":0}` + "\n",
		pre + `"dataBytes":-3}` + "\nabc",
		pre + `"dataBytes":32768}` + "\nabc",
		pre + `"dataBytes":4}` + "\nabc",
		`{"dataBytes":3,"type":"stream","processId":"p","stream":"stderr","seq":7}` + "\n\x00\xff\n",
		`{"type":"stream","processId":"p","stream":"exit","seq":1,"exitCode":0,"dataBytes":0}` + "\n",
	} {
		f.Add([]byte(s), []byte("data"))
	}
	f.Fuzz(func(t *testing.T, msg, data []byte) {
		var fr Frame
		id, err := ParseBinaryFrame(msg, &fr)
		if err == nil {
			i := bytes.IndexByte(msg, '\n')
			if len(fr.Data) != len(msg)-i-1 || len(fr.Data) > MaxFrameData || !CarriesData(&fr) {
				t.Fatalf("%q: read %d bytes of data from a %d-byte message", msg, len(fr.Data), len(msg))
			}
			// What was read encodes to a message that reads the same.
			again := AppendBinaryFrame(nil, QuoteID(string(id)), &fr)
			var fr2 Frame
			id2, err := ParseBinaryFrame(again, &fr2)
			// (An id read raw keeps invalid UTF-8, which QuoteID writes as
			// U+FFFD, as a rune conversion does.)
			if err != nil || string(id2) != string([]rune(string(id))) || !sameFrame(&fr, &fr2) {
				t.Fatalf("%q read as %+v, encoded as %q, read back as %+v %v", msg, fr, again, fr2, err)
			}
		}
		// Any data of a frame's size round-trips, id and all.
		if len(data) > MaxFrameData {
			data = data[:MaxFrameData]
		}
		want := Frame{Seq: int64(len(msg)) + 1, Stream: Stderr, Data: data, Stage: len(data) % 3}
		enc := AppendBinaryFrame(nil, QuoteID(string(msg)), &want)
		var got Frame
		gid, err := ParseBinaryFrame(enc, &got)
		if err != nil || !sameFrame(&got, &want) {
			t.Fatalf("%+v encoded as %q read back as %+v %v", want, enc, got, err)
		}
		// (QuoteID makes each byte of invalid UTF-8 U+FFFD, as a rune conversion does.)
		if w := string([]rune(string(msg))); string(gid) != w {
			t.Fatalf("id %q read back as %q", w, gid)
		}
	})
}
