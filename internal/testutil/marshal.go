package testutil

import (
	"encoding/json"
	"testing"
)

// EncodesAsMarshal fails tb unless encode, a hand-written JSON encoder of
// v appending to its argument, writes what json.Marshal(v) writes, byte for
// byte, after what it was given.
func EncodesAsMarshal(tb testing.TB, v any, encode func(dst []byte) []byte) {
	tb.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	if got := encode([]byte("x")); string(got) != "x"+string(want) {
		tb.Fatalf("the hand-written encoder wrote\n%s\njson.Marshal\n%s", got[1:], want)
	}
}
