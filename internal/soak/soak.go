// Package soak sizes the reliability tests: small enough for CI by default,
// long and large with SOUS_SOAK=1.
//
//	go test ./...                                  # CI sizes (bounded time)
//	SOUS_SOAK=1 go test -timeout 2h -run 'Fault|Load|Reconnect' ./...   # soak sizes
//
// SOUS_SOAK=N with N > 1 multiplies the soak sizes and durations by N.
package soak

import (
	"os"
	"strconv"
	"time"
)

// Factor is 0 in CI mode, else the SOUS_SOAK multiplier (1 for SOUS_SOAK=1
// or any value that is not a number).
func Factor() int {
	v := os.Getenv("SOUS_SOAK")
	if v == "" || v == "0" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 1 {
		return n
	}
	return 1
}

// Enabled reports whether SOUS_SOAK asks for the soak sizes.
func Enabled() bool { return Factor() > 0 }

// Int is ci in CI mode, else soak times the factor.
func Int(ci, soak int) int {
	if f := Factor(); f > 0 {
		return soak * f
	}
	return ci
}

// Duration is ci in CI mode, else soak times the factor.
func Duration(ci, soak time.Duration) time.Duration {
	if f := Factor(); f > 0 {
		return soak * time.Duration(f)
	}
	return ci
}
