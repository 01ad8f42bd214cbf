package wire

import (
	"bytes"
	"testing"
)

// The daemon's own output frames take the short path, and read as the
// general parser reads them; its other frames are the general parser's.
func TestOwnLayoutReadsTheDaemonsFrames(t *testing.T) {
	for _, fr := range []Frame{
		{Seq: 1, Stream: Stdout, Data: bytes.Repeat([]byte("abc\x00\xff"), 7000)},
		{Seq: 2, Stream: Stderr, Data: []byte("x")},
		{Seq: 3, Stream: Stdout, Data: []byte("ab"), Stage: 3},
		{Seq: 1 << 40, Stream: Stdout, Data: []byte("hi"), Stage: maxStages},
		{Seq: 5, Stream: Stdout},
	} {
		line := AppendFrame(nil, QuoteID("proc-1"), &fr)
		var own, gen Frame
		id, ok := parseOwnLayout(line, &own)
		if _, trimmed := parseOwnLayout(bytes.TrimSuffix(line, []byte("\n")), &Frame{}); !ok || !trimmed {
			t.Fatalf("%.80q: not read as the daemon's own layout", line)
		}
		genID, err := parseFrame(line, &gen, new(int))
		if err != nil || string(id) != "proc-1" || string(genID) != "proc-1" || !sameFrame(&own, &gen) {
			t.Fatalf("%.80q: own %+v, general %+v, %v", line, own, gen, err)
		}
	}
	for _, line := range []string{
		`{"type":"stream","processId":"p","stream":"exit","seq":4,"exitCode":0}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":5,"mirrored":true}`,
		`{"type":"stream","processId":"a\/b","stream":"stdout","seq":5,"data":"aGk="}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":5,"data":"aGk=","x":"}"}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":5,"data":"aG\nk="}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":5,"data":"aGk=","stage":1,"stage":2}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":5,"data":"aGk=","stage":-1}`,
		`{"type":"stream","processId":"p","stream":"stdout","seq":5,"data":"aGk="} `,
		`{"type":"stream","processId":"p","stream":"stdout","seq":5,"data":"aGk="}` + "\r\n",
	} {
		var fr Frame
		if _, ok := parseOwnLayout([]byte(line), &fr); ok {
			t.Fatalf("%s: read as the daemon's own layout", line)
		}
	}
}
