package streamlog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Spilled frames keep the extension members: a pipeline stage's stderr,
// the stage codes, timeout and signal of an exit frame, and the Mirrored mark.
func TestSegmentKeepsExtensionMembers(t *testing.T) {
	s := tempSegment(t)
	in := []wire.Frame{
		{Seq: 1, Stream: wire.Stdout, Data: []byte("out")},
		{Seq: 2, Stream: wire.Stderr, Stage: 3, Data: []byte("err of stage 2")},
		{Seq: 3, Stream: wire.Stderr, Data: []byte("plain"), Mirrored: true},
		{Seq: 4, Stream: wire.Exit, ExitCode: -1, StageCodes: []int{141, 0, -1, 143}, TimedOut: true},
		{Seq: 5, Stream: wire.Exit, ExitCode: 3},
		{Seq: 6, Stream: wire.Exit, ExitCode: -1, Signal: 11},
		{Seq: 7, Stream: wire.Exit, ExitCode: -1, StageCodes: []int{0, 137}, TimedOut: true, Signal: 9},
	}
	for i := range in {
		if err := s.append(&in[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	out, err := s.read(nil, 1, 0, s.size, 1, 1<<20, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if len(out[i].Data) == 0 {
			out[i].Data = nil
		}
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("read back\n%+v\nwant\n%+v", out, in)
	}
	// Skipping mirrored data leaves the rest as it was: an exit frame's
	// timeout and signal bits are not the mark.
	skipped, err := s.read(nil, 1, 0, s.size, 1, 1<<20, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range skipped {
		want := in[i]
		if want.Mirrored {
			want.Data = nil
		}
		if len(skipped[i].Data) == 0 && !want.Mirrored {
			skipped[i].Data = nil
		}
		if !reflect.DeepEqual(skipped[i], want) {
			t.Fatalf("read back skipping mirrored data: %+v, want %+v", skipped[i], want)
		}
	}
}

// A cursor that skips mirrored data gets the Mirrored frames it reads back
// from disk without their data, and every other frame whole: output not
// marked, and an exit frame whose timeout and signal bits are the mark's.
func TestSkipMirroredData(t *testing.T) {
	l := New(Options{MemLimit: 8 << 10, SpillDir: t.TempDir()})
	defer l.Close()
	ctx := context.Background()
	var want []wire.Frame
	for seq := int64(1); seq <= 60; seq++ {
		f := wire.Frame{Stream: wire.Stdout, Data: payload(seq, 1000), Mirrored: seq%3 != 0}
		if seq%5 == 0 {
			f.Stream, f.Stage = wire.Stderr, 2
		}
		if _, err := l.Append(ctx, f); err != nil {
			t.Fatal(err)
		}
		f.Seq = seq
		want = append(want, f)
	}
	exit := wire.Frame{Stream: wire.Exit, ExitCode: -1, TimedOut: true, Signal: 9}
	if _, err := l.Append(ctx, exit); err != nil {
		t.Fatal(err)
	}
	exit.Seq = 61
	want = append(want, exit)
	for range 40 { // the exit frame to disk too
		if l.Shed() == 0 {
			break
		}
	}
	c := l.NewCursor(0)
	c.SkipMirroredData()
	var got []wire.Frame
	for {
		n0 := len(got)
		var err error
		got, err = c.Next(ctx, got, 1<<20)
		for i := n0; i < len(got); i++ {
			got[i].Data = bytes.Clone(got[i].Data) // memory frames are the log's
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("read %d frames, want %d", len(got), len(want))
	}
	fromDisk := 0
	for i, g := range got {
		w := want[i]
		if w.Mirrored && g.Data == nil {
			fromDisk++
			w.Data = nil
		}
		if len(g.Data) == 0 {
			g.Data = nil
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("frame %d read back as %+v, want %+v", i+1, g, w)
		}
	}
	if fromDisk < 30 {
		t.Fatalf("only %d mirrored frames came from disk without data", fromDisk)
	}
}

// A segment's runs of Mirrored frames, from which a reader skipping their
// data reads them without the file: a run per change of stream, stage or
// mark, and no more than maxRuns of them (what follows is read from the
// file).
func TestMirroredRuns(t *testing.T) {
	s := tempSegment(t)
	frames := []wire.Frame{
		{Stream: wire.Stdout, Mirrored: true}, {Stream: wire.Stdout, Mirrored: true}, // run 1-2
		{Stream: wire.Stderr, Mirrored: true},                                                            // run 3
		{Stream: wire.Stderr, Stage: 2, Mirrored: true}, {Stream: wire.Stderr, Stage: 2, Mirrored: true}, // run 4-5
		{Stream: wire.Stdout},                 // not mirrored
		{Stream: wire.Stdout, Mirrored: true}, // run 7
	}
	for i := range frames {
		frames[i].Seq, frames[i].Data = int64(i+1), []byte("x")
		if err := s.append(&frames[i]); err != nil {
			t.Fatal(err)
		}
	}
	for seq, want := range map[int64]mirroredRun{
		1: {1, 2, wire.Stdout, 0}, 2: {1, 2, wire.Stdout, 0}, 3: {3, 3, wire.Stderr, 0},
		4: {4, 5, wire.Stderr, 2}, 5: {4, 5, wire.Stderr, 2}, 7: {7, 7, wire.Stdout, 0},
	} {
		if got, ok := s.mirroredRun(seq); !ok || got != want {
			t.Errorf("run of %d: %+v %v, want %+v", seq, got, ok, want)
		}
	}
	if _, ok := s.mirroredRun(6); ok {
		t.Error("an unmirrored frame is in a run")
	}
	// Streams that alternate at every frame: a run each, up to maxRuns.
	seq := int64(len(frames))
	for i := range maxRuns + 10 {
		seq++
		f := wire.Frame{Seq: seq, Stream: wire.Stdout + wire.Stream(i%2), Mirrored: true, Data: []byte("y")}
		if err := s.append(&f); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.runs) != maxRuns {
		t.Fatalf("%d runs, want the cap %d", len(s.runs), maxRuns)
	}
	if _, ok := s.mirroredRun(seq); ok {
		t.Error("a frame past the cap is in a run")
	}
}
