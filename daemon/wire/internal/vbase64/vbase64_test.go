package vbase64

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// The round trip of every length around the vector blocks, against
// encoding/base64 (daemon/wire's tests and fuzz target hold the decoder
// to it on bad input).
func TestStdIsEncodingBase64s(t *testing.T) {
	raw := make([]byte, 600)
	for i := range raw {
		raw[i] = byte(i*131 + i>>3)
	}
	for n := range len(raw) {
		src := raw[:n]
		want := base64.StdEncoding.EncodeToString(src)
		enc := make([]byte, base64.StdEncoding.EncodedLen(n))
		Std().Encode(enc, src)
		if string(enc) != want {
			t.Fatalf("Encode of %d bytes = %q, want %q", n, enc, want)
		}
		dec := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
		m, err := Std().Decode(dec, enc)
		if err != nil || !bytes.Equal(dec[:m], src) {
			t.Fatalf("Decode of %d bytes = %x, %v", n, dec[:m], err)
		}
	}
}
