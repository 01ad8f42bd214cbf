package agent

import (
	"os"
	"regexp"
	"testing"
)

// TestWebSocketBearerCompareIsConstantTime reviews the agent WebSocket's
// per-session token check (a timing test would be flaky): it compares
// SHA-256 digests of the presented header and of the expected one with
// crypto/subtle, so neither the token's bytes nor its length show in the
// time a refusal takes.
func TestWebSocketBearerCompareIsConstantTime(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("websocket.go")
	if err != nil {
		t.Fatal(err)
	}
	fn := regexp.MustCompile(`(?s)func \(t \*wsTransport\) serveHTTP\(.*?\n}\n`).Find(src)
	if fn == nil {
		t.Fatal("serveHTTP not found: update this review test")
	}
	for _, want := range []string{
		`sha256\.Sum256\(\[\]byte\(r\.Header\.Get\("Authorization"\)\)\)`,
		`sha256\.Sum256\(\[\]byte\("Bearer " \+ t\.token\)\)`,
		`subtle\.ConstantTimeCompare\(got\[:\], want\[:\]\) != 1`,
	} {
		if !regexp.MustCompile(want).Match(fn) {
			t.Errorf("serveHTTP does not match %s:\n%s", want, fn)
		}
	}
	if regexp.MustCompile(`t\.token\s*[!=]=|[!=]=\s*t\.token`).Match(src) {
		t.Error("websocket.go compares the session token with == or !=")
	}
}
