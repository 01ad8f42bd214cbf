package runlog

import (
	"encoding/json"
	"reflect"
	"testing"
)

func mustJSON(t testing.TB, r Record) []byte {
	p, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzJournalDecode: whatever the bytes, Decode does not panic, what it
// reads is what whole frames say, and the good prefix it reports decodes
// to the same records on its own.
func FuzzJournalDecode(f *testing.F) {
	whole := []byte(magic)
	for _, r := range sample() {
		whole = appendFrame(whole, mustJSON(f, r))
	}
	f.Add(whole)
	f.Add(whole[:len(whole)-3])
	f.Add([]byte(magic))
	f.Add([]byte("sousjnl1\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, good, err := Decode(data)
		if err != nil {
			return
		}
		if good > len(data) || good < len(magic) {
			t.Fatalf("good %d of %d bytes", good, len(data))
		}
		again, good2, err := Decode(data[:good])
		if err != nil || good2 != good || !reflect.DeepEqual(again, recs) {
			t.Fatalf("the good prefix reads differently: %v", err)
		}
		// Re-framing the records gives frames that read back the same.
		re := []byte(magic)
		for _, r := range recs {
			re = appendFrame(re, mustJSON(t, r))
		}
		back, _, err := Decode(re)
		if err != nil || len(back) != len(recs) {
			t.Fatalf("re-framed records: %v", err)
		}
	})
}
