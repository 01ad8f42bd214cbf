package runtime

import (
	"encoding/json"
	"testing"
)

// FuzzJournalValue: whatever a journal's answer holds, reading it back
// does not panic, what it reads is a value the journal can keep again, and
// the hand-written encoder writes that as encoding/json does.
func FuzzJournalValue(f *testing.F) {
	for _, s := range []string{
		`{"t":"none"}`, `{"t":"int","s":"-12345678901234567890"}`, `{"t":"float","s":"NaN"}`,
		`{"t":"str","b":"/w=="}`, `{"t":"list","l":[{"t":"true"},{"t":"tuple"}]}`,
		`{"t":"dict","l":[{"t":"list"}],"v":[{"t":"none"}]}`, `{"t":"struct","l":[{"t":"int","s":"1"}],"v":[{"t":"none"}]}`,
		`{"t":"time","s":"2026-11-26T01:02:03.000456789Z"}`, `{"t":"duration","s":"1500000000"}`,
		`{"t":"x:Result","d":{"status":"ok"}}`,
	} {
		f.Add([]byte(s))
	}
	env := &Env{Table: MustTable()}
	f.Fuzz(func(t *testing.T, data []byte) {
		var k keptValue
		if json.Unmarshal(data, &k) != nil {
			return
		}
		v, err := k.value(env)
		if err != nil {
			return
		}
		again, err := keepValue(v)
		if err != nil {
			t.Fatalf("%s read back as %s, which cannot be kept: %v", data, v, err)
		}
		// Kept again, it encodes as encoding/json would encode it.
		checkKeptValueJSON(t, again)
	})
}
