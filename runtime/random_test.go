package runtime

import (
	"encoding/hex"
	"testing"
)

// TestRunIDsAreRandomHex: run and request ids come from getrandom(2) on
// Linux (random_linux.go): 16 and 8 hex digits, never the same twice.
func TestRunIDsAreRandomHex(t *testing.T) {
	t.Parallel()
	seen := make(map[string]bool)
	for range 200 {
		run, ask := newRunID(), newAskID()
		for _, id := range []string{run, ask} {
			if _, err := hex.DecodeString(id); err != nil || seen[id] {
				t.Fatalf("id %q: %v, seen before: %v", id, err, seen[id])
			}
			seen[id] = true
		}
		if len(run) != 16 || len(ask) != 8 {
			t.Fatalf("run id %q, request id %q: want 16 and 8 hex digits", run, ask)
		}
	}
}
