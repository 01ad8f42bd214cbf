package streamlog

import (
	"reflect"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Spilled frames keep the extension members: a pipeline stage's stderr,
// the stage codes, timeout and signal of an exit frame, and the Mirrored mark.
func TestSegmentKeepsExtensionMembers(t *testing.T) {
	s, err := newSegment(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.remove()
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
	out, err := s.read(nil, 1, 0, s.size, 1, 1<<20)
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
}
