//go:build purego || !(amd64 || arm64)

package vbase64

import "encoding/base64"

// Encoding is encoding/base64's where there is no vector code.
type Encoding = base64.Encoding

func newEncoding(encoder string) *Encoding { return base64.NewEncoding(encoder) }
