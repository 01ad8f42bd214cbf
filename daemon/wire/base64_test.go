package wire

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// sameAsStdlib fails t unless DecodeBase64 gives encoding/base64's result
// for src: the same bytes, or the same error.
func sameAsStdlib(t *testing.T, src []byte) {
	t.Helper()
	want := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
	wn, werr := base64.StdEncoding.Decode(want, src)
	// Spare capacity filled with a canary: the vector code must not write
	// past the length it was given.
	buf := bytes.Repeat([]byte{0xa5}, len(want)+64)
	got := buf[:len(want)]
	gn, gerr := DecodeBase64(got, src)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("decode %q: error %v, encoding/base64 says %v", src, gerr, werr)
	}
	if werr == nil && !bytes.Equal(got[:gn], want[:wn]) {
		t.Fatalf("decode %q: %x, encoding/base64 says %x", src, got[:gn], want[:wn])
	}
	for _, c := range buf[len(got):] {
		if c != 0xa5 {
			t.Fatalf("decode %q wrote past its destination", src)
		}
	}
}

func TestBase64MatchesStdlib(t *testing.T) {
	raw := make([]byte, 300)
	for i := range raw {
		raw[i] = byte(i * 37)
	}
	// Every length around the vector code's 24- and 32-byte blocks, each
	// cut short and with each kind of bad or skipped byte at every offset.
	odd := []byte("=\n\r -_.\x00\xff\x7f")
	for n := 0; n <= len(raw); n++ {
		enc := []byte(base64.StdEncoding.EncodeToString(raw[:n]))
		if got := EncodeBase64(raw[:n]); got != string(enc) {
			t.Fatalf("encode %d bytes: %q, encoding/base64 says %q", n, got, enc)
		}
		for cut := 0; cut <= min(2, len(enc)); cut++ {
			src := enc[:len(enc)-cut]
			sameAsStdlib(t, src)
			for at := 0; at < len(src) && n%7 == 0; at++ {
				for _, c := range odd {
					bad := bytes.Clone(src)
					bad[at] = c
					sameAsStdlib(t, bad)
					sameAsStdlib(t, append(append(bytes.Clone(src[:at]), c), src[at:]...))
				}
			}
		}
	}
	// And frame-sized data, as the daemon sends it.
	r := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, MaxFrameData)
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	enc := AppendBase64([]byte("prefix"), big)
	if string(enc[6:]) != base64.StdEncoding.EncodeToString(big) {
		t.Fatal("AppendBase64 of a frame differs from encoding/base64")
	}
	sameAsStdlib(t, enc[6:])
}

func FuzzBase64MatchesStdlib(f *testing.F) {
	f.Add([]byte("aGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29ybGQgaGVsbG8gd29y"))
	f.Add([]byte("aGVs\nbG8="))
	f.Add([]byte("aGVsbG8"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsStdlib(t, b)
		enc := []byte(base64.StdEncoding.EncodeToString(b))
		if got := EncodeBase64(b); got != string(enc) {
			t.Fatalf("encode %x: %q, encoding/base64 says %q", b, got, enc)
		}
		sameAsStdlib(t, enc)
	})
}
