package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// frameRecorder is a receiver that keeps a copy of every frame, or only
// counts them (count).
type frameRecorder struct {
	count bool
	n     int
	got   []wire.Frame
	ids   []string
}

func (r *frameRecorder) response(link, uint64, json.RawMessage, error) {}
func (r *frameRecorder) gone(link, wire.Gone)                          {}
func (r *frameRecorder) closed(link, error)                            {}
func (r *frameRecorder) frames(_ link, id string, fs []wire.Frame) {
	r.n += len(fs)
	if r.count {
		return
	}
	for _, f := range fs {
		f.Data = bytes.Clone(f.Data)
		r.got = append(r.got, f)
		r.ids = append(r.ids, id)
	}
}

// loopReader reads b over and over.
type loopReader struct {
	b []byte
	i int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := copy(p, r.b[r.i:])
	r.i = (r.i + n) % len(r.b)
	return n, nil
}

// readerOf is a stream link reading r, without its reader goroutine: the
// test steps it.
func readerOf(r io.Reader, recv receiver) *streamLink {
	return &streamLink{recv: recv, maxAnswer: maxResponseLine, r: bufio.NewReaderSize(r, 256<<10)}
}

// Reading a binary frame allocates no more than reading the same frame as
// base64 in JSON: its data goes straight into the dispatcher's buffer.
func TestBinaryFrameReadAllocations(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("the race detector allocates")
	}
	data := make([]byte, wire.MaxFrameData)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f := wire.Frame{Seq: 12345, Stream: wire.Stdout, Data: data}
	allocs := map[bool]float64{}
	for _, binary := range []bool{false, true} {
		var enc []byte
		if binary {
			enc = wire.AppendBinaryFrame(nil, wire.QuoteID("proc-1"), &f)
		} else {
			enc = wire.AppendFrame(nil, wire.QuoteID("proc-1"), &f)
		}
		rec := &frameRecorder{count: true}
		l := readerOf(&loopReader{b: enc}, rec)
		step := func() {
			if err := l.step(); err != nil {
				t.Fatal(err)
			}
		}
		for range 10 {
			step() // buffers grown
		}
		allocs[binary] = testing.AllocsPerRun(1000, step)
		if rec.n < 1000 {
			t.Fatalf("%d frames read", rec.n)
		}
	}
	t.Logf("allocations per frame: binary %.2f, JSON %.2f", allocs[true], allocs[false])
	if allocs[true] > allocs[false] || allocs[true] > 1 {
		t.Errorf("a binary frame costs %.2f allocations, a JSON one %.2f: want at most as many, and at most 1 (the id's string)", allocs[true], allocs[false])
	}
}

// A stream of binary frames, JSON frames and answers reads back exact, and
// a stream that ends within a binary frame's data is a lost connection
// (io.ErrUnexpectedEOF), never a frame.
func TestBinaryFrameStreamRead(t *testing.T) {
	stream, want := binaryStream([]byte("some output\x00\n with a newline and NUL"), 0)
	rec, _, err := readStream(bytes.NewReader(stream))
	if !errors.Is(err, io.EOF) || !sameFrames(rec.got, want) {
		t.Fatalf("read %d frames (%v), want %d", len(rec.got), err, len(want))
	}
	for cut := range stream {
		rec, l, err := readStream(bytes.NewReader(stream[:cut]))
		if len(rec.got) > len(want) || !sameFrames(rec.got, want[:len(rec.got)]) {
			t.Fatalf("cut at %d: read %d frames that differ from what was sent", cut, len(rec.got))
		}
		if l.d.awaitingData() && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d within a frame's data: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
}

// binaryStream encodes data as the frames of a process "p": binary frames
// and a JSON one (sent before the switch), an answer between them, and the
// exit frame. lie, when not 0, is added to the first frame's dataBytes.
func binaryStream(data []byte, lie int) ([]byte, []wire.Frame) {
	id := wire.QuoteID("p")
	third := len(data) / 3
	parts := [][]byte{data[:third], data[third : 2*third], data[2*third:]}
	var want []wire.Frame
	var b []byte
	seq := int64(0)
	for i, part := range parts {
		seq++
		f := wire.Frame{Seq: seq, Stream: wire.Stream(1 + i%2), Data: part[:min(len(part), wire.MaxFrameData)]}
		want = append(want, f)
		switch i {
		case 0:
			b = wire.AppendFrame(b, id, &f)
			b = append(b, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"...)
		default:
			start := len(b)
			b = wire.AppendBinaryFrame(b, id, &f)
			if i == 1 && lie != 0 {
				n := strconv.Itoa(len(f.Data))
				lied := bytes.Replace(b[start:], []byte(`"dataBytes":`+n), []byte(`"dataBytes":`+strconv.Itoa(len(f.Data)+lie)), 1)
				b = append(b[:start], lied...)
			}
		}
	}
	exit := wire.Frame{Seq: seq + 1, Stream: wire.Exit}
	want = append(want, exit)
	return wire.AppendFrame(b, id, &exit), want
}

func sameFrames(a, b []wire.Frame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Seq != b[i].Seq || a[i].Stream != b[i].Stream || !bytes.Equal(a[i].Data, b[i].Data) || a[i].ExitCode != b[i].ExitCode {
			return false
		}
	}
	return true
}

// FuzzBinaryFrameReader feeds the stream link's reader hostile bytes: a
// stream of frames whose first binary header lies about its data, cut
// anywhere, or raw input. It must never panic nor loop, deliver no frame
// over MaxFrameData, and deliver exactly what was sent up to the first lie
// or cut.
func FuzzBinaryFrameReader(f *testing.F) {
	f.Add([]byte("hello, binary frames\n\x00"), 0, uint32(0), false)
	f.Add([]byte("hello, binary frames"), 3, uint32(0), false)
	f.Add([]byte("hello, binary frames"), -2, uint32(120), false)
	f.Add([]byte(`{"type":"stream","processId":"p","stream":"stdout","seq":1,"dataBytes":5}`+"\nab"), 0, uint32(0), true)
	f.Add([]byte(`{"type":"stream","processId":"p","stream":"stdout","seq":1,"dataBytes":-5}`+"\nabcdefgh\n"), 0, uint32(0), true)
	f.Add([]byte(`{"type":"stream","processId":"p","stream":"stdout","seq":1,"dataBytes":99999}`+"\n"), 0, uint32(0), true)
	f.Fuzz(func(t *testing.T, data []byte, lie int, cut uint32, raw bool) {
		stream, want := data, []wire.Frame(nil)
		if !raw {
			stream, want = binaryStream(data, lie)
			if cut > 0 {
				stream = stream[:int(cut)%(len(stream)+1)]
			}
		}
		rec := &frameRecorder{}
		l := readerOf(bytes.NewReader(stream), rec)
		var err error
		for steps := 0; err == nil; steps++ {
			if steps > len(stream)+2 {
				t.Fatalf("%d steps over %d bytes: the reader does not move on", steps, len(stream))
			}
			err = l.step()
		}
		for _, fr := range rec.got {
			if len(fr.Data) > wire.MaxFrameData {
				t.Fatalf("a frame of %d bytes", len(fr.Data))
			}
		}
		if raw {
			return
		}
		// Up to the lied frame (the second), what was read is what was sent.
		exact := rec.got
		if lie != 0 {
			exact = exact[:min(len(exact), 1)]
		}
		if len(exact) > len(want) || !sameFrames(exact, want[:len(exact)]) {
			t.Fatalf("read %+v, sent %+v", rec.got, want)
		}
		if lie == 0 && cut == 0 && (!errors.Is(err, io.EOF) || len(rec.got) != len(want)) {
			t.Fatalf("read %d of %d frames whole: %v", len(rec.got), len(want), err)
		}
	})
}

// A WebSocket binary message that is not exactly a binary frame ends the
// link with an error, never a frame.
func TestBinaryMessageRefused(t *testing.T) {
	const pre = `{"type":"stream","processId":"p","stream":"stdout","seq":1,`
	for _, msg := range []string{
		pre + `"dataBytes":4}` + "\nabc",
		pre + `"dataBytes":2}` + "\nabc",
		pre + `"dataBytes":-1}` + "\n",
		pre + `"data":"YWJj"}`,
		"\x00\x01",
	} {
		var d lineDispatcher
		rec := &frameRecorder{}
		if err := d.dispatchBinary(nil, rec, []byte(msg)); err == nil || rec.n != 0 {
			t.Errorf("%q: %v, %d frames", msg, err, rec.n)
		}
	}
}

// stutterReader hands out r's bytes a few at a time and fails every third
// read with a deadline, as a caller's context ending does (readUntil): the
// link is read again after each.
type stutterReader struct {
	r     io.Reader
	reads int
}

func (s *stutterReader) Read(p []byte) (int, error) {
	s.reads++
	if s.reads%3 == 0 {
		return 0, os.ErrDeadlineExceeded
	}
	return s.r.Read(p[:min(len(p), 1+s.reads%7000)])
}

// Binary frames whose data is in the link's read buffer are delivered from
// it, without a copy into the dispatcher's own buffer; a read cut short
// within a frame's data keeps what it got, and the frame comes whole when
// the link is read again.
func TestBinaryFrameDataFromTheBuffer(t *testing.T) {
	data := make([]byte, 3*wire.MaxFrameData)
	for i := range data {
		data[i] = byte(i * 13)
	}
	id := wire.QuoteID("p")
	var stream []byte
	var want []wire.Frame
	for i := int64(1); i <= 40; i++ {
		n := int(i*7919) % wire.MaxFrameData
		f := wire.Frame{Seq: i, Stream: wire.Stdout, Data: data[i : i+int64(n)]}
		stream = wire.AppendBinaryFrame(stream, id, &f)
		want = append(want, f)
	}

	rec, l, err := readStream(bytes.NewReader(stream))
	if !errors.Is(err, io.EOF) || !sameFrames(rec.got, want) {
		t.Fatalf("read %d of %d frames (%v)", len(rec.got), len(want), err)
	}
	if c := cap(l.d.frame.Data); c != 0 {
		t.Errorf("the dispatcher's own buffer grew to %d bytes: frames were copied out of the read buffer", c)
	}

	rec, _, err = readStream(&stutterReader{r: bytes.NewReader(stream)})
	if !errors.Is(err, io.EOF) || !sameFrames(rec.got, want) {
		t.Fatalf("read %d of %d frames through short reads and deadlines (%v), or some differ", len(rec.got), len(want), err)
	}
}

// readStream steps a link reading r until the stream fails, reading on
// after a deadline as a caller whose context ended leaves the link, and
// returns what it got and how it ended.
func readStream(r io.Reader) (*frameRecorder, *streamLink, error) {
	rec := &frameRecorder{}
	l := readerOf(r, rec)
	for {
		if err := l.step(); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return rec, l, err
		}
	}
}
