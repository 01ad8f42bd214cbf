package testutil

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"testing"
)

// GzipBomb builds a real gzip bomb: a tar.gz holding one regular file
// "zeros" of size bytes (a multiple of 512), about a thousand times smaller
// than what it unpacks to. It is a multi-member gzip, which every gzip
// reader (and `tar xzf`) reads as one stream: a member of 64 MiB of zeros
// is compressed once and repeated, so building a bomb of gigabytes takes a
// fraction of a second.
func GzipBomb(tb testing.TB, size int64) []byte {
	tb.Helper()
	const chunk = 64 << 20
	if size%512 != 0 {
		tb.Fatalf("GzipBomb: size %d is not a multiple of 512", size)
	}
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
		tb.Fatal(err)
	}
	// The header is written at once; the body, the padding and the two
	// end-of-archive blocks are all zeros, written below.
	var out bytes.Buffer
	member := func(data []byte) []byte {
		var b bytes.Buffer
		zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := zw.Write(data); err != nil {
			tb.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			tb.Fatal(err)
		}
		return b.Bytes()
	}
	out.Write(member(hdr.Bytes()[:512]))
	zeros := member(make([]byte, chunk))
	rest := size + 1024 // the end-of-archive blocks
	for ; rest >= chunk; rest -= chunk {
		out.Write(zeros)
	}
	out.Write(member(make([]byte, rest)))
	return out.Bytes()
}
