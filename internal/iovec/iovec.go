// Package iovec holds what a writev(2) loop needs: the kernel's limit on
// buffers a call, and the buffers left after a call wrote part of them.
package iovec

// Max is the kernel's IOV_MAX: the most buffers one writev takes.
const Max = 1024

// Consumed drops the first n bytes of parts, as a writev that wrote n
// leaves them: whole buffers go, and the first one left starts past what
// was written of it.
func Consumed(parts [][]byte, n int) [][]byte {
	for len(parts) > 0 && n >= len(parts[0]) {
		n -= len(parts[0])
		parts = parts[1:]
	}
	if len(parts) > 0 {
		parts[0] = parts[0][n:]
	}
	return parts
}
