package client

import (
	"encoding/json"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// TestAppendParamsIsJSONMarshals: run.append's params written by hand are
// byte for byte what json.Marshal makes of wire.RunAppendParams, for
// records as json.Marshal writes them.
func TestAppendParamsIsJSONMarshals(t *testing.T) {
	for _, c := range []struct {
		run, lease string
		at         int
		recs       []json.RawMessage
		sync       bool
	}{
		{"r1", "L1", 1, []json.RawMessage{json.RawMessage(`{"k":"call","seq":1}`)}, false},
		{"r-2", "a\"b\\c<>&\u2028", 4871, []json.RawMessage{json.RawMessage(`{"k":"print"}`), json.RawMessage(`{"k":"answer","seq":1,"value":{"t":"str","v":"x"}}`)}, true},
		{"r3", "", 0, []json.RawMessage{}, false},
	} {
		got := appendParams(c.run, c.lease, c.at, c.recs, c.sync)
		want, err := json.Marshal(wire.RunAppendParams{Run: c.run, Lease: c.lease, At: c.at, Records: c.recs, Sync: c.sync})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("appendParams:\n got %s\nwant %s", got, want)
		}
	}
}
