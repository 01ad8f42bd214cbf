package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// The line a resumed run writes to an old CLI's stdin is one JSON line in
// the form Session.control sends its own requests.
func TestControlRequestLine(t *testing.T) {
	line := ControlRequestLine("sous-run1-7-interrupt", "interrupt")
	if !bytes.HasSuffix(line, []byte("}\n")) || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("%q is not one line", line)
	}
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "control_request", "request_id": "sous-run1-7-interrupt",
		"request": map[string]any{"subtype": "interrupt"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s\nwant %v", line, want)
	}
	viaControl, _ := json.Marshal(controlRequest("sous-run1-7-interrupt", "interrupt", nil))
	if !bytes.Equal(line[:len(line)-1], viaControl) {
		t.Errorf("differs from Session.control's form: %s against %s", line, viaControl)
	}
}
