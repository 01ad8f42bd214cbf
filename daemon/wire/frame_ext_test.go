package wire

import (
	"encoding/json"
	"slices"
	"testing"
)

// The extension members: only on the frames of processes that use the
// extensions, so ordinary frames keep claustrum's exact bytes.
func TestFrameExtensionMembers(t *testing.T) {
	id := QuoteID("p")
	for _, tc := range []struct {
		f    Frame
		want string
	}{
		{Frame{Seq: 2, Stream: Stderr, Stage: 3, Data: []byte("e")}, `{"type":"stream","processId":"p","stream":"stderr","seq":2,"data":"ZQ==","stage":2}`},
		{Frame{Seq: 2, Stream: Stderr, Stage: 1}, `{"type":"stream","processId":"p","stream":"stderr","seq":2,"data":"","stage":0}`},
		{Frame{Seq: 4, Stream: Exit, ExitCode: 5, StageCodes: []int{141, 0, 5}}, `{"type":"stream","processId":"p","stream":"exit","seq":4,"exitCode":5,"stageExitCodes":[141,0,5]}`},
		{Frame{Seq: 4, Stream: Exit, ExitCode: -1, TimedOut: true}, `{"type":"stream","processId":"p","stream":"exit","seq":4,"exitCode":-1,"timedOut":true}`},
		{Frame{Seq: 4, Stream: Exit, ExitCode: -1, StageCodes: []int{143}, TimedOut: true}, `{"type":"stream","processId":"p","stream":"exit","seq":4,"exitCode":-1,"stageExitCodes":[143],"timedOut":true}`},
		{Frame{Seq: 4, Stream: Exit, ExitCode: 0, StageCodes: []int{}}, `{"type":"stream","processId":"p","stream":"exit","seq":4,"exitCode":0}`},
		{Frame{Seq: 4, Stream: Exit, ExitCode: -1, Signal: 11}, `{"type":"stream","processId":"p","stream":"exit","seq":4,"exitCode":-1,"signal":11}`},
		{Frame{Seq: 4, Stream: Exit, ExitCode: -1, StageCodes: []int{137}, TimedOut: true, Signal: 9}, `{"type":"stream","processId":"p","stream":"exit","seq":4,"exitCode":-1,"stageExitCodes":[137],"timedOut":true,"signal":9}`},
	} {
		line := AppendFrame(nil, id, &tc.f)
		if string(line) != tc.want+"\n" {
			t.Errorf("got  %s\nwant %s", line, tc.want)
		}
		if !json.Valid(line) {
			t.Errorf("invalid JSON %s", line)
		}
		var back Frame
		if _, err := ParseFrame(line, &back); err != nil || back.Stage != tc.f.Stage*boolInt(tc.f.Stream != Exit) ||
			back.TimedOut != tc.f.TimedOut || back.Signal != tc.f.Signal || !slices.Equal(back.StageCodes, tc.f.StageCodes) && len(tc.f.StageCodes) > 0 {
			t.Errorf("%s parsed back as %+v (%v)", line, back, err)
		}
	}

	var f Frame
	if _, err := ParseFrame([]byte(`{"type":"stream","processId":"p","stream":"exit","seq":1,"exitCode":0,"stageExitCodes":null,"timedOut":false,"stage":null}`), &f); err != nil ||
		f.StageIndex() != -1 || len(f.StageCodes) != 0 || f.TimedOut {
		t.Errorf("nulls: %+v %v", f, err)
	}
	for _, bad := range []string{
		`{"type":"stream","processId":"p","stream":"stderr","seq":1,"stage":-1}`,
		`{"type":"stream","processId":"p","stream":"stderr","seq":1,"stage":1.5}`,
		`{"type":"stream","processId":"p","stream":"stderr","seq":1,"stage":99999999}`,
		`{"type":"stream","processId":"p","stream":"exit","seq":1,"stageExitCodes":[1,]}`,
		`{"type":"stream","processId":"p","stream":"exit","seq":1,"stageExitCodes":{}}`,
		`{"type":"stream","processId":"p","stream":"exit","seq":1,"stageExitCodes":[1 2]}`,
		`{"type":"stream","processId":"p","stream":"exit","seq":1,"timedOut":"yes"}`,
		`{"type":"stream","processId":"p","stream":"exit","seq":1,"timedOut":tru}`,
		`{"type":"stream","processId":"p","stream":"exit","seq":1,"signal":-1}`,
		`{"type":"stream","processId":"p","stream":"exit","seq":1,"signal":999}`,
		`{"type":"stream","processId":"p","stream":"exit","seq":1,"signal":"SEGV"}`,
	} {
		if _, err := ParseFrame([]byte(bad), &f); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ParseFrame stays allocation-free with the extension members: the stage
// codes reuse the frame's storage like its data.
func TestParseFrameExtensionsAllocationFree(t *testing.T) {
	lines := [][]byte{
		AppendFrame(nil, QuoteID("p"), &Frame{Seq: 1, Stream: Stderr, Stage: 2, Data: []byte("some error output")}),
		AppendFrame(nil, QuoteID("p"), &Frame{Seq: 2, Stream: Exit, ExitCode: 1, StageCodes: []int{0, 141, 1}, TimedOut: true}),
	}
	var f Frame
	for _, l := range lines {
		ParseFrame(l, &f) // grow the buffers once
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, l := range lines {
			if _, err := ParseFrame(l, &f); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per parse", allocs)
	}
}
