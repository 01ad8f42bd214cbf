//go:build !amd64

package streamlog

// copySpill copies src into dst as copy does.
func copySpill(dst, src []byte) int { return copy(dst, src) }
