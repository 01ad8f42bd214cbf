package daemon

import (
	"encoding/json"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// TestPongIsThePingResult: pong is written out by hand so that no start of
// sous pays encoding/json at init; it must be what encoding the result gives.
func TestPongIsThePingResult(t *testing.T) {
	t.Parallel()
	want, err := json.Marshal(wire.PingResult{Pong: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := pong.(json.RawMessage); string(got) != string(want) || cap(got) != len(got) {
		t.Errorf("pong = %s (cap %d), want %s", got, cap(got), want)
	}
}
