package runtime

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// TestEchoRedactsAcrossTheLongLineCut: a line longer than the echo holds
// goes out in pieces; a secret that the cut falls inside of is still
// replaced, and the line still reads as one line (no "[id] " inside it).
func TestEchoRedactsAcrossTheLongLineCut(t *testing.T) {
	const secret = "tok-0123456789"
	for _, json := range []bool{false, true} {
		var stdout, stderr bytes.Buffer
		o := testOutput(&stdout, &stderr, json)
		o.start(Options{Recipe: "r.star"})
		if !o.Redact(secret) {
			t.Fatal("Redact refused the secret")
		}
		o.Spawned(SpawnInfo{ID: "a", Command: []string{"x"}, Host: "embedded"})
		o.Spawned(SpawnInfo{ID: "b", Command: []string{"x"}, Host: "embedded"})
		e := o.Echo("a")
		o.Echo("b") // two echo at once: lines are prefixed
		long := strings.Repeat("x", maxPartialLine)
		e.Write(wire.Stdout, []byte(long+secret[:5])) // past the bound: goes out, cut in the secret
		e.Write(wire.Stdout, []byte(secret[5:]+" end\nnext "+secret[:3]))
		e.Write(wire.Stdout, []byte(secret[3:]))
		e.Close()
		o.end(&event.End{Status: "ok"})
		out := stdout.String()
		if strings.Contains(out, secret) || strings.Contains(out, secret[:5]+secret[5:]) {
			t.Fatalf("json=%v: the secret is in the output", json)
		}
		if json {
			if !strings.Contains(out, `"data":"***`) || !strings.Contains(out, `next `) {
				t.Errorf("json: the output lacks the marker: %s", out[len(out)-600:])
			}
			continue
		}
		want := "[a] " + long + "*** end\n[a] next ***\n"
		if out != want {
			t.Errorf("got ...%q, want ...%q", tail(out), tail(want))
		}
	}
}

func tail(s string) string { return s[max(0, len(s)-40):] }
