package streamlog

import "unsafe"

// copyNonTemporal copies n bytes (a multiple of 64) from src to dst (16-byte
// aligned) with stores that bypass the cache. Implemented in ntcopy_amd64.s.
//
//go:noescape
func copyNonTemporal(dst, src *byte, n uintptr)

// copySpill copies src into dst as copy does. Long copies go around the
// cache: the write buffer is only read again by the disk.
func copySpill(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < minNonTemporal {
		return copy(dst, src[:n])
	}
	head := int(-uintptr(unsafe.Pointer(unsafe.SliceData(dst))) & 15)
	copy(dst[:head], src[:head])
	body := (n - head) &^ 63
	copyNonTemporal(&dst[head], &src[head], uintptr(body))
	copy(dst[head+body:n], src[head+body:n])
	return n
}

// minNonTemporal is the shortest copy copySpill makes non-temporal.
const minNonTemporal = 4096
