package webui

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// NewToken returns a fresh random token (256 bits, URL-safe): the token of
// one run's page.
func NewToken() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// bearerMatches reports whether an Authorization header carries token. The
// comparison takes the same time whatever the header holds: both sides
// are hashed first, so neither the length nor a common prefix shows.
func bearerMatches(header, token string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || token == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
