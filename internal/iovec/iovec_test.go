package iovec

import (
	"bytes"
	"testing"
)

// Whatever a writev wrote, what Consumed leaves is the rest of the bytes,
// in order.
func TestConsumed(t *testing.T) {
	all := []byte("abcdefghij")
	for n := 0; n <= len(all); n++ {
		parts := [][]byte{all[:3], all[3:3], all[3:7], all[7:]}
		if got := bytes.Join(Consumed(parts, n), nil); !bytes.Equal(got, all[n:]) {
			t.Errorf("after %d bytes: %q, want %q", n, got, all[n:])
		}
	}
}
