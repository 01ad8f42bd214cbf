//go:build (amd64 || arm64) && !purego

package vbase64

import "encoding/base64"

// An Encoding is segmentio/asm's: a vector encoder and decoder with their
// lookup tables, for the prefix they take, and encoding/base64 for the
// rest.
type Encoding struct {
	enc    func(dst []byte, src []byte, lut *int8) (int, int)
	enclut [encLutSize]int8

	dec    func(dst []byte, src []byte, lut *int8) (int, int)
	declut [decLutSize]int8

	base *base64.Encoding
}

// Encode writes the encoding of src to dst, which holds
// EncodedLen(len(src)) bytes.
func (enc *Encoding) Encode(dst, src []byte) {
	if len(src) >= minEncodeLen && enc.enc != nil {
		d, s := enc.enc(dst, src, &enc.enclut[0])
		dst = dst[d:]
		src = src[s:]
	}
	enc.base.Encode(dst, src)
}

// Decode decodes src into dst, which holds DecodedLen(len(src)) bytes, and
// returns the number of bytes written. An error's offset counts from where
// the vector code handed over.
func (enc *Encoding) Decode(dst, src []byte) (n int, err error) {
	var d, s int
	if len(src) >= minDecodeLen && enc.dec != nil {
		d, s = enc.dec(dst, src, &enc.declut[0])
		dst = dst[d:]
		src = src[s:]
	}
	n, err = enc.base.Decode(dst, src)
	n += d
	return
}
