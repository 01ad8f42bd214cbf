package wire

import (
	"encoding/base64"

	"github.com/seed5ad92d46/sous/daemon/wire/internal/vbase64"
)

// Output and stdin travel base64-encoded (docs/PROTOCOL.md): every byte a child
// writes is encoded once by the daemon and decoded once by each client, and
// every stdin byte the other way round. segmentio/asm's encoding (copied
// as internal/vbase64, made on first use so that a start of sous does not
// pay its CPU detection) is encoding/base64's standard alphabet with
// padding, vectorized with AVX2 on amd64 and NEON on arm64 (14x faster on
// this project's machines), falling back to encoding/base64 for short
// inputs, the tail of long ones and other CPUs. TestBase64MatchesStdlib and
// FuzzBase64MatchesStdlib hold it to encoding/base64's output and to the
// inputs it rejects.
var fastStd = vbase64.Std

// AppendBase64 appends the standard base64 encoding of src to dst.
func AppendBase64(dst, src []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(src))
	dst = growBy(dst, n)
	fastStd().Encode(dst[len(dst):len(dst)+n], src)
	return dst[:len(dst)+n]
}

// EncodeBase64 returns the standard base64 encoding of src.
func EncodeBase64(src []byte) string {
	return string(AppendBase64(nil, src))
}

// DecodeBase64 decodes standard base64 from src into dst, which must hold
// base64.StdEncoding.DecodedLen(len(src)) bytes, and returns the bytes
// written. As encoding/base64, it skips '\r' and '\n'; its errors are
// encoding/base64's own (with the offset into src).
func DecodeBase64(dst, src []byte) (int, error) {
	n, err := fastStd().Decode(dst, src)
	if err != nil {
		// The fast path reports offsets from where it handed over; the
		// standard library's error says where in src the input went bad.
		return base64.StdEncoding.Decode(dst, src)
	}
	return n, nil
}

// DecodeBase64Bytes returns the decoding of src in a new slice.
func DecodeBase64Bytes(src []byte) ([]byte, error) {
	dst := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
	n, err := DecodeBase64(dst, src)
	return dst[:n], err
}
