package streamlog

import (
	"bytes"
	"testing"
)

// copySpill copies exactly what copy does, wherever the two slices start
// and whatever their lengths, and writes nothing past the end of dst's
// part: around the thresholds of its non-temporal body (minNonTemporal,
// the 16-byte alignment of its first store, whole 64-byte steps) and into
// a write buffer (mapped memory, as spilling copies into) as well as the
// heap.
func TestCopySpillMatchesCopy(t *testing.T) {
	const room = 3 * minNonTemporal
	src := make([]byte, room+64)
	for i := range src {
		src[i] = byte(i*7 + i>>8)
	}
	mapped := writeBuffer(room + 256)
	defer freeBuffer(mapped)
	heap := make([]byte, room+256)
	lengths := []int{0, 1, 15, 63, 64, minNonTemporal - 1, minNonTemporal, minNonTemporal + 1,
		minNonTemporal + 15, minNonTemporal + 63, minNonTemporal + 64, 2*minNonTemporal + 17, room}
	for name, dst := range map[string][]byte{"mapped": mapped[:cap(mapped)], "heap": heap} {
		for off := range 32 {
			for soff := range 3 {
				for _, n := range lengths {
					for i := range dst {
						dst[i] = 0xee
					}
					part := dst[off : off+n]
					if got := copySpill(part, src[soff:soff+n+40]); got != n {
						t.Fatalf("%s off %d n %d: copied %d", name, off, n, got)
					}
					if !bytes.Equal(part, src[soff:soff+n]) {
						t.Fatalf("%s off %d soff %d n %d: bytes differ", name, off, soff, n)
					}
					for i, b := range dst {
						if (i < off || i >= off+n) && b != 0xee {
							t.Fatalf("%s off %d n %d: byte %d outside dst written", name, off, n, i)
						}
					}
				}
			}
		}
	}
}

// A shorter source copies only its length, as copy does.
func TestCopySpillShortSource(t *testing.T) {
	dst := make([]byte, 3*minNonTemporal)
	src := bytes.Repeat([]byte{9}, 2*minNonTemporal+5)
	if n := copySpill(dst[3:], src); n != len(src) || !bytes.Equal(dst[3:3+n], src) || dst[3+n] != 0 || dst[2] != 0 {
		t.Fatalf("copied %d", n)
	}
}

func FuzzCopySpill(f *testing.F) {
	f.Add(uint16(0), uint16(0), uint16(minNonTemporal), byte(1))
	f.Add(uint16(7), uint16(3), uint16(minNonTemporal+77), byte(200))
	f.Fuzz(func(t *testing.T, off, soff, n uint16, seed byte) {
		o, so, k := int(off%64), int(soff%64), int(n)
		src := make([]byte, so+k)
		for i := range src {
			src[i] = byte(i) ^ seed
		}
		dst := make([]byte, o+k+64)
		want := make([]byte, len(dst))
		copy(want[o:o+k], src[so:])
		if got := copySpill(dst[o:o+k], src[so:]); got != k {
			t.Fatalf("copied %d, want %d", got, k)
		}
		if !bytes.Equal(dst, want) {
			t.Fatal("dst differs from copy's")
		}
	})
}
