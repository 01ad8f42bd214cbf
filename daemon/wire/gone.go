package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Gone tells a client that the daemon no longer follows a process for it
// and never will send its exit frame (extension process.gone, only to a
// client that asked with notifyGone):
//
//	{"type":"gone","processId":"<id>","pid":123,"startTime":1700000000.5,"reason":"replaced"}
//
// Pid and StartTime name the process that is gone, as process.spawn and
// process.reattach report them with wantPid, so that a client that has
// already moved on to a new process with the same id can tell the two
// apart.
type Gone struct {
	ID        string  `json:"processId"`
	Pid       int     `json:"pid"`
	StartTime float64 `json:"startTime"`
	Reason    string  `json:"reason"`
}

// The reasons of a Gone notification.
const (
	GoneReplaced  = "replaced"  // a process.spawn reused the id
	GoneForgotten = "forgotten" // the daemon stopped retaining the process
)

var goneType = []byte(`"type":"gone"`)

// AppendGone appends g as a notification line; quotedID is QuoteID(g.ID).
func AppendGone(dst, quotedID []byte, g Gone) []byte {
	dst = append(dst, `{"type":"gone","processId":`...)
	dst = append(dst, quotedID...)
	dst = append(dst, `,"pid":`...)
	dst = strconv.AppendInt(dst, int64(g.Pid), 10)
	dst = append(dst, `,"startTime":`...)
	dst = strconv.AppendFloat(dst, g.StartTime, 'f', -1, 64)
	dst = append(dst, `,"reason":`...)
	dst = strconv.AppendQuote(dst, g.Reason) // the reasons are plain ASCII
	return append(dst, "}\n"...)
}

// ParseGone decodes a Gone notification line; ok is false for any other line.
func ParseGone(line []byte) (g Gone, ok bool) {
	if !bytes.Contains(line, goneType) {
		return Gone{}, false
	}
	var v struct {
		Type string `json:"type"`
		Gone
	}
	if err := json.Unmarshal(line, &v); err != nil || v.Type != "gone" || v.ID == "" {
		return Gone{}, false
	}
	return v.Gone, true
}
